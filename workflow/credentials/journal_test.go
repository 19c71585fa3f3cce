package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// memJournal is an in-memory workflow.Journal with the store's
// compare-and-set on state and revision, record IDs, and details that go
// through JSON as the store's do. crash, when set, is asked before each
// transition commits: commit says whether it commits, err is what the
// caller sees (a crash right before or right after the commit).
type memJournal struct {
	mu      sync.Mutex
	ops     []*store.Operation
	records map[int64][]store.Record
	nextID  int64
	crash   func(p store.TransitionParams) (commit bool, err error)
}

var _ workflow.Journal = (*memJournal)(nil)

func newMemJournal() *memJournal { return &memJournal{records: map[int64][]store.Record{}} }

var errCrash = errors.New("process killed")

// prepareRun is store.PrepareRun: the newest run of id when it is not
// terminal, else a new one.
func (j *memJournal) prepareRun(p store.PrepareParams) (*workflow.Run, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := int64(0)
	for _, op := range j.ops {
		if base, m, ok := store.SplitRunID(op.MutationID); ok && base == p.MutationID && m > n {
			n = m
			if !op.State.Terminal() {
				return &workflow.Run{Op: ptr(*op), Records: clone(j.records[op.ID])}, nil
			}
		}
	}
	op := &store.Operation{ID: int64(len(j.ops) + 1), Kind: p.Kind, MutationID: store.RunID(p.MutationID, n+1),
		CommandDigest: p.CommandDigest, Namespace: p.Namespace, Name: p.Name, State: store.StatePrepared, Revision: 1}
	j.ops = append(j.ops, op)
	prep := store.Record{Kind: store.RecordPreparation, Step: string(store.RecordPreparation), Digest: p.CommandDigest, Detail: p.Detail}
	if err := j.appendLocked(op.ID, []store.Record{prep}); err != nil {
		return nil, err
	}
	return &workflow.Run{Op: ptr(*op), Records: clone(j.records[op.ID])}, nil
}

func (j *memJournal) Transition(_ context.Context, p store.TransitionParams) (*store.Operation, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	commit, err := true, error(nil)
	if j.crash != nil {
		commit, err = j.crash(p)
	}
	if !commit {
		return nil, err
	}
	op := j.ops[p.OperationID-1]
	if op.State != p.From || op.Revision != p.Revision {
		return nil, store.ErrStateMoved
	}
	if op.State.Terminal() {
		return nil, fmt.Errorf("operation is %s", op.State)
	}
	if e := j.appendLocked(op.ID, p.Records); e != nil {
		return nil, e
	}
	op.State, op.Revision = p.To, op.Revision+1
	if p.To.Terminal() {
		op.Outcome, op.Reason = p.Outcome, p.Reason
	}
	if err != nil {
		return nil, err
	}
	return ptr(*op), nil
}

func (j *memJournal) appendLocked(opID int64, records []store.Record) error {
	for _, r := range records {
		if r.Detail != nil {
			b, err := json.Marshal(r.Detail)
			if err != nil {
				return err
			}
			r.Detail = nil
			if err := json.Unmarshal(b, &r.Detail); err != nil {
				return err
			}
		}
		j.nextID++
		r.ID = j.nextID
		j.records[opID] = append(j.records[opID], r)
	}
	return nil
}

func (j *memJournal) Snapshot(_ context.Context, mutationID string) (*store.Operation, []store.Record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, op := range j.ops {
		if op.MutationID == mutationID {
			return ptr(*op), clone(j.records[op.ID]), nil
		}
	}
	return nil, nil, fmt.Errorf("operation %s not journaled", mutationID)
}

// recordsOf is every record of the operation.
func (j *memJournal) recordsOf(mutationID string) []store.Record {
	_, records, _ := j.Snapshot(context.Background(), mutationID)
	return records
}

func ptr[T any](v T) *T { return &v }

func clone(records []store.Record) []store.Record { return append([]store.Record(nil), records...) }
