package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// journalAnswer is what one journal said to one move, in terms both
// journals share: no ID and no time (a record's time is replaced by the
// number of the transaction that wrote it, in order of appearance).
type journalAnswer struct {
	Class, Text  string
	Op           *journalOp
	Created      bool
	Records      [][]journalRecord
	Runs         []string
	Transactions int64
}

type journalOp struct {
	Kind, MutationID, RequestID, CommandDigest, Namespace, Name, ExpectedUID string
	State                                                                    store.State
	Revision                                                                 int64
	Outcome, Reason                                                          string
	Finalized                                                                bool
}

type journalRecord struct {
	store.Record
	// Tx numbers the distinct CreatedAt of the records read together: the
	// records one transaction appended share it.
	Tx int
}

// errorClass names an error by what a caller can test: the store's
// sentinels, an unreachable database, a SQLSTATE, or an error keyledger
// made itself.
func errorClass(err error) string {
	var unreachable *store.UnreachableError
	var sqlState interface{ SQLState() string }
	switch {
	case err == nil:
		return ""
	case errors.Is(err, store.ErrStateMoved):
		return "state-moved"
	case errors.Is(err, store.ErrDigestMismatch):
		return "digest-mismatch"
	case errors.Is(err, store.ErrNotFound):
		return "not-found"
	case errors.As(err, &unreachable):
		return "unreachable"
	case errors.As(err, &sqlState):
		return "sqlstate " + sqlState.SQLState()
	}
	return "local"
}

// journalDriver applies one script of moves to one journal; ids maps the
// script's mutation IDs to this journal's operation IDs.
type journalDriver struct {
	t   *testing.T
	ctx context.Context
	j   workflow.Store
	ids map[string]int64
}

func (d *journalDriver) answer(err error) journalAnswer {
	a := journalAnswer{Class: errorClass(err), Transactions: d.j.Transactions()}
	if err != nil {
		a.Text = err.Error()
	}
	return a
}

func (d *journalDriver) op(op *store.Operation) *journalOp {
	if op == nil {
		return nil
	}
	require.False(d.t, op.CreatedAt.IsZero() || op.UpdatedAt.Before(op.CreatedAt), "operation times: %+v", op)
	require.Equal(d.t, op.State.Terminal(), op.FinalizedAt != nil, "finalized exactly when terminal")
	if id, ok := d.ids[op.MutationID]; ok {
		require.Equal(d.t, id, op.ID, "one operation keeps its ID")
	}
	d.ids[op.MutationID] = op.ID
	return &journalOp{Kind: op.Kind, MutationID: op.MutationID, RequestID: op.RequestID, CommandDigest: op.CommandDigest,
		Namespace: op.Namespace, Name: op.Name, ExpectedUID: op.ExpectedUID, State: op.State, Revision: op.Revision,
		Outcome: op.Outcome, Reason: op.Reason, Finalized: op.FinalizedAt != nil}
}

func (d *journalDriver) records(groups ...[]store.Record) [][]journalRecord {
	var out [][]journalRecord
	var times []time.Time
	for _, g := range groups {
		var lastID int64
		group := []journalRecord{}
		for _, r := range g {
			require.Greater(d.t, r.ID, lastID, "records come in append order")
			require.False(d.t, r.CreatedAt.IsZero())
			lastID = r.ID
			tx := -1
			for i, at := range times {
				if at.Equal(r.CreatedAt) {
					tx = i
				}
			}
			if tx < 0 {
				tx = len(times)
				times = append(times, r.CreatedAt)
			}
			r.ID, r.CreatedAt = 0, time.Time{}
			group = append(group, journalRecord{Record: r, Tx: tx})
		}
		out = append(out, group)
	}
	return out
}

func (d *journalDriver) prepare(p store.PrepareParams) journalAnswer {
	op, created, err := d.j.Prepare(d.ctx, p)
	a := d.answer(err)
	a.Op, a.Created = d.op(op), created
	return a
}

func (d *journalDriver) prepareRun(p store.PrepareParams) journalAnswer {
	op, created, err := d.j.PrepareRun(d.ctx, p)
	a := d.answer(err)
	a.Op, a.Created = d.op(op), created
	return a
}

func (d *journalDriver) move(mutation string, p store.TransitionParams) journalAnswer {
	p.OperationID = d.ids[mutation] // 0, no operation, when the script names none
	op, err := d.j.Transition(d.ctx, p)
	a := d.answer(err)
	a.Op = d.op(op)
	return a
}

func (d *journalDriver) snapshot(mutation string) journalAnswer {
	op, records, err := d.j.Snapshot(d.ctx, "", mutation)
	a := d.answer(err)
	a.Op = d.op(op)
	if err == nil {
		a.Records = d.records(records)
	}
	return a
}

func (d *journalDriver) stepRecords(p store.StepRecordsParams) journalAnswer {
	groups, err := d.j.StepRecords(d.ctx, p)
	a := d.answer(err)
	a.Records = d.records(groups...)
	if groups == nil {
		a.Records = nil
	}
	return a
}

func (d *journalDriver) findInRuns(p store.RunRecordParams) journalAnswer {
	found, err := d.j.FindInRuns(d.ctx, p)
	a := d.answer(err)
	if found != nil {
		a.Runs = []string{found.Run}
		a.Records = d.records([]store.Record{found.Record})
	}
	return a
}

// findEachInRuns asks ps together (FindEachInRuns, one round trip) and
// requires the answers FindInRuns gives each question alone.
func (d *journalDriver) findEachInRuns(ps ...store.RunRecordParams) journalAnswer {
	each, ok := d.j.(interface {
		FindEachInRuns(ctx context.Context, ps []store.RunRecordParams) ([]*store.RunRecord, error)
	})
	require.True(d.t, ok, "the journal asks many questions together")
	found, err := each.FindEachInRuns(d.ctx, ps)
	a := d.answer(err)
	if err != nil {
		return a
	}
	require.Len(d.t, found, len(ps))
	for i, f := range found {
		alone, err := d.j.FindInRuns(d.ctx, ps[i])
		require.NoError(d.t, err)
		require.Equal(d.t, alone, f, "question %d: the answer it gets alone", i)
		if f == nil {
			a.Runs = append(a.Runs, "none")
			continue
		}
		a.Runs = append(a.Runs, f.Run)
		a.Records = append(a.Records, d.records([]store.Record{f.Record})...)
	}
	return a
}

func (d *journalDriver) runs(id string) journalAnswer {
	ops, err := d.j.Runs(d.ctx, id)
	a := d.answer(err)
	for _, op := range ops {
		a.Runs = append(a.Runs, fmt.Sprintf("%s %s r%d", op.MutationID, op.State, op.Revision))
	}
	return a
}

// eqPrep is a journal-only operation on ns/name; n makes its digest.
// bounded allows a run one resume.
func bounded(p store.PrepareParams) store.PrepareParams {
	p.Bound = store.RunBound{MaxResumes: 1}
	return p
}

func eqPrep(mutation, name string, n int) store.PrepareParams {
	p := suite.ToyPreparation(mutation, n)
	p.Name = name
	return p
}

// The in-memory journal (workflowtest.Journal) that the fast tests of
// the engine and its families run on answers every move, valid or not, as
// the PostgreSQL journal does: the same error (by class and by text), the
// same operation (state, revision, outcome, reason), the same records (but
// for IDs and times; records of one transaction share their time in both),
// the same count of transactions.
func TestIntegrationJournalEquivalence(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()

	const big = 16384
	// A detail whose jsonb text (detail::text) is exactly big bytes: jsonb
	// prints ", " and ": ", numbers as numeric does, and its own escapes.
	sized := func(extra int) map[string]any {
		printed := `{"f": 0.00000015, "l": [1, "<", true, null], "s": "", "u": "é\n"}`
		return map[string]any{"f": 1.5e-7, "l": []any{1, "<", true, nil}, "u": "é\n",
			"s": strings.Repeat("x", big-len(printed)+extra)}
	}
	call := func(step, name, uid string, attempt int, detail map[string]any) store.Record {
		return store.Record{Kind: store.RecordAuthorityCall, Step: step, Target: secretOrNone(name), Attempt: attempt, UID: uid,
			ResourceVersion: "41", Digest: "sha256:" + strings.Repeat("ab", 32), Batch: attempt, Final: name == "x", Detail: store.DetailOf(detail)}
	}
	obs := func(step string) store.Record { return store.Record{Kind: store.RecordObservation, Step: step} }
	completion := store.Record{Kind: store.RecordCompletion, Step: "complete", Status: "completed", Detail: store.DetailOf(map[string]any{"names": []string{"a", "b"}})}
	refusal := store.Record{Kind: store.RecordRefusal, Step: "refuse", Reason: "key-active"}
	tp := func(from, to store.State, rev int64, records ...store.Record) store.TransitionParams {
		return store.TransitionParams{From: from, To: to, Revision: rev, Records: records}
	}
	final := func(p store.TransitionParams, outcome, reason string) store.TransitionParams {
		p.Outcome, p.Reason = outcome, reason
		return p
	}
	withKind := func(p store.PrepareParams, kind string) store.PrepareParams { p.Kind = kind; return p }
	withRequest := func(p store.PrepareParams, id string) store.PrepareParams { p.RequestID = id; return p }
	withMutation := func(p store.PrepareParams, id string) store.PrepareParams { p.MutationID = id; return p }
	const (
		pr, ca, an, rs = store.StatePrepared, store.StateCalling, store.StateAnswered, store.StateResolving
		co, rf         = store.StateCompleted, store.StateRefused
	)

	script := []struct {
		name string
		do   func(d *journalDriver) journalAnswer
	}{
		{"prepare", func(d *journalDriver) journalAnswer { return d.prepare(eqPrep("a", "name", 1)) }},
		{"prepare again resumes", func(d *journalDriver) journalAnswer { return d.prepare(eqPrep("a", "name", 1)) }},
		{"prepare again, other fields, resumes", func(d *journalDriver) journalAnswer { return d.prepare(eqPrep("a", "other", 1)) }},
		{"prepare with another digest", func(d *journalDriver) journalAnswer { return d.prepare(eqPrep("a", "name", 2)) }},
		{"prepare with another kind", func(d *journalDriver) journalAnswer { return d.prepare(withKind(eqPrep("a", "name", 1), "OtherClaim")) }},
		{"prepare with a bad kind", func(d *journalDriver) journalAnswer { return d.prepare(withKind(eqPrep("b", "name", 1), "lower")) }},
		{"prepare, columns checked before the mutation ID is found", func(d *journalDriver) journalAnswer {
			return d.prepare(withRequest(eqPrep("a", "name", 1), "bad request"))
		}},
		{"prepare with a NUL", func(d *journalDriver) journalAnswer { return d.prepare(withMutation(eqPrep("a", "name", 1), "a\x00")) }},
		{"call", func(d *journalDriver) journalAnswer {
			return d.move("a", tp(pr, ca, 0, obs("read"), call("snapshot", "x", "uid-1", 1,
				map[string]any{"n": 3, "big": int64(1) << 60, "f": 0.25, "nested": map[string]any{"l": []string{"x"}}})))
		}},
		{"stale revision", func(d *journalDriver) journalAnswer { return d.move("a", tp(ca, an, 0)) }},
		{"wrong from", func(d *journalDriver) journalAnswer { return d.move("a", tp(pr, ca, 1)) }},
		{"no such operation", func(d *journalDriver) journalAnswer { return d.move("none", tp(ca, an, 1)) }},
		{"not an edge", func(d *journalDriver) journalAnswer { return d.move("a", tp(ca, pr, 1)) }},
		{"not a state", func(d *journalDriver) journalAnswer { return d.move("a", tp(ca, "bogus", 1)) }},
		{"terminal without outcome", func(d *journalDriver) journalAnswer { return d.move("a", tp(ca, co, 1, completion)) }},
		{"terminal without its ending", func(d *journalDriver) journalAnswer {
			return d.move("a", final(tp(ca, co, 1, obs("read")), "completed", ""))
		}},
		{"terminal with the other ending", func(d *journalDriver) journalAnswer {
			return d.move("a", final(tp(ca, co, 1, refusal), "completed", ""))
		}},
		{"ending without its move", func(d *journalDriver) journalAnswer { return d.move("a", tp(ca, ca, 1, completion)) }},
		{"outcome on a non-terminal move", func(d *journalDriver) journalAnswer { return d.move("a", final(tp(ca, an, 1), "completed", "")) }},
		{"bad outcome", func(d *journalDriver) journalAnswer {
			return d.move("a", final(tp(ca, co, 1, completion), "Completed", ""))
		}},
		{"bad reason", func(d *journalDriver) journalAnswer {
			return d.move("a", final(tp(ca, rf, 1, refusal), "refused", "-x"))
		}},
		{"two endings", func(d *journalDriver) journalAnswer {
			return d.move("a", final(tp(ca, co, 1, completion, completion), "completed", ""))
		}},
		{"the same attempt twice", func(d *journalDriver) journalAnswer {
			return d.move("a", tp(ca, ca, 1, call("snapshot", "x", "uid-1", 1, nil)))
		}},
		{"a call without attempt", func(d *journalDriver) journalAnswer { return d.move("a", tp(ca, ca, 1, call("s", "", "", 0, nil))) }},
		{"an attempt on a non-call", func(d *journalDriver) journalAnswer {
			return d.move("a", tp(ca, ca, 1, store.Record{Kind: store.RecordObservation, Step: "s", Attempt: 2}))
		}},
		{"attempt out of range", func(d *journalDriver) journalAnswer { return d.move("a", tp(ca, ca, 1, call("s", "", "", 1001, nil))) }},
		{"a negative batch", func(d *journalDriver) journalAnswer {
			c := call("s", "", "", 1, nil)
			c.Batch = -1
			return d.move("a", tp(ca, ca, 1, c))
		}},
		{"final on a non-call", func(d *journalDriver) journalAnswer {
			return d.move("a", tp(ca, ca, 1, store.Record{Kind: store.RecordObservation, Step: "s", Final: true}))
		}},
		{"bad step", func(d *journalDriver) journalAnswer { return d.move("a", tp(ca, ca, 1, obs("Read"))) }},
		{"bad status", func(d *journalDriver) journalAnswer {
			return d.move("a", tp(ca, ca, 1, store.Record{Kind: store.RecordProbe, Step: "probe", Status: "OK"}))
		}},
		{"bad digest", func(d *journalDriver) journalAnswer {
			return d.move("a", tp(ca, ca, 1, store.Record{Kind: store.RecordProbe, Step: "probe", Digest: "md5:x"}))
		}},
		{"not a record kind", func(d *journalDriver) journalAnswer {
			return d.move("a", tp(ca, ca, 1, store.Record{Kind: "note", Step: "probe"}))
		}},
		{"a second preparation", func(d *journalDriver) journalAnswer {
			return d.move("a", tp(ca, ca, 1, store.Record{Kind: store.RecordPreparation, Step: "preparation"}))
		}},
		{"a NUL in a step", func(d *journalDriver) journalAnswer { return d.move("a", tp(ca, ca, 1, obs("re\x00ad"))) }},
		{"a NUL in a detail", func(d *journalDriver) journalAnswer {
			return d.move("a", tp(ca, ca, 1, store.Record{Kind: store.RecordObservation, Step: "read", Detail: store.DetailOf(map[string]any{"s": "\x00"})}))
		}},
		{"a detail one byte too large", func(d *journalDriver) journalAnswer {
			return d.move("a", tp(ca, ca, 1, store.Record{Kind: store.RecordObservation, Step: "read", Detail: store.DetailOf(sized(1))}))
		}},
		{"a detail that just fits, noted without moving", func(d *journalDriver) journalAnswer {
			return d.move("a", tp(ca, ca, 1, store.Record{Kind: store.RecordObservation, Step: "read", Detail: store.DetailOf(sized(0))}))
		}},
		{"lost (a batch on a non-call is not kept)", func(d *journalDriver) journalAnswer {
			return d.move("a", tp(ca, rs, 2, store.Record{Kind: store.RecordAuthorityResult, Step: "snapshot", Target: store.SecretTarget(suite.ToyNamespace, "x"),
				Status: "lost", Reason: "no-result-recorded", Batch: 1}))
		}},
		{"resolved ours", func(d *journalDriver) journalAnswer {
			return d.move("a", tp(rs, an, 3, store.Record{Kind: store.RecordResolution, Step: "snapshot", Target: store.SecretTarget(suite.ToyNamespace, "x"),
				UID: "uid-2", Status: "ours"}))
		}},
		{"completed", func(d *journalDriver) journalAnswer {
			return d.move("a", final(tp(an, co, 4, obs("read"), completion), "converged", ""))
		}},
		{"append after final", func(d *journalDriver) journalAnswer {
			return d.move("a", final(tp(co, co, 5, obs("read")), "converged", ""))
		}},
		{"move after final", func(d *journalDriver) journalAnswer {
			return d.move("a", final(tp(co, rf, 5, refusal), "refused", "late"))
		}},
		{"snapshot", func(d *journalDriver) journalAnswer { return d.snapshot("a") }},
		{"snapshot of nothing", func(d *journalDriver) journalAnswer { return d.snapshot("nothing") }},
		{"replay of a finished operation", func(d *journalDriver) journalAnswer { return d.prepare(eqPrep("a", "name", 1)) }},

		{"run 1", func(d *journalDriver) journalAnswer { return d.prepareRun(eqPrep("plan", "name", 5)) }},
		{"run 1 resumed", func(d *journalDriver) journalAnswer { return d.prepareRun(eqPrep("plan", "name", 5)) }},
		{"run 1 refused", func(d *journalDriver) journalAnswer {
			return d.move("plan:run-1", final(tp(pr, rf, 1, refusal), "refused", "key-active")) // the resume moved the revision
		}},
		{"run 2", func(d *journalDriver) journalAnswer { return d.prepareRun(eqPrep("plan", "name", 5)) }},
		{"run of another owner", func(d *journalDriver) journalAnswer { return d.prepareRun(eqPrep("plan", "other-name", 5)) }},
		{"run with a mutation ID too long", func(d *journalDriver) journalAnswer {
			return d.prepareRun(eqPrep(strings.Repeat("p", 120), "name", 5))
		}},
		{"runs", func(d *journalDriver) journalAnswer { return d.runs("plan") }},
		{"runs of nothing", func(d *journalDriver) journalAnswer { return d.runs("nothing") }},
		{"run 2 snapshot", func(d *journalDriver) journalAnswer { return d.snapshot("plan:run-2") }},
		{"run 2 calls a create", func(d *journalDriver) journalAnswer {
			return d.move("plan:run-2", tp(pr, ca, 0, call("create", "c", "", 1, map[string]any{"keys": []string{"password"}})))
		}},
		{"the create found in the plan's runs", func(d *journalDriver) journalAnswer {
			return d.findInRuns(store.RunRecordParams{Namespace: "ns", Command: "plan", Kind: store.RecordAuthorityCall, Step: "create", Target: "secret/c",
				Digest: "sha256:" + strings.Repeat("ab", 32)})
		}},
		{"another digest found in no run", func(d *journalDriver) journalAnswer {
			return d.findInRuns(store.RunRecordParams{Namespace: "ns", Command: "plan", Kind: store.RecordAuthorityCall, Step: "create", Target: "secret/c",
				Digest: "sha256:" + strings.Repeat("cd", 32)})
		}},
		{"another command's runs hold none", func(d *journalDriver) journalAnswer {
			return d.findInRuns(store.RunRecordParams{Namespace: "ns", Command: "pla", Kind: store.RecordAuthorityCall, Step: "create", Target: "secret/c"})
		}},
		{"another UID found in no run", func(d *journalDriver) journalAnswer {
			return d.findInRuns(store.RunRecordParams{Namespace: "ns", Command: "plan", Kind: store.RecordAuthorityCall, Step: "create", Target: "secret/c", UID: "uid-x"})
		}},
		{"the same questions asked together", func(d *journalDriver) journalAnswer {
			create := store.RunRecordParams{Namespace: "ns", Command: "plan", Kind: store.RecordAuthorityCall, Step: "create", Target: "secret/c"}
			digest, other, uid := create, create, create
			digest.Digest, other.Digest, uid.UID = "sha256:"+strings.Repeat("ab", 32), "sha256:"+strings.Repeat("cd", 32), "uid-x"
			elsewhere := create
			elsewhere.Command = "pla"
			return d.findEachInRuns(digest, other, elsewhere, uid, create)
		}},
		{"no question asked together", func(d *journalDriver) journalAnswer { return d.findEachInRuns() }},
		{"an older keyledger's operation, unfinished", func(d *journalDriver) journalAnswer { return d.prepare(eqPrep("legacy", "name", 7)) }},
		{"resumed as run 0", func(d *journalDriver) journalAnswer { return d.prepareRun(eqPrep("legacy", "name", 7)) }},
		{"run 0 completed", func(d *journalDriver) journalAnswer {
			return d.move("legacy", final(tp(pr, co, 1, completion), "existing", "")) // the resume moved the revision
		}},
		{"then run 1", func(d *journalDriver) journalAnswer { return d.prepareRun(eqPrep("legacy", "name", 7)) }},
		{"the plan's next version closes unfinished run 1", func(d *journalDriver) journalAnswer {
			return d.prepareRun(eqPrep("legacy", "name", 11))
		}},
		{"run 1 superseded", func(d *journalDriver) journalAnswer { return d.snapshot("legacy:run-1") }},
		{"run 2 names what it supersedes", func(d *journalDriver) journalAnswer { return d.snapshot("legacy:run-2") }},
		{"a bounded run", func(d *journalDriver) journalAnswer { return d.prepareRun(bounded(eqPrep("bounded", "name", 12))) }},
		{"resumed once", func(d *journalDriver) journalAnswer { return d.prepareRun(bounded(eqPrep("bounded", "name", 12))) }},
		{"past the bound: closed, run 2", func(d *journalDriver) journalAnswer { return d.prepareRun(bounded(eqPrep("bounded", "name", 12))) }},
		{"run 1 closed", func(d *journalDriver) journalAnswer { return d.snapshot("bounded:run-1") }},

		{"snapshot calls of uid-1 elsewhere", func(d *journalDriver) journalAnswer {
			d.prepare(eqPrep("s1", "name", 8))
			d.prepare(eqPrep("s2", "name", 9))
			d.prepare(eqPrep("s3", "elsewhere", 10))
			a := d.move("s1", tp(pr, ca, 0, obs("snapshot"), call("snapshot", "y", "uid-1", 1, map[string]any{"nonce": "n1"})))
			require.Empty(d.t, a.Class, a.Text)
			a = d.move("s2", tp(pr, ca, 0, call("snapshot", "y", "uid-9", 1, nil)))
			require.Empty(d.t, a.Class, a.Text)
			a = d.move("s3", tp(pr, ca, 0, call("snapshot", "y", "uid-1", 1, nil)))
			require.Empty(d.t, a.Class, a.Text)
			return d.answer(nil)
		}},
		{"step records bound to uid-1", func(d *journalDriver) journalAnswer {
			return d.stepRecords(store.StepRecordsParams{Namespace: "ns", Name: "name", Step: "snapshot", CallUID: "uid-1", Targets: []string{"secret/y"}})
		}},
		{"step records bound to uid-9", func(d *journalDriver) journalAnswer {
			return d.stepRecords(store.StepRecordsParams{Namespace: "ns", Name: "name", Step: "snapshot", CallUID: "uid-9", Targets: []string{"secret/y", "secret/z"}})
		}},
		{"step records of another step", func(d *journalDriver) journalAnswer {
			return d.stepRecords(store.StepRecordsParams{Namespace: "ns", Name: "name", Step: "read", CallUID: "uid-1", Targets: []string{"secret/y"}})
		}},
		{"step records of an unlisted target", func(d *journalDriver) journalAnswer {
			return d.stepRecords(store.StepRecordsParams{Namespace: "ns", Name: "name", Step: "snapshot", CallUID: "uid-1", Targets: []string{"secret/z"}})
		}},
		{"step records of no call", func(d *journalDriver) journalAnswer {
			return d.stepRecords(store.StepRecordsParams{Namespace: "ns", Name: "name", Step: "snapshot", CallUID: "uid-none", Targets: []string{"secret/y"}})
		}},
	}

	pg := &journalDriver{t: t, ctx: ctx, j: e.OperatorStore(), ids: map[string]int64{}}
	mem := &journalDriver{t: t, ctx: ctx, j: workflowtest.NewJournal(), ids: map[string]int64{}}
	// What PostgreSQL answers to each refusal the script tries (every other
	// step succeeds): the script tries what its names say.
	refusals := map[string]string{
		"prepare with another digest": "digest-mismatch", "prepare with another kind": "digest-mismatch",
		"prepare with a bad kind": "sqlstate 23514", "prepare, columns checked before the mutation ID is found": "sqlstate 23514",
		"prepare with a NUL": "sqlstate 22021", "stale revision": "state-moved", "wrong from": "state-moved",
		"no such operation": "state-moved", "not an edge": "sqlstate 23514", "not a state": "sqlstate 22P02",
		"terminal without outcome": "local", "terminal without its ending": "sqlstate 23000",
		"terminal with the other ending": "sqlstate 23000", "ending without its move": "sqlstate 23000",
		"outcome on a non-terminal move": "sqlstate 23514", "bad outcome": "sqlstate 23514", "bad reason": "sqlstate 23514",
		"two endings": "sqlstate 23505", "the same attempt twice": "sqlstate 23505", "a call without attempt": "sqlstate 23514",
		"an attempt on a non-call": "sqlstate 23514", "a negative batch": "sqlstate 23514", "final on a non-call": "sqlstate 23514", "attempt out of range": "sqlstate 23514", "bad step": "sqlstate 23514",
		"bad status": "sqlstate 23514", "bad digest": "sqlstate 23514", "not a record kind": "sqlstate 22P02",
		"a second preparation": "sqlstate 23505", "a NUL in a step": "sqlstate 22021", "a NUL in a detail": "sqlstate 22P05",
		"a detail one byte too large": "sqlstate 23514", "append after final": "sqlstate 42501",
		"move after final": "sqlstate 42501", "snapshot of nothing": "not-found", "run of another owner": "digest-mismatch",
		"run with a mutation ID too long": "local",
	}
	for _, s := range script {
		want := s.do(pg)
		require.Equal(t, refusals[s.name], want.Class, "%s: PostgreSQL answered %q", s.name, want.Text)
		got := s.do(mem)
		require.Equal(t, want, got, "%s: PostgreSQL answered %s %q, the in-memory journal %s %q",
			s.name, want.Class, want.Text, got.Class, got.Text)
	}
}

// secretOrNone is the Secret name in the toy namespace as a record's
// target, none for "".
func secretOrNone(name string) store.Target {
	if name == "" {
		return store.Target{}
	}
	return store.SecretTarget(suite.ToyNamespace, name)
}
