package kube

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The hook adapter refuses an object of another namespace, or of a kind a
// hook does not hold, before any request: the client points at a closed
// loopback port, so a request would fail with a connection error instead.
func TestHookRefusesOutsideItsBinding(t *testing.T) {
	t.Parallel()
	client, err := NewClient(&rest.Config{Host: "http://127.0.0.1:1"})
	require.NoError(t, err)
	h := NewHook(client, "shop")
	ctx := context.Background()
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x-credentials", Namespace: "bank"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "shop"}}
	for name, call := range map[string]func(metav1.Object) error{
		"delete":    func(o metav1.Object) error { return h.Delete(ctx, o) },
		"wait-gone": func(o metav1.Object) error { return h.WaitGone(ctx, o) },
		"create":    func(o metav1.Object) error { return h.Create(ctx, o) },
	} {
		err := call(other)
		require.ErrorContains(t, err, `configmap/x-credentials in namespace "bank" refused: adapter is bound to namespace "shop"`, name)
		err = call(secret)
		require.ErrorContains(t, err, "*v1.Secret refused: not a hook object", name)
	}
}

// Apply order is Argo CD's for the hook's sync waves: the Job last.
func TestHookObjectsInOrder(t *testing.T) {
	t.Parallel()
	meta := metav1.ObjectMeta{Name: "o-credentials", Namespace: "shop"}
	o := &HookObjects{ServiceAccount: &corev1.ServiceAccount{ObjectMeta: meta}, Role: &rbacv1.Role{ObjectMeta: meta},
		RoleBinding: &rbacv1.RoleBinding{ObjectMeta: meta}, ConfigMap: &corev1.ConfigMap{ObjectMeta: meta},
		NetworkPolicy: &networkingv1.NetworkPolicy{ObjectMeta: meta},
		Job:           &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "o-credentials-0123abcd", Namespace: "shop"}}}
	var refs []string
	for _, obj := range o.InOrder() {
		refs = append(refs, HookRef(obj))
	}
	require.Equal(t, []string{"serviceaccount/o-credentials", "role/o-credentials", "rolebinding/o-credentials",
		"configmap/o-credentials", "networkpolicy/o-credentials", "job/o-credentials-0123abcd"}, refs)
}
