package workflow_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/kube/kubefake"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// TestExecutePrefetchesOnceThePermissionMatrixHeld: Plan.Prefetch is
// called once the permission matrix held, before the journal is opened;
// a matrix that does not hold calls neither.
func TestExecutePrefetchesOnceThePermissionMatrixHeld(t *testing.T) {
	t.Parallel()
	for _, allowed := range []bool{true, false} {
		fake, client := kubefake.NewClientset()
		fake.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
			review := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
			review.Status.Allowed = allowed
			return true, review, nil
		})
		var order []string
		family := &scripted{decide: func(*workflow.Run, func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
			order = append(order, "decide")
			return workflow.Decision{Complete: &workflow.Completion{Outcome: workflow.OutcomeExisting}}
		}, resolve: noResolve}
		plan := workflow.Plan{Prepare: toy("m"), Family: family,
			Access:   []kube.AccessCheck{{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "x", Allowed: true}},
			Prefetch: func(context.Context) { order = append(order, "prefetch") }}
		deps := workflow.Deps{Kube: client, OpenStore: func(context.Context) (workflow.Store, error) {
			order = append(order, "open journal")
			return workflowtest.NewJournal(), nil
		}}
		_, err := workflow.Execute(t.Context(), deps, plan)
		if allowed {
			require.NoError(t, err)
			require.Equal(t, []string{"prefetch", "open journal", "decide"}, order)
			continue
		}
		var mismatch *workflow.PermissionMismatch
		require.ErrorAs(t, err, &mismatch)
		require.Empty(t, order, "nothing read, nothing opened")
	}
}
