package integration

import (
	"context"
	"net"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// startServer starts protocol's server at ip on a free port with password.
func startServer(t *testing.T, protocol, ip, user, password string) *suite.Server {
	t.Helper()
	if _, err := exec.LookPath(suite.ServerBinary(protocol)); err != nil {
		t.Skipf("%s is not installed (hack/deps.sh installs it): %v", suite.ServerBinary(protocol), err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	s := &suite.Server{T: t, Protocol: protocol, Ip: ip, Port: port, Dir: t.TempDir(), User: user}
	s.Start(password)
	t.Cleanup(s.Stop)
	return s
}

func TestIntegrationCredentialsRepair(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	valkey := startServer(t, "valkey", "127.0.0.2", "", "wrong-password-from-an-old-run")
	nats := startServer(t, "nats", "127.0.0.3", "bus", "wrong-password-from-an-old-run")
	cachePod, busPod := e.StatefulSet("shop-orders-cache"), e.StatefulSet("shop-bus")
	cacheUID := e.PlayServerPod(ctx, cachePod, valkey, "shop-orders-cache-app", "", "password", true)
	busUID := e.PlayServerPod(ctx, busPod, nats, "shop-bus-users", "user", "password", true)

	bus := suite.PlanSecret{Name: "shop-bus-users", Keys: []map[string]any{suite.Literal("user", "bus"), suite.Generated("password", 32, "base64url")}}
	plan := suite.CredentialPlan(e.NS, "mut-repair", []suite.PlanSecret{suite.StandardSecret("shop-orders-cache-app"), bus}, func(spec map[string]any) {
		spec["servers"] = []any{
			map[string]any{"protocol": "valkey", "pod": cachePod, "port": valkey.Port, "secret": "shop-orders-cache-app", "passwordKey": "password"},
			map[string]any{"protocol": "nats", "pod": busPod, "port": nats.Port, "secret": "shop-bus-users", "userKey": "user", "passwordKey": "password"},
		}
	})
	as := e.AsCredentialRunner(plan)
	r := e.Keyledger([]string{"run", e.WriteCommand("plan.json", plan)}, as)
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, map[string]any{"accepted": 2.0, "repaired": 2.0, "skipped": 0.0}, suite.Outcome(t, r)["servers"])

	_, records := e.JournalOf("mut-repair:run-1")
	for pod, uid := range map[string]types.UID{cachePod: cacheUID, busPod: busUID} {
		var statuses []string
		for _, p := range suite.RecordsOf(records, store.RecordProbe, "probe-server") {
			if p.Target.String() == "pod/"+pod {
				statuses = append(statuses, string(p.Status)+"/"+string(p.Reason))
			}
		}
		want := []string{"refused/wrongpass", "accepted/ok"}
		if pod == busPod {
			want = []string{"refused/authorization-violation", "accepted/pong"}
		}
		require.Equal(t, want, statuses, pod)
		var deletes []store.Record
		for _, c := range suite.RecordsOf(records, store.RecordAuthorityCall, "delete-pod") {
			if c.Target.String() == "pod/"+pod {
				deletes = append(deletes, c)
			}
		}
		require.Len(t, deletes, 1, "%s deleted once", pod)
		require.Equal(t, string(uid), deletes[0].UID, "the delete named the refusing incarnation")
		now, err := e.Kube.Client().CoreV1().Pods(e.NS).Get(ctx, pod, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotEqual(t, uid, now.UID, "%s replaced", pod)
	}
	suite.RequireNoValues(t, r.Stdout+r.Stderr+e.JournalText("mut-repair:run-1"), e.SecretValues("shop-orders-cache-app", "shop-bus-users"))

	// An unknown answer (nothing listens) restarts nothing: exit 75.
	silent := e.StatefulSet("shop-silent")
	silentPod, err := e.Kube.PlayKubelet(ctx, e.NS, silent, "127.0.0.4")
	require.NoError(t, err)
	plan = suite.CredentialPlan(e.NS, "mut-unknown", []suite.PlanSecret{suite.StandardSecret("shop-silent-app")}, func(spec map[string]any) {
		spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": silent, "port": valkey.Port, "secret": "shop-silent-app", "passwordKey": "password"}}
	})
	r = e.Keyledger([]string{"run", e.WriteCommand("unknown.json", plan)}, e.AsCredentialRunner(plan))
	require.Equal(t, 75, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "probe-unknown", suite.Outcome(t, r)["reason"])
	now, err := e.Kube.Client().CoreV1().Pods(e.NS).Get(ctx, silent, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, silentPod.UID, now.UID, "an unknown answer never restarts a pod")
	_, records = e.JournalOf("mut-unknown:run-1")
	probes := suite.RecordsOf(records, store.RecordProbe, "probe-server")
	require.Len(t, probes, 1)
	require.Equal(t, store.Status("unknown"), probes[0].Status)
	require.Equal(t, store.Reason("connection-refused"), probes[0].Reason)
	require.Empty(t, suite.RecordsOf(records, store.RecordAuthorityCall, "delete-pod"))
	// Run again after exit 75: the interrupted run is resumed, not a new one.
	r = e.Keyledger([]string{"run", e.WriteCommand("unknown.json", plan)}, e.AsCredentialRunner(plan))
	require.Equal(t, 75, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	runs := e.RunsOf("mut-unknown")
	require.Len(t, runs, 1, "exit 75 leaves the run open; the next run of the plan resumes it")
	require.Equal(t, "mut-unknown:run-1", runs[0].MutationID)
	_, records = e.JournalOf("mut-unknown:run-1")
	require.Len(t, suite.RecordsOf(records, store.RecordProbe, "probe-server"), 2, "probed again by the resumed run")
	require.Len(t, suite.RecordsOf(records, store.RecordAuthorityCall, "create-secret"), 1, "its Secret not created again")

	// A replacement that still refuses: deleted once, then exit 2.
	stubborn := startServer(t, "valkey", "127.0.0.5", "", "wrong-password-forever")
	stubbornPod := e.StatefulSet("shop-stubborn")
	stubbornUID := e.PlayServerPod(ctx, stubbornPod, stubborn, "", "", "", false)
	plan = suite.CredentialPlan(e.NS, "mut-stubborn", []suite.PlanSecret{suite.StandardSecret("shop-stubborn-app")}, func(spec map[string]any) {
		spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": stubbornPod, "port": stubborn.Port, "secret": "shop-stubborn-app", "passwordKey": "password"}}
	})
	r = e.Keyledger([]string{"run", e.WriteCommand("stubborn.json", plan)}, e.AsCredentialRunner(plan))
	require.Equal(t, 2, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "server-still-refuses", suite.Outcome(t, r)["reason"])
	_, records = e.JournalOf("mut-stubborn:run-1")
	deletes := suite.RecordsOf(records, store.RecordAuthorityCall, "delete-pod")
	require.Len(t, deletes, 1, "deleted once, never twice")
	require.Equal(t, string(stubbornUID), deletes[0].UID)
}
