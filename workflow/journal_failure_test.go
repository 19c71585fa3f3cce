package workflow_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// failing is a journal whose Prepare, PrepareRun or Snapshot fail with err.
type failing struct {
	*workflowtest.Journal
	prepare, snapshot error
}

func (f *failing) Prepare(ctx context.Context, p store.PrepareParams) (*store.Operation, bool, error) {
	if f.prepare != nil {
		return nil, false, f.prepare
	}
	return f.Journal.Prepare(ctx, p)
}

func (f *failing) PrepareRun(ctx context.Context, p store.PrepareParams) (*store.Operation, bool, error) {
	if f.prepare != nil {
		return nil, false, f.prepare
	}
	return f.Journal.PrepareRun(ctx, p)
}

func (f *failing) Snapshot(ctx context.Context, ns, id string) (*store.Operation, []store.Record, error) {
	if f.snapshot != nil {
		return nil, nil, f.snapshot
	}
	return f.Journal.Snapshot(ctx, ns, id)
}

// A journal failure while the operation is prepared is a dependency that
// is unavailable (exit 69), whatever the server said: a session ended by
// the server (57P01) or a live-run lock wait that timed out (55P03) was a
// bare error before, exit 1. Once the operation is durable (a resumed one
// whose snapshot fails) it is uncertain (75). A failure of keyledger's own
// stays one.
func TestOperateJournalFailuresAreTyped(t *testing.T) {
	t.Parallel()
	never := &scripted{decide: func(*workflow.Run, func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
		panic("nothing is decided")
	}}
	for _, code := range []string{"57P01", "55P03", "53300", "42501"} {
		for _, runs := range []bool{false, true} {
			st := &failing{Journal: workflowtest.NewJournal(), prepare: &pgconn.PgError{Code: code}}
			_, err := workflow.Operate(t.Context(), st, workflow.Plan{Prepare: toy("m-" + code), Family: never, Runs: runs}, nil)
			var unavailable *workflow.Unavailable
			require.ErrorAs(t, err, &unavailable, "%s (runs %v): %v", code, runs, err)
			require.Equal(t, "postgresql", unavailable.Dependency)
		}
	}

	bug := &failing{Journal: workflowtest.NewJournal(), prepare: errors.New("decoding the operation")}
	_, err := workflow.Operate(t.Context(), bug, workflow.Plan{Prepare: toy("m-bug"), Family: never}, nil)
	require.Error(t, err)
	require.False(t, errors.As(err, new(*workflow.Unavailable)) || errors.As(err, new(*workflow.Uncertain)), "%v", err)

	// A prepared operation, resumed: its snapshot fails.
	st := &failing{Journal: workflowtest.NewJournal()}
	_, _, err = st.Prepare(t.Context(), toy("m-resumed"))
	require.NoError(t, err)
	st.snapshot = &pgconn.PgError{Code: "57P01"}
	res, err := workflow.Operate(t.Context(), st, workflow.Plan{Prepare: toy("m-resumed"), Family: never}, nil)
	var uncertain *workflow.Uncertain
	require.ErrorAs(t, err, &uncertain)
	require.Equal(t, workflow.ReasonInterrupted, uncertain.Reason)
	require.Equal(t, workflow.OutcomeUncertain, res.Outcome)
}
