package integration

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/credentials"
)

// countingListener accepts TCP connections at ip and counts them, holding
// each open without a word: the container of a planted pod, whose only
// job is to learn whether anything was sent its way.
type countingListener struct {
	port     int
	accepted atomic.Int64
}

func listenCounting(t *testing.T, ip string) *countingListener {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	require.NoError(t, err)
	c := &countingListener{port: l.Addr().(*net.TCPAddr).Port}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.accepted.Add(1)
			t.Cleanup(func() { _ = conn.Close() })
		}
	}()
	return c
}

// plantPod creates, as someone holding only `create pods` in the namespace
// would, a pod named name carrying owner (when set) as its controller
// owner reference, with the labels and spec of their choice; playing its
// kubelet, it is Running and Ready at ip.
func plantPod(e *env, ctx context.Context, name, ip string, owner *metav1.OwnerReference, labels map[string]string, spec corev1.PodSpec) types.UID {
	e.T.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: spec}
	if owner != nil {
		o := *owner
		o.Controller = &[]bool{true}[0]
		pod.OwnerReferences = []metav1.OwnerReference{o}
	}
	_, err := e.Kube.Client().CoreV1().Pods(e.NS).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(e.T, err, "planting pod %s", name)
	p, err := e.Kube.PlayKubelet(ctx, e.NS, name, ip)
	require.NoError(e.T, err)
	return p.UID
}

// TestIntegrationCredentialsProbeReachesOnlyItsServer: two pods planted by
// someone who may create pods, each named as a planned server whose
// expected controller is the StatefulSet shop-cache, Running and Ready at
// an address where a listener counts connections: shop-cache-a, whose
// controller owner reference names a StatefulSet shop-cache in a made-up
// API group (the garbage collector never resolves it), with the
// template's containers; and shop-cache-0, the StatefulSet's own pod name,
// planted with its labels and identity while the name was free and then
// adopted by the StatefulSet's controller (so it carries the real
// StatefulSet's UID, as a forger could also write it: any sibling pod
// shows it), but running another container. Neither gets a connection (each listener counts
// zero), nothing is deleted, and the run refuses server-not-owned naming
// both pods and the check each failed. The identity holds exactly the
// rendered Role, get on the StatefulSet included.
func TestIntegrationCredentialsProbeReachesOnlyItsServer(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	otherGroup, otherContainer := listenCounting(t, "127.0.0.31"), listenCounting(t, "127.0.0.32")
	// shop-cache-0 first: planted with the StatefulSet's labels and
	// identity before the StatefulSet exists, it is adopted by its
	// controller, which gives it the real UID.
	labels, spec := suite.StatefulPodIdentity("shop-cache", 0, corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "listener:test"}}})
	b := plantPod(e, ctx, "shop-cache-0", "127.0.0.32", nil, labels, spec)
	sts := e.AdoptingStatefulSet(ctx, "shop-cache", []corev1.Container{{Name: "server", Image: "server:test"}})
	a := plantPod(e, ctx, "shop-cache-a", "127.0.0.31",
		&metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "StatefulSet", Name: "shop-cache", UID: "5c0f8a52-0d7e-4b4e-9a57-2f1f5d0e9b01"},
		map[string]string{"app": "shop-cache"}, corev1.PodSpec{Containers: sts.Spec.Template.Spec.Containers})

	plan := suite.CredentialPlan(e.NS, "mut-planted-pods", []suite.PlanSecret{suite.StandardSecret("shop-cache-app")}, func(spec map[string]any) {
		spec["servers"] = []any{
			map[string]any{"protocol": "valkey", "pod": "shop-cache-a", "port": otherGroup.port, "secret": "shop-cache-app", "passwordKey": "password",
				"controller": map[string]any{"kind": "StatefulSet", "name": "shop-cache"}},
			map[string]any{"protocol": "valkey", "pod": "shop-cache-0", "port": otherContainer.port, "secret": "shop-cache-app", "passwordKey": "password"},
		}
	})
	r := e.Keyledger([]string{"run", e.WriteCommand("plan.json", plan)}, e.AsCredentialRunner(plan))
	require.Zero(t, otherGroup.accepted.Load(), "the pod owned in another API group got no connection")
	require.Zero(t, otherContainer.accepted.Load(), "the pod with the real UID and another container got no connection")
	out := suite.RequireRefused(t, r, credentials.ReasonServerNotOwned)
	require.Equal(t, []any{
		map[string]any{"pod": "shop-cache-a", "check": "owner-group"},
		map[string]any{"pod": "shop-cache-0", "check": "containers"},
	}, out["notOwned"], "the outcome names each pod and the check it failed")
	for name, uid := range map[string]types.UID{"shop-cache-a": a, "shop-cache-0": b} {
		p, err := e.Kube.Client().CoreV1().Pods(e.NS).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, uid, p.UID, "%s is not restarted", name)
	}
	_, records := e.JournalOf("mut-planted-pods:run-1")
	require.Empty(t, suite.RecordsOf(records, store.RecordAuthorityCall, "delete-pod"))
	probes := suite.RecordsOf(records, store.RecordProbe, "probe-server")
	require.Len(t, probes, 2)
	for _, p := range probes {
		require.Equal(t, "unknown/"+credentials.ReasonServerNotOwned, string(p.Status)+"/"+string(p.Reason), p.Target)
	}
	suite.RequireNoValues(t, r.Stdout+r.Stderr+e.JournalText("mut-planted-pods:run-1"), e.SecretValues("shop-cache-app"))
}

// forgeUnfinishedRun is the attack of issue 35 on a credential plan: the
// plan's run n, its preparation as PrepareRun writes it, left in calling
// with one pending call (ForgeOperation).
func forgeUnfinishedRun(t *testing.T, url string, prepare store.PrepareParams, n int64, call store.Record) {
	t.Helper()
	suite.ForgeOperation(t, url, store.RunPreparation(prepare, n, store.RunLineage{}), store.StateCalling, call)
}

// TestIntegrationCredentialsForgedCallNotSent: a record is evidence, never
// an instruction. A healthy server accepts its Secret's password (run 1
// probes it and completes); then, with the namespace's journal role and
// plain SQL, a forged run 2 of the plan is left in calling with a pending
// delete-pod call of that server, naming its live UID. The next sync
// resumes run 2, finds the call not applied, probes the server now (it
// accepts), sends no delete and refuses call-not-asked, exit 2: the pod is
// the same.
func TestIntegrationCredentialsForgedCallNotSent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	password := "healthy-" + suite.RandomSuffix(t)
	valkey := startServer(t, "valkey", "127.0.0.34", "", password)
	pod := e.StatefulSet("shop-healthy")
	uid := e.PlayServerPod(ctx, pod, valkey, "shop-healthy-app", "", "password", true)
	e.CreateSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shop-healthy-app"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte(password), "username": []byte("app")}})
	plan := suite.CredentialPlan(e.NS, "mut-forged-call", []suite.PlanSecret{suite.StandardSecret("shop-healthy-app")}, func(spec map[string]any) {
		spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": pod, "port": valkey.Port, "secret": "shop-healthy-app", "passwordKey": "password"}}
		spec["repair"] = map[string]any{"restartOnUnproven": true} // only the cluster may stop the forged call
	})
	path := e.WriteCommand("plan.json", plan)
	as := e.AsCredentialRunner(plan)
	r := e.Keyledger([]string{"run", path}, as)
	out := suite.RequireOK(t, r, "completed") // its labels patched in
	require.Equal(t, map[string]any{"accepted": 1.0, "repaired": 0.0, "skipped": 0.0}, out["servers"])

	cmd, err := credentials.Decode(suite.ReadCommand(t, path))
	require.NoError(t, err)
	wp, err := credentials.Plan(cmd, &rest.Config{Host: "https://127.0.0.1:1"}) // its client is never used
	require.NoError(t, err)
	forgeUnfinishedRun(t, e.RunJournalURL(), wp.Prepare, 2, store.Record{Kind: store.RecordAuthorityCall, Step: "delete-pod",
		Target: store.Target{Kind: store.TargetPod, Namespace: suite.ToyNamespace, Name: pod}, Attempt: 1, Batch: 1, UID: string(uid), Digest: "sha256:" + strings.Repeat("0", 64),
		Detail: store.DetailOf(map[string]any{"why": "refused-credentials", "secret": "shop-healthy-app", "authorship": "proven",
			"cause": map[string]any{"secretResourceVersion": "", "controller": "", "revision": "", "spec": ""}})})

	r = e.Keyledger([]string{"run", path}, as)
	out = suite.RequireRefused(t, r, "call-not-asked")
	require.Equal(t, "pod/"+pod, out["target"])
	require.Equal(t, "delete-pod", out["step"])
	now, err := e.Kube.Client().CoreV1().Pods(e.NS).Get(ctx, pod, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, uid, now.UID, "the healthy server is not deleted")
	op, records := e.JournalOf("mut-forged-call:run-2")
	require.Equal(t, store.StateRefused, op.State, "the forged run, resumed, ends refused")
	require.Equal(t, "call-not-asked", op.Reason)
	require.Len(t, suite.RecordsOf(records, store.RecordAuthorityCall, "delete-pod"), 1, "the forged call, and no other")
	probes := suite.RecordsOf(records, store.RecordProbe, "probe-server")
	require.Len(t, probes, 1, "the server is probed now")
	require.Equal(t, store.Status("accepted"), probes[0].Status)
	suite.RequireNoValues(t, r.Stdout+r.Stderr+e.JournalText("mut-forged-call:run-2"), e.SecretValues("shop-healthy-app"))
}
