package integration

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

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
func (e *env) plantPod(ctx context.Context, name, ip string, owner *metav1.OwnerReference, labels map[string]string, spec corev1.PodSpec) types.UID {
	e.t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: spec}
	if owner != nil {
		o := *owner
		o.Controller = &[]bool{true}[0]
		pod.OwnerReferences = []metav1.OwnerReference{o}
	}
	_, err := e.kube.Client().CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(e.t, err, "planting pod %s", name)
	p, err := e.kube.PlayKubelet(ctx, e.ns, name, ip)
	require.NoError(e.t, err)
	return p.UID
}

// adoptingStatefulSet creates a one-replica StatefulSet (updateStrategy
// OnDelete) after someone planted a pod under its pod name name-0 with
// its selector's labels and identity: its controller adopts that pod (the
// pod's controller owner reference then carries the StatefulSet's UID,
// written by the controller itself), creates no pod of its own, and
// leaves it alone. It waits for the adoption.
func (e *env) adoptingStatefulSet(ctx context.Context, name string, containers []corev1.Container) *appsv1.StatefulSet {
	e.t.Helper()
	one := int32(1)
	labels := map[string]string{"app": name}
	sts, err := e.kube.Client().AppsV1().StatefulSets(e.ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{Replicas: &one, ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: containers}}},
	}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	require.NoError(e.t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := e.kube.Client().CoreV1().Pods(e.ns).Get(ctx, name+"-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ref := metav1.GetControllerOf(p)
		return ref != nil && ref.UID == sts.UID, nil
	}), "the StatefulSet's controller adopts the planted pod")
	return sts
}

// statefulPodIdentity is what a StatefulSet's controller gives its pod
// set-<ordinal> (labels, hostname, subdomain): a pod planted with it is
// taken for one of its pods.
func statefulPodIdentity(set string, ordinal int, spec corev1.PodSpec) (map[string]string, corev1.PodSpec) {
	name := set + "-" + strconv.Itoa(ordinal)
	spec.Hostname, spec.Subdomain = name, set
	return map[string]string{"app": set, "statefulset.kubernetes.io/pod-name": name, "apps.kubernetes.io/pod-index": strconv.Itoa(ordinal)}, spec
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
	labels, spec := statefulPodIdentity("shop-cache", 0, corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "listener:test"}}})
	b := e.plantPod(ctx, "shop-cache-0", "127.0.0.32", nil, labels, spec)
	sts := e.adoptingStatefulSet(ctx, "shop-cache", []corev1.Container{{Name: "server", Image: "server:test"}})
	a := e.plantPod(ctx, "shop-cache-a", "127.0.0.31",
		&metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "StatefulSet", Name: "shop-cache", UID: "5c0f8a52-0d7e-4b4e-9a57-2f1f5d0e9b01"},
		map[string]string{"app": "shop-cache"}, corev1.PodSpec{Containers: sts.Spec.Template.Spec.Containers})

	plan := credentialPlan(e.ns, "mut-planted-pods", []planSecret{standardSecret("shop-cache-app")}, func(spec map[string]any) {
		spec["servers"] = []any{
			map[string]any{"protocol": "valkey", "pod": "shop-cache-a", "port": otherGroup.port, "secret": "shop-cache-app", "passwordKey": "password",
				"controller": map[string]any{"kind": "StatefulSet", "name": "shop-cache"}},
			map[string]any{"protocol": "valkey", "pod": "shop-cache-0", "port": otherContainer.port, "secret": "shop-cache-app", "passwordKey": "password"},
		}
	})
	r := e.keyledger([]string{"run", e.writeCommand("plan.json", plan)}, e.asCredentialRunner(plan))
	require.Zero(t, otherGroup.accepted.Load(), "the pod owned in another API group got no connection")
	require.Zero(t, otherContainer.accepted.Load(), "the pod with the real UID and another container got no connection")
	out := requireRefused(t, r, credentials.ReasonServerNotOwned)
	require.Equal(t, []any{
		map[string]any{"pod": "shop-cache-a", "check": "owner-group"},
		map[string]any{"pod": "shop-cache-0", "check": "containers"},
	}, out["notOwned"], "the outcome names each pod and the check it failed")
	for name, uid := range map[string]types.UID{"shop-cache-a": a, "shop-cache-0": b} {
		p, err := e.kube.Client().CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, uid, p.UID, "%s is not restarted", name)
	}
	_, records := e.journalOf("mut-planted-pods:run-1")
	require.Empty(t, recordsOf(records, store.RecordAuthorityCall, "delete-pod"))
	probes := recordsOf(records, store.RecordProbe, "probe-server")
	require.Len(t, probes, 2)
	for _, p := range probes {
		require.Equal(t, "unknown/"+credentials.ReasonServerNotOwned, string(p.Status)+"/"+string(p.Reason), p.Target)
	}
	requireNoValues(t, r.Stdout+r.Stderr+e.journalText("mut-planted-pods:run-1"), e.secretValues("shop-cache-app"))
}

// forgeUnfinishedRun is the attack of issue 35 on a credential plan: the
// plan's run n, its preparation as PrepareRun writes it, left in calling
// with one pending call (forgeOperation).
func forgeUnfinishedRun(t *testing.T, url string, prepare store.PrepareParams, n int64, call store.Record) {
	t.Helper()
	forgeOperation(t, url, store.RunPreparation(prepare, n, store.RunLineage{}), store.StateCalling, call)
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
	password := "healthy-" + randomSuffix(t)
	valkey := startServer(t, "valkey", "127.0.0.34", "", password)
	pod := e.statefulSet("shop-healthy")
	uid := e.playServerPod(ctx, pod, valkey, "shop-healthy-app", "", "password", true)
	e.createSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shop-healthy-app"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte(password), "username": []byte("app")}})
	plan := credentialPlan(e.ns, "mut-forged-call", []planSecret{standardSecret("shop-healthy-app")}, func(spec map[string]any) {
		spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": pod, "port": valkey.port, "secret": "shop-healthy-app", "passwordKey": "password"}}
		spec["repair"] = map[string]any{"restartOnUnproven": true} // only the cluster may stop the forged call
	})
	path := e.writeCommand("plan.json", plan)
	as := e.asCredentialRunner(plan)
	r := e.keyledger([]string{"run", path}, as)
	out := requireOK(t, r, "completed") // its labels patched in
	require.Equal(t, map[string]any{"accepted": 1.0, "repaired": 0.0, "skipped": 0.0}, out["servers"])

	cmd, err := credentials.Decode(readCommand(t, path))
	require.NoError(t, err)
	wp, err := credentials.Plan(cmd, &rest.Config{Host: "https://127.0.0.1:1"}) // its client is never used
	require.NoError(t, err)
	forgeUnfinishedRun(t, e.runJournalURL(), wp.Prepare, 2, store.Record{Kind: store.RecordAuthorityCall, Step: "delete-pod",
		Target: store.Target{Kind: store.TargetPod, Namespace: toyNamespace, Name: pod}, Attempt: 1, Batch: 1, UID: string(uid), Digest: "sha256:" + strings.Repeat("0", 64),
		Detail: store.DetailOf(map[string]any{"why": "refused-credentials", "secret": "shop-healthy-app", "authorship": "proven",
			"cause": map[string]any{"secretResourceVersion": "", "controller": "", "revision": "", "spec": ""}})})

	r = e.keyledger([]string{"run", path}, as)
	out = requireRefused(t, r, "call-not-asked")
	require.Equal(t, "pod/"+pod, out["target"])
	require.Equal(t, "delete-pod", out["step"])
	now, err := e.kube.Client().CoreV1().Pods(e.ns).Get(ctx, pod, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, uid, now.UID, "the healthy server is not deleted")
	op, records := e.journalOf("mut-forged-call:run-2")
	require.Equal(t, store.StateRefused, op.State, "the forged run, resumed, ends refused")
	require.Equal(t, "call-not-asked", op.Reason)
	require.Len(t, recordsOf(records, store.RecordAuthorityCall, "delete-pod"), 1, "the forged call, and no other")
	probes := recordsOf(records, store.RecordProbe, "probe-server")
	require.Len(t, probes, 1, "the server is probed now")
	require.Equal(t, store.Status("accepted"), probes[0].Status)
	requireNoValues(t, r.Stdout+r.Stderr+e.journalText("mut-forged-call:run-2"), e.secretValues("shop-healthy-app"))
}
