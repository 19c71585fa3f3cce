package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// RunSuffix separates a command's mutation ID from the number of one of its
// runs: the runs of desired-state command "m1" are the operations
// "m1:run-1", "m1:run-2", ... (see PrepareRun).
const RunSuffix = ":run-"

// MaxRunNumberDigits bounds the digits of a run number, so a command whose
// runs are numbered needs a mutation ID at most 128 - len(RunSuffix) -
// MaxRunNumberDigits characters long.
const MaxRunNumberDigits = 10

// RunID is the mutation ID of run n of the command whose mutation ID is id.
func RunID(id string, n int64) string { return id + RunSuffix + strconv.FormatInt(n, 10) }

// SplitRunID returns the command's mutation ID and the run number of a run's
// mutation ID; ok is false when mutationID is not a run's.
func SplitRunID(mutationID string) (id string, n int64, ok bool) {
	i := strings.LastIndex(mutationID, RunSuffix)
	if i <= 0 {
		return "", 0, false
	}
	digits := mutationID[i+len(RunSuffix):]
	if digits == "" || len(digits) > MaxRunNumberDigits || digits[0] == '0' {
		return "", 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return mutationID[:i], n, true
}

// PrepareRun journals one run of a desired-state command (a credential plan
// runs on every sync): p.MutationID names the command, and each run is an
// operation of its own, RunID(p.MutationID, n). In one transaction it finds
// the command's newest run (or an operation journaled under the command's
// own mutation ID by an older keyledger, counted as run 0):
//
//   - a different kind or command digest: ErrDigestMismatch (the mutation ID
//     names another command);
//   - not terminal (a crash, exit 75, a retried pod): that run is returned,
//     created=false, and the caller resumes it;
//   - terminal, or none: run n+1 is inserted with its preparation record
//     (created=true). When a concurrent run inserted it first, that run is
//     returned (created=false), so concurrent runs of one command drive one
//     operation.
func (s *Store) PrepareRun(ctx context.Context, p PrepareParams) (op *Operation, created bool, err error) {
	if len(p.MutationID)+len(RunSuffix)+MaxRunNumberDigits > 128 {
		return nil, false, &localError{fmt.Errorf("mutation ID of a command run as a series is longer than %d characters", 128-len(RunSuffix)-MaxRunNumberDigits)}
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		latest, err := scanOperation(tx.QueryRow(ctx, latestRunQuery, p.MutationID))
		next := int64(1)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return wrap("reading the command's runs", err)
		case latest.CommandDigest != p.CommandDigest || latest.Kind != p.Kind:
			return ErrDigestMismatch
		case !latest.State.Terminal():
			op = latest
			return nil
		default:
			if _, n, ok := SplitRunID(latest.MutationID); ok && latest.MutationID != p.MutationID {
				next = n + 1
			}
		}
		run := p
		run.MutationID = RunID(p.MutationID, next)
		detail := map[string]any{}
		for k, v := range p.Detail {
			detail[k] = v
		}
		detail["command"], detail["run"] = p.MutationID, next
		run.Detail = detail
		op, created, err = prepareIn(ctx, tx, run)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return op, created, nil
}

// runSeries is the command a run's mutation ID belongs to (NULL for any
// other operation): a stored generated column of migration 6, indexed with
// id (operations_run_series). A plain equality on it is what row-level
// security lets the index serve (see the migration).
const runSeries = `run_series`

// latestRunQuery reads the newest run of command $1 (or the operation
// journaled under $1 itself by an older keyledger, run 0) in two index
// probes, whatever the number of runs.
const latestRunQuery = `SELECT ` + operationColumns + ` FROM (
	(SELECT * FROM keyledger.operations WHERE ` + runSeries + ` = $1 ORDER BY id DESC LIMIT 1)
	UNION ALL
	(SELECT * FROM keyledger.operations WHERE mutation_id = $1)
) o ORDER BY id DESC LIMIT 1`

// runsPageQuery reads up to $3 runs of command $1 newest first, before the
// run whose mutation ID is $2 (all when $2 is empty), and run 0.
const runsPageQuery = `SELECT ` + operationColumns + ` FROM (
	(SELECT * FROM keyledger.operations
	  WHERE ` + runSeries + ` = $1
	    AND ($2 = '' OR id < coalesce((SELECT b.id FROM keyledger.operations b WHERE b.mutation_id = $2), 0))
	  ORDER BY id DESC LIMIT $3)
	UNION ALL
	(SELECT * FROM keyledger.operations WHERE mutation_id = $1)
) o ORDER BY id DESC LIMIT $3`

// LatestRun returns the newest run of the command whose mutation ID is id
// (or an operation journaled under id itself), or ErrNotFound.
func (s *Store) LatestRun(ctx context.Context, id string) (*Operation, error) {
	op, err := scanOperation(s.pool.QueryRow(ctx, latestRunQuery, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, wrap("reading the command's newest run", err)
	}
	return op, nil
}

// Runs returns every run of the command whose mutation ID is id (and an
// operation journaled under id itself), oldest first. It reads them all:
// readers that face a long-lived plan use LatestRun or RunsPage.
func (s *Store) Runs(ctx context.Context, id string) ([]*Operation, error) {
	pattern := "^" + regexp.QuoteMeta(id) + regexp.QuoteMeta(RunSuffix) + "[1-9][0-9]{0,9}$"
	rows, err := s.pool.Query(ctx, `SELECT `+operationColumns+` FROM keyledger.operations
		WHERE mutation_id = $1 OR mutation_id ~ $2 ORDER BY id`, id, pattern)
	if err != nil {
		return nil, wrap("listing runs", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Operation, error) { return scanOperation(row) })
}

// RunsPageParams select one page of a command's runs, newest first.
type RunsPageParams struct {
	// Command is the command's mutation ID.
	Command string
	// Limit is the page size (1 to MaxRunsPage; 0 means DefaultRunsPage).
	Limit int
	// Before, when not 0, keeps only runs journaled before run Before.
	Before int64
}

// Page sizes of RunsPage (journal show --limit).
const (
	DefaultRunsPage = 10
	MaxRunsPage     = 100
)

// RunsPage returns up to p.Limit runs of p.Command, newest first (an
// operation journaled under the command's own mutation ID, run 0, comes
// last), and whether older runs remain. One index range scan, whatever the
// number of runs.
func (s *Store) RunsPage(ctx context.Context, p RunsPageParams) (runs []*Operation, more bool, err error) {
	if p.Limit == 0 {
		p.Limit = DefaultRunsPage
	}
	if p.Limit < 1 || p.Limit > MaxRunsPage {
		return nil, false, &localError{fmt.Errorf("a page of runs holds 1 to %d runs, not %d", MaxRunsPage, p.Limit)}
	}
	before := "" // the mutation ID of run Before
	if p.Before > 0 {
		before = RunID(p.Command, p.Before)
	}
	rows, err := s.pool.Query(ctx, runsPageQuery, p.Command, before, p.Limit+1)
	if err != nil {
		return nil, false, wrap("listing runs", err)
	}
	runs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Operation, error) { return scanOperation(row) })
	if err != nil {
		return nil, false, wrap("listing runs", err)
	}
	if len(runs) > p.Limit {
		return runs[:p.Limit], true, nil
	}
	return runs, false, nil
}
