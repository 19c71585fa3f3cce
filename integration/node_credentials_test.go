package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
)

// The credentials hook as Argo CD runs it: render, then apply-hook; the Job
// runs in a pod on the kubelet and reads its plan from the ConfigMap volume
// exactly where the rendered spec mounts it, and creates the planned
// Secrets. A second sync (apply-hook again: the same Job name, deleted
// first) after one planned Secret was deleted by hand recreates it and
// writes nothing else. The hook pod is fenced by deploy/credentials (DNS,
// the journal's primary, the API server endpoint) and reaches the one
// journal of keyledger-journal as its namespace's own role (a part of
// TestIntegrationNodeTenancy).
func nodeCredentialsHook(t *testing.T) nodeTenant {
	ne := setupNode(t)
	ne.JoinJournal()
	apiIP, apiPort := ne.APIEndpoint()
	ne.ApplyAll(suite.RenderCredentialsFence(t, ne.NS, apiIP, apiPort))
	plan := suite.CredentialPlan(ne.NS, "mut-node-hook", []suite.PlanSecret{suite.StandardSecret("shop-orders-cache-app"), suite.StandardSecret("shop-bus-users")})
	dir := ne.RenderHook(plan)

	ne.ApplyHook(dir)
	first := ne.GetSecret("shop-orders-cache-app")
	other := ne.GetSecret("shop-bus-users")
	for _, s := range []*corev1.Secret{first, other} {
		suite.RequireAlphabet(t, s.Data["password"], 32, alphanumeric)
		require.Equal(t, "app", string(s.Data["username"]))
	}

	// Second sync after a planned Secret was deleted by hand.
	require.NoError(t, ne.Kube.Client().CoreV1().Secrets(ne.NS).Delete(t.Context(), first.Name, metav1.DeleteOptions{}))
	ne.ApplyHook(dir)
	again := ne.GetSecret("shop-orders-cache-app")
	require.NotEqual(t, first.UID, again.UID, "recreated")
	suite.RequireAlphabet(t, again.Data["password"], 32, alphanumeric)
	require.Equal(t, other.ResourceVersion, ne.GetSecret(other.Name).ResourceVersion, "the other Secret is not written")

	// A third sync with nothing to do writes nothing.
	ne.ApplyHook(dir)
	require.Equal(t, again.ResourceVersion, ne.GetSecret(again.Name).ResourceVersion)
	require.Equal(t, other.ResourceVersion, ne.GetSecret(other.Name).ResourceVersion)
	// Each sync is one run of the plan, journaled as MUTATION:run-N.
	return nodeTenant{ns: ne.NS, roleURL: ne.Journal.OperatorURL, mutations: []string{"mut-node-hook:run-1", "mut-node-hook:run-2", "mut-node-hook:run-3"}}
}

const alphanumeric = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// valkeyAuth authenticates to a Valkey/Redis server as a client would and
// returns the server's answer line (+OK, or -WRONGPASS ...).
func valkeyAuth(t *testing.T, addr string, password []byte) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = fmt.Fprintf(conn, "*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(password), password)
	require.NoError(t, err)
	line, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSpace(line)
}

// natsAuth connects to a NATS server as user with password and returns PONG
// or the server's -ERR line.
func natsAuth(t *testing.T, addr, user string, password []byte) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	info, err := r.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(info, "INFO "), info)
	connect, err := json.Marshal(map[string]any{"verbose": false, "pedantic": false, "user": user, "pass": string(password), "protocol": 1})
	require.NoError(t, err)
	_, err = fmt.Fprintf(conn, "CONNECT %s\r\nPING\r\n", connect)
	require.NoError(t, err)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSpace(line)
}

// Incident #316, reproduced and repaired on a real kubelet: a Valkey server
// (redis-server) and a NATS server, each a StatefulSet reading its password
// from a Secret when its pod starts, start with value A; the Secret is then
// rewritten to B (as the controller in the incident did) and clients using
// the Secret get WRONGPASS. The credentials hook (render + apply-hook, the
// Job in a pod) probes each server with the stored password, deletes the
// refusing pod once, the StatefulSet recreates it with B, the probe accepts
// and a client authenticates. A second sync restarts nothing. (No fence:
// the hook probes the servers, which deploy/credentials does not reach.)
func TestIntegrationNodeIncident316(t *testing.T) {
	ne := setupNode(t)
	ne.JoinJournal()
	// The hook's pods are fenced (deploy/credentials for DNS, the journal
	// and the API server; the hook's own NetworkPolicy for the servers).
	apiIP, apiPort := ne.APIEndpoint()
	ne.ApplyAll(suite.RenderCredentialsFence(t, ne.NS, apiIP, apiPort))
	ne.ServersImage()
	c := ne.Kube.Client()
	passwordA, passwordB := []byte(suite.RandomHex(t, 16)), []byte(suite.RandomHex(t, 16))
	for _, name := range []string{"shop-orders-cache-app", "shop-bus-users"} {
		_, err := c.CoreV1().Secrets(ne.NS).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
			Data: map[string][]byte{"password": passwordA, "username": []byte("app")}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	ne.ServerStatefulSet("shop-orders-cache", "shop-orders-cache-app", 6379,
		"redis-server", "--port", "6379", "--requirepass", "$(PASSWORD)", "--save", "", "--appendonly", "no")
	ne.ServerStatefulSet("shop-bus", "shop-bus-users", 4222,
		"nats-server", "--port", "4222", "--user", "app", "--pass", "$(PASSWORD)")
	cacheIP := ne.WaitPodReady("shop-orders-cache-0", 90*time.Second)
	busIP := ne.WaitPodReady("shop-bus-0", 90*time.Second)
	require.Equal(t, "+OK", valkeyAuth(t, net.JoinHostPort(cacheIP, "6379"), passwordA))
	require.Equal(t, "PONG", natsAuth(t, net.JoinHostPort(busIP, "4222"), "app", passwordA))

	// The incident: the Secrets are rewritten after the servers started.
	for _, name := range []string{"shop-orders-cache-app", "shop-bus-users"} {
		s := ne.GetSecret(name)
		s.Data["password"] = passwordB
		_, err := c.CoreV1().Secrets(ne.NS).Update(t.Context(), s, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	require.True(t, strings.HasPrefix(valkeyAuth(t, net.JoinHostPort(cacheIP, "6379"), passwordB), "-WRONGPASS"))
	require.Contains(t, natsAuth(t, net.JoinHostPort(busIP, "4222"), "app", passwordB), "Authorization Violation")

	plan := suite.CredentialPlan(ne.NS, "mut-node-316", []suite.PlanSecret{
		{Name: "shop-orders-cache-app", Keys: []map[string]any{suite.Generated("password", 32, "hex"), suite.Literal("username", "app")}},
		{Name: "shop-bus-users", Keys: []map[string]any{suite.Generated("password", 32, "hex"), suite.Literal("username", "app")}},
	}, func(spec map[string]any) {
		spec["servers"] = []any{
			map[string]any{"protocol": "valkey", "pod": "shop-orders-cache-0", "port": 6379, "secret": "shop-orders-cache-app", "passwordKey": "password"},
			map[string]any{"protocol": "nats", "pod": "shop-bus-0", "port": 4222, "secret": "shop-bus-users", "userKey": "username", "passwordKey": "password"},
		}
		// The Secrets were written by hand here (the incident's controller
		// in the story): unproven, so the restart onto them is opted in.
		spec["repair"] = map[string]any{"restartOnUnproven": true}
	})
	dir := ne.RenderHook(plan)
	stopCache, stopBus := ne.PodUIDs("shop-orders-cache-0"), ne.PodUIDs("shop-bus-0")
	ne.ApplyHook(dir)
	cacheIP = ne.WaitPodReady("shop-orders-cache-0", 90*time.Second)
	busIP = ne.WaitPodReady("shop-bus-0", 90*time.Second)
	require.Equal(t, "+OK", valkeyAuth(t, net.JoinHostPort(cacheIP, "6379"), passwordB), "a client authenticates with the stored password")
	require.Equal(t, "PONG", natsAuth(t, net.JoinHostPort(busIP, "4222"), "app", passwordB))
	for _, name := range []string{"shop-orders-cache-app", "shop-bus-users"} {
		require.Equal(t, passwordB, ne.GetSecret(name).Data["password"], "the stored password is kept (create-once)")
	}

	// A second sync: every server accepts; nothing is restarted.
	ne.ApplyHook(dir)
	cacheUIDs, busUIDs := stopCache(), stopBus()
	require.Len(t, cacheUIDs, 2, "the Valkey pod was replaced exactly once: %v", cacheUIDs)
	require.Len(t, busUIDs, 2, "the NATS pod was replaced exactly once: %v", busUIDs)
	require.Equal(t, "+OK", valkeyAuth(t, net.JoinHostPort(cacheIP, "6379"), passwordB))
}
