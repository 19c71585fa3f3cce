package workflow_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// asking is a scripted family that answers workflow.Asker with why (and
// the records it read), counting the questions.
type asking struct {
	*scripted
	why   string
	notes []store.Record
	err   error
	asked []string
}

func (f *asking) Asks(_ context.Context, _ *workflow.Run, call *workflow.Call) (string, []store.Record, error) {
	f.asked = append(f.asked, call.Step+" "+call.Target.String())
	return f.why, f.notes, f.err
}

// A call the journal holds in calling, which resolution finds not applied,
// is sent again only when the family's decision made now would make it
// (workflow.Asker): not asked, nothing is sent and the run refuses
// call-not-asked, journaling what the family read; asked, it is sent; an
// error asking leaves the outcome uncertain with nothing sent.
func TestOperateSendsAJournaledCallAgainOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		why     string
		err     error
		sent    int
		outcome string
	}{
		"not asked": {why: "the server accepts its password", sent: 0, outcome: "refused/" + workflow.ReasonCallNotAsked},
		"asked":     {why: "", sent: 1, outcome: "completed"},
		"unreadable": {err: &workflow.Unavailable{Dependency: "kubernetes", Err: errors.New("down")}, sent: 0,
			outcome: "uncertain/interrupted"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			j := workflowtest.NewJournal()
			op, _, err := j.Prepare(ctx, toy("m"))
			require.NoError(t, err)
			// A pending call, as a process that died (or a forger) left it.
			_, err = j.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCalling,
				Records: []store.Record{{Kind: store.RecordAuthorityCall, Step: "delete-pod", Target: store.Target{Kind: store.TargetPod, Namespace: "", Name: "x"}, Attempt: 1, UID: "u0",
					Batch: 1, Final: true}}})
			require.NoError(t, err)
			read := store.Record{Kind: store.RecordProbe, Step: "probe-server", Target: store.Target{Kind: store.TargetPod, Namespace: "", Name: "x"}, Status: "accepted"}
			s := &scripted{}
			f := &asking{scripted: s, why: c.why, err: c.err, notes: []store.Record{read}}
			s.decide = func(*workflow.Run, func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
				return workflow.Decision{End: errors.New("not decided again")}
			}
			s.resolve = func(_ *workflow.Run, call store.Record) workflow.Verdict {
				retry := &workflow.Call{Step: call.Step, Target: store.Target{Kind: store.TargetPod, Namespace: "ns", Name: "x"}, UID: call.UID,
					Final: true, Send: func(context.Context) workflow.Answer { s.sent++; return workflow.Answer{Status: workflow.Applied} }}
				return workflow.Verdict{Kind: workflow.NotApplied, Reason: "still-running", Retry: retry}
			}
			res, err := workflow.Operate(ctx, j, workflow.Plan{Prepare: toy("m"), Family: f}, nil)
			require.Equal(t, c.outcome, workflowtest.Ending(res, err))
			require.Equal(t, c.sent, s.sent)
			require.Equal(t, []string{"delete-pod pod/x"}, f.asked, "asked once, before anything is sent")
			_, records, err := j.Snapshot(ctx, "", "m")
			require.NoError(t, err)
			if c.why != "" {
				last := records[len(records)-1]
				require.Equal(t, store.RecordRefusal, last.Kind)
				require.Equal(t, map[string]any{"step": "delete-pod", "target": "pod/x", "why": c.why}, workflowtest.Fields(last.Detail))
				require.Equal(t, store.RecordProbe, records[len(records)-2].Kind, "what the family read is journaled")
			}
		})
	}
}
