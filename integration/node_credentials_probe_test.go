package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/workflow/credentials"
)

// redisConnections asks the redis-server at addr (no password) how many
// connections it accepted since it started, this one included.
func redisConnections(t *testing.T, addr string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = fmt.Fprint(conn, "*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n")
	require.NoError(t, err)
	r := bufio.NewReader(conn)
	header, err := r.ReadString('\n')
	require.NoError(t, err)
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(header, "$")))
	require.NoError(t, err, "INFO answered %q", header)
	body := make([]byte, n+2)
	_, err = io.ReadFull(r, body)
	require.NoError(t, err)
	for _, line := range strings.Split(string(body), "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_connections_received:"); ok {
			got, err := strconv.Atoi(v)
			require.NoError(t, err)
			return got
		}
	}
	t.Fatalf("INFO stats without total_connections_received")
	return 0
}

// TestIntegrationNodePlantedPodsGetNothing: on the test
// node, two pods planted by someone who may create pods, each named as a
// planned server whose expected controller is the StatefulSet shop-cache,
// each a real redis-server without a password (a listener that would take
// any AUTH) carrying the label the hook's NetworkPolicy lets the hook
// reach: shop-cache-a, whose controller owner reference names a
// StatefulSet shop-cache in a made-up API group, and shop-cache-0, the
// StatefulSet's own pod name, planted with its labels and identity while
// the name was free and adopted by its controller (the real UID), but
// running another container than the template's. Every
// hook pod of the sync (the Job and its retries) exits 2 server-not-owned,
// and each redis-server accepted no connection but the test's own.
func TestIntegrationNodePlantedPodsGetNothing(t *testing.T) {
	ne := setupNode(t)
	ne.JoinJournal()
	apiIP, apiPort := ne.APIEndpoint()
	ne.ApplyAll(suite.RenderCredentialsFence(t, ne.NS, apiIP, apiPort))
	listener := []corev1.Container{{Name: "server", Image: ne.ServersImage(), ImagePullPolicy: corev1.PullNever,
		Command: []string{"redis-server", "--port", "6379", "--save", "", "--appendonly", "no", "--protected-mode", "no"}}}
	plant := func(name string, owner *metav1.OwnerReference, labels map[string]string, spec corev1.PodSpec) string {
		t.Helper()
		spec.Containers, spec.TerminationGracePeriodSeconds, spec.AutomountServiceAccountToken = listener, suite.Ptr(int64(1)), suite.Ptr(false)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: spec}
		if owner != nil {
			owner.Controller = suite.Ptr(true)
			pod.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		_, err := ne.Kube.Client().CoreV1().Pods(ne.NS).Create(t.Context(), pod, metav1.CreateOptions{})
		require.NoError(t, err)
		return net.JoinHostPort(ne.WaitPodReady(name, 90*time.Second), "6379")
	}
	// shop-cache-0 first, with the StatefulSet's labels and identity while
	// its name is free: the StatefulSet's controller adopts it (the real
	// UID) and, the pod being there, starts none of its own.
	labels, spec := suite.StatefulPodIdentity("shop-cache", 0, corev1.PodSpec{})
	b := plant("shop-cache-0", nil, labels, spec)
	ne.AdoptingStatefulSet(t.Context(), "shop-cache", []corev1.Container{{Name: "server", Image: ne.ServersImage(), ImagePullPolicy: corev1.PullNever,
		Command: []string{"redis-server", "--port", "6379", "--requirepass", "$(PASSWORD)", "--save", "", "--appendonly", "no"},
		Env: []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "shop-cache-app"}, Key: "password"}}}}}})
	a := plant("shop-cache-a", &metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "StatefulSet", Name: "shop-cache",
		UID: "5c0f8a52-0d7e-4b4e-9a57-2f1f5d0e9b01"}, map[string]string{"app": "shop-cache", "statefulset.kubernetes.io/pod-name": "shop-cache-a"},
		corev1.PodSpec{})

	plan := suite.CredentialPlan(ne.NS, "mut-node-planted", []suite.PlanSecret{suite.StandardSecret("shop-cache-app")}, func(spec map[string]any) {
		spec["servers"] = []any{
			map[string]any{"protocol": "valkey", "pod": "shop-cache-a", "port": 6379, "secret": "shop-cache-app", "passwordKey": "password",
				"controller": map[string]any{"kind": "StatefulSet", "name": "shop-cache"}},
			map[string]any{"protocol": "valkey", "pod": "shop-cache-0", "port": 6379, "secret": "shop-cache-app", "passwordKey": "password"},
		}
	})
	codes, logs := ne.SyncExpectingFailure(ne.RenderHook(plan), suite.SpecOf(t, plan).Owner)
	require.Equal(t, 1, redisConnections(t, a), "the pod owned in another API group: no connection but this one")
	require.Equal(t, 1, redisConnections(t, b), "the pod with the real UID and another container: no connection but this one")
	require.NotEmpty(t, codes, logs)
	for _, code := range codes {
		require.EqualValues(t, 2, code, "every hook pod exits 2: %s", logs)
	}
	require.Contains(t, logs, credentials.ReasonServerNotOwned)
	require.Contains(t, logs, `"check":"owner-group"`)
	require.Contains(t, logs, `"check":"containers"`)
	suite.RequireNoValues(t, logs, ne.SecretValues("shop-cache-app"))
}
