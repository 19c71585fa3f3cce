package integration

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
)

// A server whose pod reads a different password than its Secret holds,
// forever: across three syncs of the rendered hook Job (one pod each: its
// podFailurePolicy fails the Job on exit 2, no retry), with the owner's
// journal prune after each, the pod is deleted exactly once (its UIDs from the API server's watch: two incarnations),
// and every hook pod after the first restart exits 2 naming the server (server-still-refuses). The hook
// pods are fenced by deploy/credentials and by the hook's own rendered
// NetworkPolicy, which alone lets them reach the server's port.
func TestIntegrationNodeCredentialsRestartOncePerCause(t *testing.T) {
	ne := setupNode(t)
	ne.JoinJournal()
	apiIP, apiPort := ne.APIEndpoint()
	ne.ApplyAll(suite.RenderCredentialsFence(t, ne.NS, apiIP, apiPort))
	c := ne.Kube.Client()
	const secret, set, pod = "stuck-cache-app", "stuck-cache", "stuck-cache-0"
	_, err := c.CoreV1().Secrets(ne.NS).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret},
		Data: map[string][]byte{"password": []byte(suite.RandomHex(t, 16)), "username": []byte("app")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The server never reads the Secret: its password is its own.
	ne.ServerStatefulSet(set, secret, 6379, "redis-server", "--port", "6379", "--requirepass", "not-what-the-secret-holds-"+suite.RandomHex(t, 16),
		"--save", "", "--appendonly", "no")
	cacheIP := ne.WaitPodReady(pod, 90*time.Second)
	require.True(t, strings.HasPrefix(valkeyAuth(t, net.JoinHostPort(cacheIP, "6379"), ne.GetSecret(secret).Data["password"]), "-WRONGPASS"))

	plan := suite.CredentialPlan(ne.NS, "mut-node-stuck", []suite.PlanSecret{suite.StandardSecret(secret)}, func(spec map[string]any) {
		spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": pod, "port": 6379, "secret": secret, "passwordKey": "password"}}
		spec["repair"] = map[string]any{"restartOnUnproven": true} // the Secret was written by hand: unproven
	})
	owner := suite.SpecOf(t, plan).Owner
	dir := ne.RenderHook(plan)
	uids := ne.PodUIDs(pod)
	for sync := 1; sync <= 3; sync++ {
		codes, logs := ne.SyncExpectingFailure(dir, owner)
		require.Len(t, codes, 1, "sync %d: one pod; exit 2 fails the Job at once (its podFailurePolicy): %s", sync, logs)
		for _, code := range codes {
			require.EqualValues(t, 2, code, "sync %d: every hook pod exits 2: %s", sync, logs)
		}
		require.Contains(t, logs, "server-still-refuses", "sync %d", sync)
		require.Contains(t, logs, pod, "sync %d: the refusal names the server", sync)
		ne.WaitPodReady(pod, 90*time.Second)
		// The owner prunes every finished run it may between two syncs:
		// the run that holds the restart is kept (migration 12), so the
		// next sync still knows the cause was answered.
		r := ne.Keyledger([]string{"journal", "prune", "--older-than", "0s"}, suite.WithDatabase(ne.Journal.OwnerURL))
		require.Equal(t, 0, r.Code, "prune after sync %d: %s %s", sync, r.Stdout, r.Stderr)
	}
	seen := uids()
	require.Len(t, seen, 2, "the server pod was deleted exactly once across three syncs: %v", seen)
	suite.RequireNoValues(t, ne.HookPodLogs(), ne.SecretValues(secret))
}
