package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keyledger/keyledger/phase"
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

// NextRun is the number of the run that follows latest, the newest
// operation of command id (nil when there is none): 1 after none, or after
// an operation journaled under id itself by an older keyledger (run 0);
// n+1 after run n. It is the one run numbering: PrepareRun, the in-memory
// journal and the dry run all count with it.
func NextRun(id string, latest *Operation) int64 {
	if latest == nil || latest.MutationID == id {
		return 1
	}
	if _, n, ok := SplitRunID(latest.MutationID); ok {
		return n + 1
	}
	return 1
}

// RunPreparation is p prepared as run n of its command: mutation ID
// RunID(p.MutationID, n), and a preparation detail of lineage (what the run
// supersedes or replaces), then p.Detail, then "command" and "run"
// (RunNumber).
func RunPreparation(p PrepareParams, n int64, lineage RunLineage) PrepareParams {
	run := p
	run.MutationID = RunID(p.MutationID, n)
	run.Detail = Merge(DetailOf(lineage), p.Detail, DetailOf(RunNumber{Command: p.MutationID, Run: n}))
	return run
}

// RunBound bounds how long one run of a desired-state command may stay
// unfinished (PrepareRun): a run resumed MaxResumes times, or older than
// MaxAge, is closed (refused, ReasonRunResumeLimit or ReasonRunAgeLimit)
// and the next run starts in its place, so a run that cannot finish never
// pins every later sync. Zero fields do not bound.
type RunBound struct {
	MaxResumes int
	MaxAge     time.Duration
}

// Reasons PrepareRun closes an unfinished run with, and the step of the
// record it journals on each resume.
const (
	ReasonRunResumeLimit = "run-resume-limit"
	ReasonRunAgeLimit    = "run-age-limit"
	ReasonPlanSuperseded = "plan-superseded"
	StepResumeRun        = "resume-run"
	StepCloseRun         = "close-run"
)

// PrepareRun journals one run of a desired-state command (a credential plan
// runs on every sync): p.MutationID names the command, and each run is an
// operation of its own, RunID(p.MutationID, n). In one transaction it finds
// the command's newest run, the one with the highest run number (an
// operation journaled under the command's own mutation ID by an older
// keyledger counts as run 0, and only while no run exists):
//
//   - a different kind or target (namespace and name: for a credential
//     plan, the owner): ErrDigestMismatch (the mutation ID names another
//     command, and two owners never share one);
//   - a different command digest: the command's next version. An
//     unfinished run of the older version is closed (refused,
//     ReasonPlanSuperseded) and run n+1 is inserted; its preparation record
//     names the digest it supersedes ("supersedes");
//   - not terminal, its driver gone (a crash, exit 75, a retried pod: no
//     session holds its live lock): that run is resumed
//     (created=false) with a resume record (StepResumeRun) appended, unless
//     bound says it has been resumed or has lived long enough: then it is
//     closed (refused, ReasonRunResumeLimit or ReasonRunAgeLimit) and run
//     n+1 is inserted, its preparation record naming the run it replaces
//     ("replaces", "replacedBecause");
//   - not terminal, and live: another process drives it now (it holds the
//     run's live lock on its live_key, runLive): it is returned (created=false) with
//     nothing appended, bounded by MaxAge alone, and this process drives it
//     too;
//   - terminal, or none: run n+1 is inserted with its preparation record
//     (created=true). When a concurrent run inserted it first, that run is
//     returned (created=false), so concurrent runs of one command drive one
//     operation.
func (s *Store) PrepareRun(ctx context.Context, p PrepareParams) (op *Operation, created bool, err error) {
	if len(p.MutationID)+len(RunSuffix)+MaxRunNumberDigits > 128 {
		return nil, false, &localError{fmt.Errorf("mutation ID of a command run as a series is longer than %d characters", 128-len(RunSuffix)-MaxRunNumberDigits)}
	}
	for range maxRunRaces {
		op, created, err = s.prepareRun(ctx, p)
		// The next run, prepared by another process at the same moment
		// (this one found it on conflict), ended before this one read it:
		// it is not this process's to replay; the run after it is.
		if err != nil || created || !op.State.Terminal() || op.MutationID == p.MutationID {
			return op, created, err
		}
	}
	return op, created, err
}

// maxRunRaces bounds how often PrepareRun prepares again because the run
// another process prepared at the same moment already ended.
const maxRunRaces = 3

func (s *Store) prepareRun(ctx context.Context, p PrepareParams) (op *Operation, created bool, err error) {
	defer phase.Begin("tx prepare run")()
	s.driver.mu.Lock()
	defer s.driver.mu.Unlock()
	if err := s.acquireDriver(ctx); err != nil {
		return nil, false, err
	}
	defer s.dropEndedDriver()
	err = s.inTxOn(ctx, s.driver.conn, func(tx pgx.Tx) (err error) {
		defer func() {
			if err == nil && op != nil && !op.State.Terminal() {
				err = holdRun(ctx, tx, op.ID)
			}
		}()
		latest, err := scanOperation(tx.QueryRow(ctx, latestRunQuery, p.MutationID, p.Namespace))
		var lineage RunLineage
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			latest = nil
		case err != nil:
			return wrap("reading the command's runs", err)
		case latest.Kind != p.Kind || latest.Namespace != p.Namespace || latest.Name != p.Name:
			return ErrDigestMismatch
		default:
			close := ""
			switch {
			case latest.CommandDigest != p.CommandDigest:
				lineage.Supersedes = latest.CommandDigest
				if !latest.State.Terminal() {
					close = ReasonPlanSuperseded
				}
			case latest.State.Terminal():
			default:
				var joined *Operation
				if joined, latest, close, err = continueRun(ctx, tx, p, latest); err != nil || joined != nil {
					op = joined
					return err
				}
			}
			if close != "" {
				if err := closeRunIn(ctx, tx, latest, close); err != nil {
					return err
				}
				if close != ReasonPlanSuperseded {
					lineage.Replaces, lineage.ReplacedBecause = latest.MutationID, close
				}
			}
		}
		op, created, err = prepareIn(ctx, tx, RunPreparation(p, NextRun(p.MutationID, latest), lineage))
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return op, created, nil
}

// dropEndedDriver lets go of the run driver's connection when its session
// ended: that took its run locks with it, and the next PrepareRun drives
// on a new one. The caller holds s.driver.mu.
func (s *Store) dropEndedDriver() {
	if s.driver.conn.Conn().IsClosed() {
		s.driver.conn.Release()
		s.driver.conn = nil
	}
}

// acquireDriver holds the run driver's connection, acquiring it when
// none is held. The caller holds s.driver.mu.
func (s *Store) acquireDriver(ctx context.Context) error {
	if s.driver.conn != nil {
		return nil
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return unreachable("acquiring the run driver's connection", err)
	}
	s.driver.conn = conn
	return nil
}

// continueRun decides, in tx, what becomes of latest, the command's newest
// run, unfinished when read: joined (this process joins it, or resumes
// it) is set when it goes on; otherwise close is the reason to close it
// ("" for none: it ended meanwhile, and the next run is prepared), and
// again is latest as read again once its lock was tested.
func continueRun(ctx context.Context, tx pgx.Tx, p PrepareParams, latest *Operation) (joined, again *Operation, close string, err error) {
	live, err := runLive(ctx, tx, latest.ID)
	if err != nil {
		return nil, nil, "", err
	}
	// Read it again now that its lock was tested: a driver that
	// ended it and exited committed the ending first.
	if latest, err = scanOperation(tx.QueryRow(ctx, `SELECT `+operationColumns+` FROM keyledger.operations WHERE id = $1`, latest.ID)); err != nil {
		return nil, nil, "", wrap("reading the run", err)
	}
	if latest.State.Terminal() {
		return nil, latest, "", nil
	}
	var resumes int
	var age time.Duration
	if err := tx.QueryRow(ctx, resumesQuery, latest.ID, string(RecordObservation), StepResumeRun).Scan(&resumes, &age); err != nil {
		return nil, nil, "", wrap("counting the run's resumes", err)
	}
	if live {
		// Another process of the namespace drives it now: this
		// one joins it, no resume; only its age bounds it.
		if close = (RunBound{MaxAge: p.Bound.MaxAge}).exceeded(0, age); close == "" {
			return latest, latest, "", nil
		}
		return nil, latest, close, nil
	}
	if close = p.Bound.exceeded(resumes, age); close != "" {
		return nil, latest, close, nil
	}
	// A nil operation: it ended while this transaction waited for its
	// row, and the next run is prepared.
	joined, err = resumeIn(ctx, tx, latest, resumes+1)
	return joined, latest, "", err
}

// A run is live while a process drives it: that process holds a shared
// session advisory lock on the run's live_key (migration 12: 64 random
// bits drawn when the operation was inserted, readable only by the roles
// that may read the operation) on its run driver's connection from
// PrepareRun to Close, and a crashed process's session ends with its
// locks.
//
// Advisory locks are one space for every role, and pg_locks shows every
// held key to every role: another namespace's role cannot predict a run's
// key, but may take one it saw held. So a run is live only when a session
// of a role granted the run's namespace (or the journal's owner) holds its
// key (runLive), and holding it never waits (holdRun): a foreign holder
// can neither make a run look live nor make its driver wait.

// runLiveSQL tests run $1's key: this transaction takes it exclusively
// when nobody holds it (not live: the lock then keeps another PrepareRun
// from joining the run as live until this transaction ends); otherwise
// the run is live when a session of one of the namespace's roles holds it.
const runLiveSQL = `SELECT NOT pg_catalog.pg_try_advisory_xact_lock(o.live_key) AND EXISTS (
	SELECT 1 FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
	 WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
	   AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
	   AND ((l.classid::int8 << 32) | l.objid::int8) = o.live_key
	   AND (a.usename = current_user
	        OR a.usename IN (SELECT g.role FROM keyledger.namespace_grants g WHERE g.namespace = o.target_namespace)
	        OR pg_catalog.pg_has_role(a.usesysid, (SELECT c.relowner FROM pg_catalog.pg_class c
	                                              WHERE c.oid = 'keyledger.operations'::regclass), 'USAGE')))
	FROM keyledger.operations o WHERE o.id = $1`

// runLive says whether a session of the run's namespace holds run id's
// live lock (a process drives it now). When nobody does, this transaction
// holds the lock exclusively until it ends, so no other process's
// PrepareRun joins the run in between as live: its holdRun finds the key
// taken and drives the run without the mark.
func runLive(ctx context.Context, tx pgx.Tx, id int64) (bool, error) {
	var live bool
	if err := tx.QueryRow(ctx, runLiveSQL, id).Scan(&live); err != nil {
		return false, wrap("testing whether the run is live", err)
	}
	return live, nil
}

// holdRun takes run id's live lock, shared, for this session (it outlives
// the transaction), if it can be had at once. When it cannot (another
// PrepareRun is testing the key, or a role that is not the namespace's
// holds or waits for it exclusively), the run is driven without the mark:
// a concurrent PrepareRun may then count a resume it would otherwise have
// joined, which the resume bound tolerates; nothing waits on a key another
// role may hold.
func holdRun(ctx context.Context, tx pgx.Tx, id int64) error {
	var held bool
	if err := tx.QueryRow(ctx, `SELECT pg_catalog.pg_try_advisory_lock_shared(o.live_key) FROM keyledger.operations o WHERE o.id = $1`, id).Scan(&held); err != nil {
		return wrap("holding the run's live lock", err)
	}
	return nil
}

// exceeded is the reason a run resumed resumes times and age old must be
// closed, "" when it may be resumed once more.
func (b RunBound) exceeded(resumes int, age time.Duration) string {
	switch {
	case b.MaxResumes > 0 && resumes >= b.MaxResumes:
		return ReasonRunResumeLimit
	case b.MaxAge > 0 && age > b.MaxAge:
		return ReasonRunAgeLimit
	}
	return ""
}

// resumesQuery counts the resume records of operation $1 (the index on
// operation, step) and says how old the operation is, by the server's clock.
const resumesQuery = `SELECT count(*)::int,
	(SELECT now() - o.created_at FROM keyledger.operations o WHERE o.id = $1)
	FROM keyledger.records r WHERE r.operation_id = $1 AND r.step = $3 AND r.kind = $2::keyledger.record_kind`

// resumeIn appends the resume record (the n-th) to op while it is
// unfinished. A concurrent run may be moving it: the append bumps the
// revision, so that run's next move is refused (ErrStateMoved) and it
// reloads, as concurrent runs of one operation do. When op ended
// meanwhile (its driver's last move committed while this transaction
// waited for the row), it returns nil with nothing appended: PrepareRun
// then prepares the next run, and never hands back a run that ended.
func resumeIn(ctx context.Context, tx pgx.Tx, op *Operation, n int) (*Operation, error) {
	moved, err := scanOperation(tx.QueryRow(ctx, `UPDATE keyledger.operations SET state = state
		WHERE id = $1 AND state NOT IN ('completed', 'refused') RETURNING `+operationColumns, op.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil // it ended meanwhile: nothing to resume
	}
	if err != nil {
		return nil, wrap("resuming the run", err)
	}
	return moved, insertRecords(ctx, tx, op.ID, []Record{{Kind: RecordObservation, Step: StepResumeRun,
		Detail: DetailOf(ResumeDetail{Resume: n})}})
}

// closeRunIn ends the unfinished run op, refused with reason (nothing to
// do when it ended meanwhile).
func closeRunIn(ctx context.Context, tx pgx.Tx, op *Operation, reason string) error {
	tag, err := tx.Exec(ctx, `UPDATE keyledger.operations SET state = 'refused', outcome = 'refused', reason = $2
		WHERE id = $1 AND state NOT IN ('completed', 'refused')`, op.ID, reason)
	if err != nil {
		return wrap("closing the run", err)
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	return insertRecords(ctx, tx, op.ID, []Record{{Kind: RecordRefusal, Step: StepCloseRun, Reason: Reason(reason),
		Detail: DetailOf(CloseRunDetail{Outcome: "refused", Reason: reason})}})
}

// runSeries is the command a run's mutation ID belongs to (NULL for any
// other operation): a stored generated column of migration 6, indexed with
// id (operations_run_series). A plain equality on it is what row-level
// security lets the index serve (see the migration).
const runSeries = `run_series`

// latestRunQuery reads the newest run of command $1 in namespace $2, the highest run
// number (operations_run_number, migration 7), or, only when there is no
// run, the operation journaled under $1 itself by an older keyledger (run
// 0): two index probes, whatever the number of runs. Neither a row
// inserted later under a lower number nor one under the bare ID can become
// the newest.
const latestRunQuery = `SELECT ` + operationColumns + ` FROM (
	(SELECT *, 0 AS pick FROM keyledger.operations WHERE target_namespace = $2 AND ` + runSeries + ` = $1 ORDER BY run_number DESC LIMIT 1)
	UNION ALL
	(SELECT *, 1 AS pick FROM keyledger.operations WHERE target_namespace = $2 AND mutation_id = $1)
) o ORDER BY pick LIMIT 1`

// runsPageQuery reads up to $3 runs of command $1 newest first, before the
// run whose mutation ID is $2 (all when $2 is empty), and run 0, in
// namespace $4 (every namespace the role may read when $4 is empty).
const runsPageQuery = `SELECT ` + operationColumns + ` FROM (
	(SELECT * FROM keyledger.operations
	  WHERE ` + runSeries + ` = $1 AND ($4 = '' OR target_namespace = $4)
	    AND ($2 = '' OR id < coalesce((SELECT max(b.id) FROM keyledger.operations b
	                                    WHERE b.mutation_id = $2 AND ($4 = '' OR b.target_namespace = $4)), 0))
	  ORDER BY id DESC LIMIT $3)
	UNION ALL
	(SELECT * FROM keyledger.operations WHERE mutation_id = $1 AND ($4 = '' OR target_namespace = $4))
) o ORDER BY id DESC LIMIT $3`

// LatestRun returns the newest run of the command whose mutation ID is id
// in namespace ns (or an operation journaled under id itself), or
// ErrNotFound. Mutation IDs are unique within a namespace (migration 12):
// the namespace is part of the question.
func (s *Store) LatestRun(ctx context.Context, ns, id string) (*Operation, error) {
	op, err := scanOperation(s.pool.QueryRow(ctx, latestRunQuery, id, ns))
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
	// Namespace, when not empty, keeps only the runs in that namespace.
	Namespace string
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
	rows, err := s.pool.Query(ctx, runsPageQuery, p.Command, before, p.Limit+1, p.Namespace)
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
