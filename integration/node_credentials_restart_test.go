package integration

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// syncExpectingFailure runs `keyledger apply-hook DIR` (an Argo CD sync)
// whose Job fails after its retries, and returns the exit codes of the
// Job's pods and their logs; applyHookOutput, when given, receives what
// apply-hook printed.
func (ne *nodeEnv) syncExpectingFailure(dir, owner string, applyHookOutput ...*string) (codes []int32, logs string) {
	ne.t.Helper()
	r := ne.keyledger([]string{"apply-hook", dir, "--timeout", "4m"})
	for _, out := range applyHookOutput {
		*out = r.Stdout + r.Stderr
	}
	require.NotEqual(ne.t, 0, r.Code, "the sync fails: %s %s", r.Stdout, r.Stderr)
	require.Contains(ne.t, r.Stdout+r.Stderr, "hook-job-failed", "%s %s\n%s", r.Stdout, r.Stderr, ne.hookPodLogs())
	pods, err := ne.kube.Client().CoreV1().Pods(ne.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "keyledger.dev/owner=" + owner})
	require.NoError(ne.t, err)
	for i := range pods.Items {
		p := &pods.Items[i]
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Terminated == nil {
			continue
		}
		codes = append(codes, p.Status.ContainerStatuses[0].State.Terminated.ExitCode)
	}
	return codes, ne.hookPodLogs()
}

// A server whose pod reads a different password than its Secret holds,
// forever: across three syncs of the rendered hook Job (one pod each: its
// podFailurePolicy fails the Job on exit 2, no retry), with the owner's
// journal prune after each, the pod is deleted exactly once (its UIDs from the API server's watch: two incarnations),
// and every hook pod after the first restart exits 2 naming the server (server-still-refuses). The hook
// pods are fenced by deploy/credentials and by the hook's own rendered
// NetworkPolicy, which alone lets them reach the server's port.
func TestIntegrationNodeCredentialsRestartOncePerCause(t *testing.T) {
	ne := setupNode(t)
	ne.joinJournal()
	apiIP, apiPort := ne.apiEndpoint()
	ne.applyAll(renderCredentialsFence(t, ne.ns, apiIP, apiPort))
	c := ne.kube.Client()
	const secret, set, pod = "stuck-cache-app", "stuck-cache", "stuck-cache-0"
	_, err := c.CoreV1().Secrets(ne.ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret},
		Data: map[string][]byte{"password": []byte(randomHexT(t)), "username": []byte("app")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The server never reads the Secret: its password is its own.
	ne.serverStatefulSet(set, secret, 6379, "redis-server", "--port", "6379", "--requirepass", "not-what-the-secret-holds-"+randomHexT(t),
		"--save", "", "--appendonly", "no")
	cacheIP := ne.waitPodReady(pod, 90*time.Second)
	require.True(t, strings.HasPrefix(valkeyAuth(t, net.JoinHostPort(cacheIP, "6379"), ne.getSecret(secret).Data["password"]), "-WRONGPASS"))

	plan := credentialPlan(ne.ns, "mut-node-stuck", []planSecret{standardSecret(secret)}, func(spec map[string]any) {
		spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": pod, "port": 6379, "secret": secret, "passwordKey": "password"}}
		spec["repair"] = map[string]any{"restartOnUnproven": true} // the Secret was written by hand: unproven
	})
	owner := specOf(t, plan).Owner
	dir := ne.renderHook(plan)
	uids := ne.podUIDs(pod)
	for sync := 1; sync <= 3; sync++ {
		codes, logs := ne.syncExpectingFailure(dir, owner)
		require.Len(t, codes, 1, "sync %d: one pod; exit 2 fails the Job at once (its podFailurePolicy): %s", sync, logs)
		for _, code := range codes {
			require.EqualValues(t, 2, code, "sync %d: every hook pod exits 2: %s", sync, logs)
		}
		require.Contains(t, logs, "server-still-refuses", "sync %d", sync)
		require.Contains(t, logs, pod, "sync %d: the refusal names the server", sync)
		ne.waitPodReady(pod, 90*time.Second)
		// The owner prunes every finished run it may between two syncs:
		// the run that holds the restart is kept (migration 12), so the
		// next sync still knows the cause was answered.
		r := ne.keyledger([]string{"journal", "prune", "--older-than", "0s"}, withDatabase(ne.journal.OwnerURL))
		require.Equal(t, 0, r.Code, "prune after sync %d: %s %s", sync, r.Stdout, r.Stderr)
	}
	seen := uids()
	require.Len(t, seen, 2, "the server pod was deleted exactly once across three syncs: %v", seen)
	requireNoValues(t, ne.hookPodLogs(), ne.secretValues(secret))
}
