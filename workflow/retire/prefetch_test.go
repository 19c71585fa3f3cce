package retire

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/kubetest"
)

// prefetchedPlan is the scene's plan with the early read of the Secret
// wired in, as Plan builds it.
func (sc *scene) prefetchedPlan() (workflow.Plan, *family) {
	plan := sc.plan()
	f := plan.Family.(*family)
	plan.Prefetch = f.prefetch
	return plan, f
}

// The first decision of a new operation takes the read started while the
// journal connected: one GET of the Secret, then the replace.
func TestPrefetchedReadIsTheDecisionsRead(t *testing.T) {
	m := standardKeyring()
	sc := newScene(t, m, keyringSecret(m))
	plan, f := sc.prefetchedPlan()
	ctx := context.Background()
	plan.Prefetch(ctx)
	early := f.early
	res, err := workflow.Operate(ctx, sc.journal, plan, nil)
	<-early.done
	require.NoError(t, err)
	require.Equal(t, workflow.OutcomeCompleted, res.Outcome)
	require.Equal(t, 1, sc.api.Count(kubetest.Get, kubetest.Secrets, fxSecret), "the early read is the only read")
	require.Equal(t, 1, sc.api.Count(kubetest.Update, kubetest.Secrets, fxSecret))
}

// A change made after the early read and before the replace is never
// written over: the replace is a compare-and-set on the resourceVersion
// the early read showed, so the API server refuses it, and their change
// stays as they made it.
func TestPrefetchedReadCannotOverwriteALaterChange(t *testing.T) {
	m := standardKeyring()
	sc := newScene(t, m, keyringSecret(m))
	plan, f := sc.prefetchedPlan()
	ctx := context.Background()
	plan.Prefetch(ctx)
	<-f.early.done
	sc.api.Edit(kubetest.Secrets, fxSecret, func(o kubetest.Object) {
		o.(*corev1.Secret).Annotations["theirs"] = "changed after the early read"
	})
	theirs := sc.api.Secret(fxSecret)
	res, err := workflow.Operate(ctx, sc.journal, plan, nil)
	require.Error(t, err)
	require.NotEqual(t, workflow.OutcomeCompleted, res.Outcome)
	require.Equal(t, theirs, sc.api.Secret(fxSecret), "their change is what the Secret holds")
}
