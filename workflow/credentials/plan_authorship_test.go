package credentials

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// TestPlanPredictsTheRunsAuthorship: keyledger plan (the dry run) predicts
// each planned Secret's authorship as the run then reports it: a Secret the
// run would create is proven, one found in place unproven, one an adopted
// ExternalSecret produced adopted. A plan that said unproven for a Secret it
// would create itself sent its reader to the audit log on every first sync.
func TestPlanPredictsTheRunsAuthorship(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		setup func(e *env)
		want  map[string]any
	}{
		"every Secret absent": {func(*env) {}, map[string]any{secretApp: "proven", secretBus: "proven"}},
		"one planted":         {planted(), map[string]any{secretApp: "unproven", secretBus: "proven"}},
		"one adopted":         {adoptable, map[string]any{secretApp: "adopted", secretBus: "proven"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, withAdoption(basePlan()))
			tc.setup(e)
			plan := e.plan()
			plan.Access, plan.Rights = nil, nil // the permission matrix is the integration suite's
			dry, err := workflow.DryRun(context.Background(), workflow.Deps{
				OpenStore: func(context.Context) (workflow.Store, error) { return e.j, nil }}, plan)
			require.NoError(t, err)
			require.Empty(t, dry.Stopped)
			predicted, _ := workflowtest.Fields(dry.Summary)["authorship"].(map[string]any)
			require.Equal(t, tc.want, predicted, "plan")
			// The same cluster and journal, run for real (the dry run closed
			// the journal it read, and wrote nothing anywhere).
			ran := newEnv(t, withAdoption(basePlan()))
			tc.setup(ran)
			r := ran.run()
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, predicted, r.authorship(), "plan predicts what the run reports")
		})
	}
}
