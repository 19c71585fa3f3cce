package kubefake_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/kube/kubefake"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// TestOnlyTestsImportIt: no non-test file outside this package imports
// it, so no program links a clientset through it.
func TestOnlyTestsImportIt(t *testing.T) {
	t.Parallel()
	workflowtest.RequireOnlyTestsImport(t, "../..", ".", "github.com/keyledger/keyledger/kube/kubefake")
}

// The adapter's views are the clientset's: what one writes, the clientset
// holds, and its errors are client-go's (kube.Wrap classifies them).
func TestViewsAreTheClientsets(t *testing.T) {
	t.Parallel()
	fake, client := kubefake.NewClientset()
	ctx := t.Context()
	_, err := client.Secrets("ns").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	got, err := fake.CoreV1().Secrets("ns").Get(ctx, "s", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "s", got.Name)
	_, err = client.Pods("ns").Get(ctx, "absent", metav1.GetOptions{})
	require.ErrorIs(t, kube.Wrap(err), kube.ReasonNotFound)
}
