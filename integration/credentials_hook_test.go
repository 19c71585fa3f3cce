package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/integration/platform"
)

// render credentials + apply-hook on the real control plane: the objects
// apply, the Job's pod is played (the test runs keyledger as the pod would,
// with a token of the rendered ServiceAccount and the plan from the
// rendered ConfigMap), and the rendered Role allows exactly the run.
func TestIntegrationCredentialsRenderedHook(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, c := t.Context(), e.kube.Client()
	plan := credentialPlan(e.ns, "mut-hook", []planSecret{standardSecret("shop-orders-cache-app"), standardSecret("shop-bus-users")})
	planPath := e.writeCommand("plan.json", plan)
	dir := filepath.Join(e.dir, "hook")
	r := e.keyledger([]string{"render", "credentials", "--plan", planPath, "--image", "keyledger:test", "--out-dir", dir})
	require.Equal(t, 0, r.Code, r.Stderr)

	// Play the Job's pod: wait for it, run keyledger as its ServiceAccount
	// with the plan the ConfigMap holds, report the pod's phase.
	playHook := func(want, run string) *rest.Config {
		t.Helper()
		done := make(chan result, 1)
		go func() { done <- e.keyledger([]string{"apply-hook", dir, "--timeout", "90s"}) }()
		var pod *corev1.Pod
		require.Eventually(t, func() bool {
			pods, err := c.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "keyledger.dev/owner=shop-orders-cache"})
			if err != nil {
				return false
			}
			for i := range pods.Items { // the previous sync's pod may still be there
				if p := &pods.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded {
					pod = p
				}
			}
			return pod != nil
		}, 60*time.Second, 100*time.Millisecond, "the Job's pod never appeared")
		require.Equal(t, "shop-orders-cache-credentials", pod.Spec.ServiceAccountName)
		cm, err := c.CoreV1().ConfigMaps(e.ns).Get(ctx, "shop-orders-cache-credentials", metav1.GetOptions{})
		require.NoError(t, err)
		fromConfigMap := filepath.Join(e.dir, "from-configmap.json")
		require.NoError(t, os.WriteFile(fromConfigMap, []byte(cm.Data["plan.json"]), 0o644))
		cfg, err := e.kube.ServiceAccountConfig(ctx, e.ns, pod.Spec.ServiceAccountName, 600)
		require.NoError(t, err)
		kubeconfig, err := e.kube.KubeconfigForConfig(cfg, t.TempDir())
		require.NoError(t, err)
		r := e.keyledger([]string{"run", fromConfigMap}, asKubeconfig(kubeconfig))
		require.Equal(t, 0, r.Code, "the run under the rendered Role succeeds: %s %s", r.Stdout, r.Stderr)
		require.Equal(t, want, outcome(t, r)["outcome"])
		require.Equal(t, run, outcome(t, r)["run"])

		pod.Status.Phase = corev1.PodSucceeded
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "keyledger", Image: "keyledger:test", ImageID: "keyledger:test",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
				StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}}}
		_, err = c.CoreV1().Pods(e.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		require.NoError(t, err)
		select {
		case r = <-done:
		case <-time.After(90 * time.Second):
			t.Fatal("apply-hook did not return")
		}
		require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
		require.Contains(t, r.Stdout, `"outcome":"succeeded"`)
		return cfg
	}
	cfg := playHook("completed", "mut-hook:run-1")
	// The next sync (apply-hook again: the same Job name deleted first) is
	// run 2 of the plan: it converges, writing nothing.
	rv := e.getSecret("shop-orders-cache-app").ResourceVersion
	playHook("existing", "mut-hook:run-2")
	require.Equal(t, rv, e.getSecret("shop-orders-cache-app").ResourceVersion)

	// What the rendered Role allows, asked as its ServiceAccount (what
	// `kubectl auth can-i --as` would answer).
	sa, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	canI := func(verb, resource, name string) bool {
		t.Helper()
		rev, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: e.ns, Verb: verb, Resource: resource, Name: name}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		return rev.Status.Allowed
	}
	require.True(t, canI("get", "secrets", "shop-orders-cache-app"))
	require.True(t, canI("patch", "secrets", "shop-bus-users"))
	require.True(t, canI("create", "secrets", ""))
	require.False(t, canI("get", "secrets", "another-secret"), "cannot read another Secret")
	require.False(t, canI("update", "secrets", "shop-orders-cache-app"), "cannot update")
	require.False(t, canI("list", "secrets", ""), "cannot list")
	require.False(t, canI("watch", "secrets", ""))
	require.False(t, canI("delete", "secrets", "shop-orders-cache-app"))
	// And really: the API server refuses the read.
	_, err = sa.CoreV1().Secrets(e.ns).Get(ctx, "another-secret", metav1.GetOptions{})
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "forbidden"), "%v", err)

	// A run under an identity with one right more (list) stops with 77
	// before the journal is opened.
	wider := append(rulesOf(t, dir), rbacWider()...)
	r = e.keyledger([]string{"run", planPath}, asKubeconfig(e.serviceAccountKubeconfig("wider", wider)))
	require.Equal(t, 77, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Contains(t, outcome(t, r)["error"], "list secrets")
}

// The keyledger binary renders, without --image, the image of the versions
// table's KEYLEDGER_IMAGE row: the tag `make image` builds.
func TestIntegrationCredentialsRenderDefaultImage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	want, err := platform.Version("KEYLEDGER_IMAGE")
	require.NoError(t, err)
	plan := credentialPlan(e.ns, "mut-image", []planSecret{standardSecret("shop-orders-cache-app")})
	dir := filepath.Join(e.dir, "hook")
	r := e.keyledger([]string{"render", "credentials", "--plan", e.writeCommand("plan.json", plan), "--out-dir", dir})
	require.Equal(t, 0, r.Code, r.Stderr)
	b, err := os.ReadFile(filepath.Join(dir, "5-job.yaml"))
	require.NoError(t, err)
	var job batchv1.Job
	require.NoError(t, yaml.UnmarshalStrict(b, &job))
	require.Equal(t, want, job.Spec.Template.Spec.Containers[0].Image)
	make, err := os.ReadFile(filepath.Join(platform.RepoRoot(), "Makefile"))
	require.NoError(t, err)
	require.Contains(t, string(make), "IMAGE=$(KEYLEDGER_IMAGE) bash hack/image.sh", "make image builds the same tag")
}
