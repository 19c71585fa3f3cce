package retire

// TEMPORARY: a minimal in-memory journal and Execute's drive, until
// workflow/workflowtest and workflow.Operate land (helper wtest).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

type memJournal struct {
	ops     map[string]*store.Operation
	records map[int64][]store.Record
	ids     int64
	now     time.Time
}

func newMemJournal() *memJournal {
	return &memJournal{ops: map[string]*store.Operation{}, records: map[int64][]store.Record{},
		now: time.Date(2026, 11, 30, 17, 0, 0, 0, time.UTC)}
}

func (j *memJournal) Prepare(_ context.Context, p store.PrepareParams) (*store.Operation, bool, error) {
	if op, ok := j.ops[p.MutationID]; ok {
		if op.CommandDigest != p.CommandDigest {
			return nil, false, store.ErrDigestMismatch
		}
		c := *op
		return &c, false, nil
	}
	j.ids++
	op := &store.Operation{ID: j.ids, Kind: p.Kind, MutationID: p.MutationID, RequestID: p.RequestID, CommandDigest: p.CommandDigest,
		Namespace: p.Namespace, Name: p.Name, ExpectedUID: p.ExpectedUID, State: store.StatePrepared, CreatedAt: j.now}
	j.ops[p.MutationID] = op
	j.append(op.ID, []store.Record{{Kind: store.RecordPreparation, Step: string(store.RecordPreparation), Digest: p.CommandDigest, UID: p.ExpectedUID, Detail: p.Detail}})
	c := *op
	return &c, true, nil
}

func (j *memJournal) append(id int64, recs []store.Record) {
	for _, r := range recs {
		j.ids++
		r.ID = j.ids
		j.records[id] = append(j.records[id], r)
	}
}

func (j *memJournal) Transition(_ context.Context, p store.TransitionParams) (*store.Operation, error) {
	for _, op := range j.ops {
		if op.ID != p.OperationID {
			continue
		}
		if op.State != p.From || op.Revision != p.Revision {
			return nil, store.ErrStateMoved
		}
		if p.From != p.To && !slices.Contains(store.Edges(), store.Edge{From: p.From, To: p.To}) {
			return nil, fmt.Errorf("no edge %s -> %s", p.From, p.To)
		}
		op.State, op.Revision = p.To, op.Revision+1
		if p.Outcome != "" {
			op.Outcome, op.Reason = p.Outcome, p.Reason
		}
		j.append(op.ID, p.Records)
		c := *op
		return &c, nil
	}
	return nil, store.ErrNotFound
}

func (j *memJournal) Snapshot(_ context.Context, mutationID string) (*store.Operation, []store.Record, error) {
	op, ok := j.ops[mutationID]
	if !ok {
		return nil, nil, store.ErrNotFound
	}
	c := *op
	return &c, append([]store.Record(nil), j.records[op.ID]...), nil
}

type journal interface {
	workflow.Journal
	Prepare(ctx context.Context, p store.PrepareParams) (*store.Operation, bool, error)
}

// operate is Execute after the permission matrix, on any journal.
func operate(ctx context.Context, j journal, plan workflow.Plan) (*workflow.Result, error) {
	op, created, err := j.Prepare(ctx, plan.Prepare)
	if err != nil {
		return nil, err
	}
	res := &workflow.Result{}
	run := &workflow.Run{Op: op}
	if run.Op, run.Records, err = j.Snapshot(ctx, op.MutationID); err != nil {
		return nil, err
	}
	res.Run = run
	if !created && op.State.Terminal() {
		res.Replayed = true
		return res, finishRun(res)
	}
	engine := &workflow.Engine{Journal: j, Family: plan.Family, MaxAttempts: plan.MaxAttempts}
	_, err = engine.Drive(ctx, run)
	var (
		refused     *workflow.Refused
		uncertain   *workflow.Uncertain
		unavailable *workflow.Unavailable
	)
	switch {
	case err == nil, errors.As(err, &refused):
		return res, finishRun(res)
	case errors.As(err, &uncertain):
	case errors.As(err, &unavailable) && !run.Op.State.Terminal():
		if _, ok := run.LastCall(); !ok {
			return res, err
		}
		err = &workflow.Uncertain{Reason: "interrupted", Err: err}
	default:
		err = &workflow.Uncertain{Reason: "interrupted", Err: err}
	}
	res.Outcome = workflow.OutcomeUncertain
	return res, err
}

func finishRun(res *workflow.Result) error {
	op := res.Run.Op
	switch op.State {
	case store.StateCompleted:
		res.Outcome = workflow.Outcome(op.Outcome)
		if res.Replayed {
			res.Outcome = workflow.OutcomeExisting
		}
		return nil
	case store.StateRefused:
		res.Outcome = workflow.OutcomeRefused
		return &workflow.Refused{Reason: op.Reason}
	}
	return fmt.Errorf("operation ended in %s", op.State)
}
