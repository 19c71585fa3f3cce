package credentials

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow"
)

// scriptedHook records the verbs ApplyHook sends and fails the one named.
type scriptedHook struct {
	verbs     []string
	failVerb  string
	jobFailed bool
}

func (h *scriptedHook) do(verb string, o metav1.Object) error {
	h.verbs = append(h.verbs, verb+" "+kube.HookRef(o))
	if verb == h.failVerb {
		return errors.New("scripted " + verb + " failure")
	}
	return nil
}

func (h *scriptedHook) Delete(_ context.Context, o metav1.Object) error   { return h.do("delete", o) }
func (h *scriptedHook) WaitGone(_ context.Context, o metav1.Object) error { return h.do("gone", o) }
func (h *scriptedHook) Create(_ context.Context, o metav1.Object) error   { return h.do("create", o) }
func (h *scriptedHook) WaitJob(_ context.Context, name string) (bool, string, error) {
	h.verbs = append(h.verbs, "wait job/"+name)
	if h.failVerb == "wait" {
		return false, "", errors.New("scripted wait failure")
	}
	if h.jobFailed {
		return true, "PodFailurePolicy: Container keyledger for pod shop/job-x failed with exit code 2 matching FailJob rule at index 1", nil
	}
	return false, "", nil
}

func hookObjects() *kube.HookObjects {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: "shop"} }
	return &kube.HookObjects{
		ServiceAccount: &corev1.ServiceAccount{ObjectMeta: meta("sa")}, Role: &rbacv1.Role{ObjectMeta: meta("role")},
		RoleBinding: &rbacv1.RoleBinding{ObjectMeta: meta("rb")}, ConfigMap: &corev1.ConfigMap{ObjectMeta: meta("plan")},
		NetworkPolicy: &networkingv1.NetworkPolicy{ObjectMeta: meta("fence")},
		Job:           &batchv1.Job{ObjectMeta: meta("job")},
	}
}

// ApplyHook replaces every object in order before it waits for the Job,
// and maps each step's failure to the run's ending.
func TestApplyHook(t *testing.T) {
	t.Parallel()
	ok := &scriptedHook{}
	require.NoError(t, ApplyHook(t.Context(), ok, hookObjects(), time.Minute))
	require.Len(t, ok.verbs, 3*len(HookFiles)+1)
	for i, obj := range hookObjects().InOrder() {
		ref := kube.HookRef(obj)
		require.Equal(t, []string{"delete " + ref, "gone " + ref, "create " + ref}, ok.verbs[3*i:3*i+3])
	}
	require.Equal(t, "wait job/job", ok.verbs[len(ok.verbs)-1])

	var unavailable *workflow.Unavailable
	for _, verb := range []string{"delete", "create"} {
		h := &scriptedHook{failVerb: verb}
		require.ErrorAs(t, ApplyHook(t.Context(), h, hookObjects(), time.Minute), &unavailable, verb)
		require.Len(t, h.verbs, map[string]int{"delete": 1, "create": 3}[verb], "nothing after the failed %s", verb)
	}
	gone := &scriptedHook{failVerb: "gone"}
	err := ApplyHook(t.Context(), gone, hookObjects(), time.Minute)
	require.ErrorContains(t, err, "waiting for the old")
	require.NotErrorAs(t, err, &unavailable)

	var uncertain *workflow.Uncertain
	require.ErrorAs(t, ApplyHook(t.Context(), &scriptedHook{failVerb: "wait"}, hookObjects(), time.Minute), &uncertain)
	require.Equal(t, ReasonHookJobUnfinished, uncertain.Reason)
	var refused *workflow.Refused
	require.ErrorAs(t, ApplyHook(t.Context(), &scriptedHook{jobFailed: true}, hookObjects(), time.Minute), &refused)
	require.Equal(t, ReasonHookJobFailed, refused.Reason)
	require.Contains(t, refused.Error(), "exit code 2", "the refusal carries the Job's Failed condition")
}
