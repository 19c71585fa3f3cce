package versioned

// TEMPORARY: a minimal in-memory journal until workflow/workflowtest lands
// on main; replaced by workflowtest.NewJournal and workflow.Operate.

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

type memJournal struct {
	ops     []*memOp
	nextRec int64
}

type memOp struct {
	op   store.Operation
	recs []store.Record
}

func newMemJournal() *memJournal { return &memJournal{} }

func roundTrip(r store.Record) store.Record {
	b, _ := json.Marshal(r.Detail)
	r.Detail = nil
	_ = json.Unmarshal(b, &r.Detail)
	return r
}

func (j *memJournal) find(mid string) *memOp {
	for _, o := range j.ops {
		if o.op.MutationID == mid {
			return o
		}
	}
	return nil
}

func (j *memJournal) Prepare(_ context.Context, p store.PrepareParams) (*store.Operation, bool, error) {
	if o := j.find(p.MutationID); o != nil {
		if o.op.CommandDigest != p.CommandDigest {
			return nil, false, store.ErrDigestMismatch
		}
		op := o.op
		return &op, false, nil
	}
	o := &memOp{op: store.Operation{ID: int64(len(j.ops) + 1), Kind: p.Kind, MutationID: p.MutationID, RequestID: p.RequestID,
		CommandDigest: p.CommandDigest, Namespace: p.Namespace, Name: p.Name, State: store.StatePrepared, Revision: 1,
		CreatedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}}
	j.nextRec++
	o.recs = append(o.recs, roundTrip(store.Record{ID: j.nextRec, Kind: store.RecordPreparation, Step: string(store.RecordPreparation), Digest: p.CommandDigest, Detail: p.Detail}))
	j.ops = append(j.ops, o)
	op := o.op
	return &op, true, nil
}

func (j *memJournal) Transition(_ context.Context, p store.TransitionParams) (*store.Operation, error) {
	o := j.ops[p.OperationID-1]
	if o.op.State != p.From || o.op.Revision != p.Revision {
		return nil, store.ErrStateMoved
	}
	if p.To.Terminal() && p.Outcome == "" {
		return nil, errors.New("terminal without outcome")
	}
	o.op.State, o.op.Outcome, o.op.Reason = p.To, p.Outcome, p.Reason
	o.op.Revision++
	for _, r := range p.Records {
		j.nextRec++
		r.ID = j.nextRec
		o.recs = append(o.recs, roundTrip(r))
	}
	op := o.op
	return &op, nil
}

func (j *memJournal) Snapshot(_ context.Context, mid string) (*store.Operation, []store.Record, error) {
	o := j.find(mid)
	if o == nil {
		return nil, nil, errors.New("not found")
	}
	op := o.op
	recs := make([]store.Record, len(o.recs))
	for i, r := range o.recs {
		recs[i] = roundTrip(r)
	}
	return &op, recs, nil
}

func (j *memJournal) StepRecords(_ context.Context, p store.StepRecordsParams) ([][]store.Record, error) {
	var out [][]store.Record
	for _, o := range j.ops {
		if o.op.Namespace != p.Namespace || o.op.Name != p.Name {
			continue
		}
		bound := false
		var g []store.Record
		for _, r := range o.recs {
			if r.Step != p.Step {
				continue
			}
			if r.Kind == store.RecordAuthorityCall && r.UID == p.CallUID {
				bound = true
			}
			g = append(g, roundTrip(r))
		}
		if bound {
			out = append(out, g)
		}
	}
	return out, nil
}

// operateShim is workflow.Operate for the shim journal.
func operateShim(ctx context.Context, j workflow.Journal, jr *memJournal, plan workflow.Plan) (*workflow.Result, error) {
	if jb, ok := plan.Family.(workflow.JournalBound); ok {
		jb.BindJournal(jr)
	}
	op, created, err := jr.Prepare(ctx, plan.Prepare)
	if err != nil {
		return nil, err
	}
	run := &workflow.Run{Op: op}
	if created {
		run.Records = []store.Record{{Kind: store.RecordPreparation, Step: string(store.RecordPreparation), Digest: op.CommandDigest}}
	} else if run.Op, run.Records, err = jr.Snapshot(ctx, op.MutationID); err != nil {
		return nil, err
	}
	res := &workflow.Result{Run: run}
	if run.Op.State.Terminal() {
		res.Replayed = true
		return res, finishShim(res)
	}
	_, err = (&workflow.Engine{Journal: j, Family: plan.Family}).Drive(ctx, run)
	var (
		refused     *workflow.Refused
		uncertain   *workflow.Uncertain
		unavailable *workflow.Unavailable
	)
	_, called := run.LastCall()
	switch {
	case err == nil, errors.As(err, &refused):
		return res, finishShim(res)
	case errors.As(err, &uncertain):
	case errors.As(err, &unavailable) && !run.Op.State.Terminal() && !called:
		return res, err
	default:
		err = &workflow.Uncertain{Reason: "interrupted", Err: err}
	}
	res.Outcome = workflow.OutcomeUncertain
	return res, err
}

func finishShim(res *workflow.Result) error {
	op := res.Run.Op
	if op.State == store.StateRefused {
		res.Outcome = workflow.OutcomeRefused
		return &workflow.Refused{Reason: op.Reason}
	}
	res.Outcome = workflow.Outcome(op.Outcome)
	if res.Replayed {
		res.Outcome = workflow.OutcomeExisting
	}
	return nil
}
