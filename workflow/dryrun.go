package workflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/keyledger/keyledger/store"
)

// dryRunKey marks a context as a dry run's.
type dryRunKey struct{}

// isDryRun reports whether ctx belongs to a dry run (keyledger plan). Only
// the wrapper asks it, never a family: a family reads the effect of its
// calls through Verify (a dry run takes the intended effect as in place)
// and contacts servers beyond the API server through Reach (a dry run
// contacts none).
func isDryRun(ctx context.Context) bool { return ctx.Value(dryRunKey{}) != nil }

// Verify returns what read shows: read checks the real effect of a call
// this run sent (the object a create made is still there and final, the
// object a delete removed is gone, a replacement pod is ready), or waits
// for it. intended is what it shows once the call took effect as intended.
// A family calls Verify and never asks whether it is in a dry run: a dry
// run sends no call, so there is no effect to check, and it takes intended
// without reading.
func Verify[T any](ctx context.Context, intended T, read func(context.Context) (T, error)) (T, error) {
	if isDryRun(ctx) {
		return intended, nil
	}
	return read(ctx)
}

// Reach runs contact, which reaches a server beyond the API server (a
// credential probe) and returns rec completed with what it found. A dry
// run reaches nothing: it returns rec with status planned (unless it is
// the check of a run without its journal, which probes for real).
func Reach(ctx context.Context, rec store.Record, contact func(context.Context, store.Record) (store.Record, error)) (store.Record, error) {
	if isDryRun(ctx) && !reaches(ctx) {
		rec.Status = statusPlanned
		return rec, nil
	}
	return contact(ctx, rec)
}

// DryRunResult is what a run of the same plan would do, found by the same
// engine and the same family decisions with every call held back.
type DryRunResult struct {
	// Journal is the operation's journal state: "new" when the mutation ID
	// is not journaled yet.
	Journal string
	// Operation is the mutation ID of the operation a run would drive (a
	// desired-state command's run: "<mutationId>:run-<n>").
	Operation string
	// Replay is true when the operation is terminal in the journal: a run
	// would replay its ending and send nothing. A completed one is checked
	// against the cluster as a run checks it (Family.ConfirmReplay): when
	// the cluster contradicts it, Outcome is refused and Reason names what
	// differs (replay-...).
	Replay bool
	// Records are the records the run would journal, in order: the
	// preparation, observations, calls (with "planned" results), probes and
	// the ending. Calls are authority_call records.
	Records []store.Record
	// Outcome, Reason and Summary are the ending the run would reach if
	// every call were applied as intended; empty when Stopped.
	Outcome Outcome
	Reason  string
	Summary store.Detail
	// Stopped says why the dry run could not decide further: what comes
	// next depends on answers a dry run does not have.
	Stopped string
	// verbs are the planned calls' verbs, by step and target (Verb).
	verbs map[string]Verb
}

// Verb is the API verb of call, one of the dry run's authority_call
// records: the verb its Call named ("" for a call it did not plan).
func (r *DryRunResult) Verb(call store.Record) Verb {
	return r.verbs[callKey(call.Step, call.Target.String())]
}

// Calls returns the authority calls of the dry run, in order.
func (r *DryRunResult) Calls() []store.Record {
	var out []store.Record
	for _, rec := range r.Records {
		if rec.Kind == store.RecordAuthorityCall {
			out = append(out, rec)
		}
	}
	return out
}

// statusPlanned is the status of a dry run's result record: the call was
// not sent.
const statusPlanned store.Status = "planned"

// reasonPlanned is the reason of a dry run's planned answer.
const reasonPlanned store.Reason = "planned"

// DryRun is Execute without a write: the permission matrix and the
// precheck run as in Execute, the journal is only read (an operation
// already terminal is reported as a replay), and the engine drives the
// family with an in-memory journal and calls that are never sent: each
// planned call is taken as applied as intended, and the family decides
// again. The dry run stops where the next decision would depend on
// something only a sent call can show (the same call decided twice).
func DryRun(ctx context.Context, deps Deps, plan Plan) (*DryRunResult, error) {
	ctx = context.WithValue(ctx, dryRunKey{}, true)
	st, log, err := begin(ctx, deps, plan) // the journal is only read
	if err != nil {
		return nil, err
	}
	defer st.Close()
	bindJournal(st, plan.Family)
	return dryDrive(ctx, st, plan, log)
}

// dryDrive is a dry run once the journal is open (or stands in: the check
// of a run without its journal, unjournaled).
func dryDrive(ctx context.Context, st Store, plan Plan, log *slog.Logger) (*DryRunResult, error) {
	res := &DryRunResult{}
	op, records, err := dryPrepare(ctx, st, plan, res)
	if err != nil {
		return nil, journalFailed(fmt.Errorf("reading journal: %w", err), false)
	}
	if op != nil {
		res.Operation = op.MutationID
	}
	if op != nil && res.Replay {
		// The same check as a run's, read-only: a completed operation is a
		// replay only when the cluster shows its effect.
		err := confirmReplay(ctx, plan.Family, &Run{Op: op, Records: records})
		var refused *Refused
		switch {
		case errors.As(err, &refused):
			res.Outcome, res.Reason, res.Summary = OutcomeRefused, refused.Reason, store.Detail{}
		case err != nil:
			return nil, err
		}
	}
	if op == nil || op.State.Terminal() {
		return res, nil
	}
	run := &Run{Op: op, Records: records}
	before := len(records)
	dry := &dryCalls{}
	eng := newEngine(&dryJournal{run: run}, plan, log)
	eng.sender = dry
	err = eng.drive(ctx, run)
	res.Records = append(res.Records, run.Records[before:]...)
	res.verbs = dry.verbs
	var (
		stop      *planStop
		refused   *Refused
		uncertain *Uncertain
	)
	switch {
	case err == nil:
		res.Outcome, res.Summary = Outcome(run.Op.Outcome), run.Ending()
	case errors.As(err, &refused):
		res.Outcome, res.Reason, res.Summary = OutcomeRefused, refused.Reason, run.Ending()
	case errors.As(err, &stop):
		res.Stopped = stop.Error()
	case errors.As(err, &uncertain):
		res.Stopped = "the next decision depends on answers a dry run does not have (" + uncertain.Reason + ")"
	default:
		return res, err
	}
	return res, nil
}

// dryPrepare reads what Prepare (or PrepareRun) would find, without
// writing: the operation a run would drive and its records. It returns a
// nil or terminal operation when the run would end at once (a replay, a
// reused mutation ID); res then says how.
func dryPrepare(ctx context.Context, st Store, plan Plan, res *DryRunResult) (*store.Operation, []store.Record, error) {
	if err := plan.resolveDigest(ctx); err != nil {
		return nil, nil, err
	}
	p := plan.Prepare
	fresh := func(mutationID string, detail store.Detail) (*store.Operation, []store.Record, error) {
		res.Journal = "new"
		op := &store.Operation{Kind: p.Kind, MutationID: mutationID, RequestID: p.RequestID, CommandDigest: p.CommandDigest,
			Namespace: p.Namespace, Name: p.Name, ExpectedUID: p.ExpectedUID, State: store.StatePrepared, CreatedAt: time.Now().UTC()}
		records := []store.Record{{Kind: store.RecordPreparation, Step: string(store.RecordPreparation), Digest: p.CommandDigest, Detail: detail}}
		res.Records = append(res.Records, records...)
		return op, records, nil
	}
	reused := func() (*store.Operation, []store.Record, error) {
		res.Outcome, res.Reason = OutcomeRefused, "mutation-id-reused"
		return nil, nil, nil
	}
	if plan.Runs {
		// Desired state: every run is an operation of its own; an
		// unfinished one is resumed, after a finished one comes the next.
		latest, err := st.LatestRun(ctx, p.Namespace, p.MutationID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, nil, err
		}
		if latest != nil {
			switch {
			case latest.CommandDigest != p.CommandDigest || latest.Kind != p.Kind:
				return reused()
			case !latest.State.Terminal():
				res.Journal = string(latest.State)
				return st.Snapshot(ctx, latest.Namespace, latest.MutationID)
			}
		}
		run := store.RunPreparation(p, store.NextRun(p.MutationID, latest), store.RunLineage{})
		return fresh(run.MutationID, run.Detail)
	}
	op, records, err := st.Snapshot(ctx, p.Namespace, p.MutationID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fresh(p.MutationID, p.Detail)
	case err != nil:
		return nil, nil, err
	}
	res.Journal = string(op.State)
	if op.CommandDigest != p.CommandDigest {
		return reused()
	}
	if op.State.Terminal() {
		res.Replay = true
		res.Summary = (&Run{Op: op, Records: records}).Ending()
		res.Outcome = OutcomeExisting
		if op.State == store.StateRefused {
			res.Outcome, res.Reason = OutcomeRefused, op.Reason
		}
	}
	return op, records, nil
}

// dryCalls is a dry run's sender: it holds every call back, answering each
// as applied as intended (or as its Foresee says), and one decided twice
// stops the dry run. Its moves run no failpoint and its answers are no
// writes.
type dryCalls struct {
	seen    map[string]bool
	verbs   map[string]Verb // each planned call's verb, by step and target
	planned []Answer        // the admitted batch's answers
}

func (d *dryCalls) admit(ctx context.Context, batch []*Call) error {
	planned, err := d.answer(ctx, batch)
	d.planned = planned
	return err
}

func (d *dryCalls) deliver(ctx context.Context, m *machine, batch []*Call, _ int, records []store.Record) ([]Answer, []store.Record, error) {
	return m.atOnce(ctx, batch, records, func() []Answer { return d.planned })
}

func (*dryCalls) pipelines([]*Call) bool { return false }
func (*dryCalls) moved(store.Event)      {}
func (*dryCalls) applied(*Call)          {}

// answer admits a batch and returns its planned answers.
func (d *dryCalls) answer(ctx context.Context, batch []*Call) ([]Answer, error) {
	if d.seen == nil {
		d.seen, d.verbs = map[string]bool{}, map[string]Verb{}
	}
	for _, c := range batch {
		if d.seen[callKey(c.Step, c.Target.String())] {
			return nil, &planStop{step: c.Step, target: c.Target.String()}
		}
	}
	answers := make([]Answer, len(batch))
	for i, c := range batch {
		d.seen[callKey(c.Step, c.Target.String())] = true
		d.verbs[callKey(c.Step, c.Target.String())] = c.Verb
		answers[i] = Answer{Status: Applied, Reason: reasonPlanned, UID: c.UID, ResourceVersion: c.ResourceVersion, Digest: c.Digest}
		if c.Foresee != nil {
			a, set, err := c.Foresee(ctx)
			if err != nil {
				return nil, err
			}
			if set {
				answers[i] = a
			}
		}
	}
	return answers, nil
}

// planStop ends a dry run whose family decided a call it had already
// planned: what follows depends on that call's real effect.
type planStop struct{ step, target string }

func (e *planStop) Error() string {
	return fmt.Sprintf("%s %s: what follows depends on the effect of the calls above, which a dry run does not send", e.step, e.target)
}

// dryJournal is a dry run's journal: moves are checked and applied in
// memory, nothing is written.
type dryJournal struct{ run *Run }

func (j *dryJournal) Transition(_ context.Context, p store.TransitionParams) (*store.Operation, error) {
	op := *j.run.Op
	if p.From != op.State || p.Revision != op.Revision {
		return nil, store.ErrStateMoved
	}
	op.State, op.Revision = p.To, op.Revision+1
	if p.Outcome != "" {
		op.Outcome, op.Reason = p.Outcome, p.Reason
	}
	return &op, nil
}

func (j *dryJournal) Snapshot(context.Context, string, string) (*store.Operation, []store.Record, error) {
	return j.run.Op, j.run.Records, nil
}
