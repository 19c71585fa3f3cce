package workflow

import (
	"context"
	"errors"
	"log/slog"
	"slices"

	"github.com/keyledger/keyledger/cause"
	"github.com/keyledger/keyledger/store"
)

// JournalNotConsulted is Result.Journal for a run that ended without the
// journal (Plan.Unjournaled): it could not be reached, and the run found
// nothing to write, delete or restart.
const JournalNotConsulted = "not-consulted"

// unjournaledSummary is the ending of such a run: the journal was not
// consulted, so no authorship was checked (a Secret found in place is
// neither proven nor unproven here), and nothing was sent.
type unjournaledSummary struct {
	Journal    string `json:"journal"`
	Authorship string `json:"authorship"`
	Calls      int    `json:"calls"`
}

// journalConnectError is begin's failure to open the journal.
type journalConnectError struct{ err error }

func (e *journalConnectError) Error() string { return e.err.Error() }
func (e *journalConnectError) Unwrap() error { return e.err }

// reachKey marks a dry run that reaches servers for real (Reach): the
// check of a run without its journal probes them as a run does.
type reachKey struct{}

func reaches(ctx context.Context) bool { return ctx.Value(reachKey{}) != nil }

// unjournaled decides a desired-state run whose journal cannot be reached
// (an outage that ends by itself: cause.Of says Settles) without it: the
// family decides as a run does, from reads of the cluster made now and
// probes of its servers made for real, with an empty journal and every
// call held back (the dry run's engine). When that decision ends in place
// with no call at all, the run ends with it, reporting that the journal
// was not consulted and no authorship checked; anything else (a call to
// make, a refusal, a decision that depends on a call) needs the journal,
// and the run fails with connect, the journal's own failure (exit 69).
// A write is never made without its journal.
func unjournaled(ctx context.Context, plan Plan, log *slog.Logger, connect error) (*Result, error) {
	if c, ok := cause.Of(connect); !ok || !c.Settles || !plan.Unjournaled {
		return nil, connect
	}
	ctx = context.WithValue(context.WithValue(ctx, dryRunKey{}, true), reachKey{}, true)
	bindJournal(emptyJournal{}, plan.Family)
	res, err := dryDrive(ctx, emptyJournal{}, plan, log)
	if err != nil {
		log.Warn("the journal cannot be reached, and deciding without it failed", "error", err.Error())
		return nil, connect
	}
	calls := slices.ContainsFunc(res.Records, func(r store.Record) bool { return r.Kind == store.RecordAuthorityCall })
	switch {
	case res.Stopped != "", calls, res.Replay:
		return nil, connect
	case res.Outcome != OutcomeExisting && res.Outcome != OutcomeCompleted && res.Outcome != OutcomeConverged:
		return nil, connect
	}
	log.Warn("the journal cannot be reached; nothing to write, so the run ends without it (authorship not checked)",
		"mutation_id", plan.Prepare.MutationID)
	summary := store.DetailOf(unjournaledSummary{Journal: JournalNotConsulted, Authorship: "not-checked"})
	op := &store.Operation{Kind: plan.Prepare.Kind, MutationID: plan.Prepare.MutationID, Namespace: plan.Prepare.Namespace,
		Name: plan.Prepare.Name, State: store.StateCompleted, Outcome: string(OutcomeExisting)}
	run := &Run{Op: op, Records: []store.Record{{Kind: store.RecordCompletion, Step: "complete", Status: store.Status(OutcomeExisting), Detail: summary}}}
	return &Result{Run: run, Outcome: OutcomeExisting, Journal: JournalNotConsulted}, nil
}

// emptyJournal is the journal a run decides with when its own cannot be
// reached: it holds nothing, and refuses every write.
type emptyJournal struct{}

var _ Store = emptyJournal{}

var errNoJournal = errors.New("the journal cannot be reached: nothing may be written")

func (emptyJournal) Transition(context.Context, store.TransitionParams) (*store.Operation, error) {
	return nil, errNoJournal
}

func (emptyJournal) Snapshot(context.Context, string, string) (*store.Operation, []store.Record, error) {
	return nil, nil, store.ErrNotFound
}

func (emptyJournal) StepRecords(context.Context, store.StepRecordsParams) ([][]store.Record, error) {
	return nil, nil
}

func (emptyJournal) FindInRuns(context.Context, store.RunRecordParams) (*store.RunRecord, error) {
	return nil, nil
}

func (emptyJournal) Prepare(context.Context, store.PrepareParams) (*store.Operation, bool, error) {
	return nil, false, errNoJournal
}

func (emptyJournal) PrepareRun(context.Context, store.PrepareParams) (*store.Operation, bool, error) {
	return nil, false, errNoJournal
}

func (emptyJournal) Runs(context.Context, string) ([]*store.Operation, error) { return nil, nil }

func (emptyJournal) LatestRun(context.Context, string, string) (*store.Operation, error) {
	return nil, store.ErrNotFound
}

func (emptyJournal) Transactions() int64 { return 0 }
func (emptyJournal) Close()              {}
