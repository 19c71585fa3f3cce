package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/keyledger/keyledger/integration/platform"
)

// renderHook runs `keyledger render credentials` for plan into a fresh
// directory, with the node test image and the flags given, and returns the
// directory.
func (ne *nodeEnv) renderHook(plan map[string]any, flags ...string) string {
	ne.t.Helper()
	planPath := ne.writeCommand("plan.json", plan)
	dir := filepath.Join(ne.t.TempDir(), "hook")
	r := ne.keyledger(append([]string{"render", "credentials", "--plan", planPath, "--image", nodeShared.image, "--out-dir", dir}, flags...))
	require.Equal(ne.t, 0, r.Code, "render: %s %s", r.Stdout, r.Stderr)
	return dir
}

// applyHook runs `keyledger apply-hook DIR` (what Argo CD does at a sync)
// and requires the Job to succeed in its pod.
func (ne *nodeEnv) applyHook(dir string) {
	ne.t.Helper()
	r := ne.keyledger([]string{"apply-hook", dir, "--timeout", "3m"})
	if r.Code != 0 || !strings.Contains(r.Stdout, `"outcome":"succeeded"`) {
		ne.t.Fatalf("apply-hook: exit %d\nstdout %s\nstderr %s\njob pods:\n%s", r.Code, r.Stdout, r.Stderr, ne.hookPodLogs())
	}
}

// hookPodLogs gathers the logs of the credentials Job's pods (for failures).
func (ne *nodeEnv) hookPodLogs() string {
	pods, err := ne.kube.Client().CoreV1().Pods(ne.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "keyledger.dev/owner"})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for i := range pods.Items {
		p := &pods.Items[i]
		raw, err := ne.kube.Client().CoreV1().Pods(ne.ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: "keyledger"}).Do(context.Background()).Raw()
		fmt.Fprintf(&b, "--- %s (%s): %s%v\n", p.Name, p.Status.Phase, raw, err)
	}
	return b.String()
}

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
	ne.joinJournal()
	apiIP, apiPort := ne.apiEndpoint()
	ne.applyAll(renderCredentialsFence(t, ne.ns, apiIP, apiPort))
	plan := credentialPlan(ne.ns, "mut-node-hook", []planSecret{standardSecret("shop-orders-cache-app"), standardSecret("shop-bus-users")})
	dir := ne.renderHook(plan)

	ne.applyHook(dir)
	first := ne.getSecret("shop-orders-cache-app")
	other := ne.getSecret("shop-bus-users")
	for _, s := range []*corev1.Secret{first, other} {
		requireAlphabet(t, s.Data["password"], 32, alphanumeric)
		require.Equal(t, "app", string(s.Data["username"]))
	}

	// Second sync after a planned Secret was deleted by hand.
	require.NoError(t, ne.kube.Client().CoreV1().Secrets(ne.ns).Delete(t.Context(), first.Name, metav1.DeleteOptions{}))
	ne.applyHook(dir)
	again := ne.getSecret("shop-orders-cache-app")
	require.NotEqual(t, first.UID, again.UID, "recreated")
	requireAlphabet(t, again.Data["password"], 32, alphanumeric)
	require.Equal(t, other.ResourceVersion, ne.getSecret(other.Name).ResourceVersion, "the other Secret is not written")

	// A third sync with nothing to do writes nothing.
	ne.applyHook(dir)
	require.Equal(t, again.ResourceVersion, ne.getSecret(again.Name).ResourceVersion)
	require.Equal(t, other.ResourceVersion, ne.getSecret(other.Name).ResourceVersion)
	// Each sync is one run of the plan, journaled as MUTATION:run-N.
	return nodeTenant{ns: ne.ns, roleURL: ne.journal.OperatorURL, mutations: []string{"mut-node-hook:run-1", "mut-node-hook:run-2", "mut-node-hook:run-3"}}
}

const alphanumeric = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// serverImage is the Debian redis-server and nats-server image, imported
// into the node once.
var serverImage struct {
	once sync.Once
	tag  string
	err  error
}

func (ne *nodeEnv) serversImage() string {
	ne.t.Helper()
	serverImage.once.Do(func() {
		out, err := exec.Command("bash", filepath.Join(platform.RepoRoot(), "hack", "servers-image.sh")).Output()
		if err != nil {
			serverImage.err = fmt.Errorf("building the servers image: %w", err)
			return
		}
		serverImage.tag = strings.TrimSpace(string(out))
		serverImage.err = ne.node.ImportImages(context.Background(), serverImage.tag)
	})
	require.NoError(ne.t, serverImage.err)
	return serverImage.tag
}

// serverStatefulSet runs one server pod (NAME-0) whose password comes from
// secret's key password when the pod is created, as a chart would wire it.
func (ne *nodeEnv) serverStatefulSet(name, secret string, port int32, command ...string) {
	ne.t.Helper()
	labels := map[string]string{"app": name}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr(int32(1)), ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(1)),
			Containers: []corev1.Container{{Name: "server", Image: ne.serversImage(), ImagePullPolicy: corev1.PullNever,
				Command: command,
				Env: []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "password"}}}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}}, PeriodSeconds: 1},
			}},
		}},
	}}
	_, err := ne.kube.Client().AppsV1().StatefulSets(ne.ns).Create(ne.t.Context(), sts, metav1.CreateOptions{})
	require.NoError(ne.t, err)
}

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

// podUIDs records every UID the pod name had, from the API server's watch
// history, until stop is called.
func (ne *nodeEnv) podUIDs(name string) (stop func() []string) {
	ne.t.Helper()
	ctx, cancel := context.WithCancel(ne.t.Context())
	w, err := ne.kube.Client().CoreV1().Pods(ne.ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	require.NoError(ne.t, err)
	var mu sync.Mutex
	var uids []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Bookmark {
				continue
			}
			mu.Lock()
			if len(uids) == 0 || uids[len(uids)-1] != string(p.UID) {
				uids = append(uids, string(p.UID))
			}
			mu.Unlock()
		}
	}()
	return func() []string {
		cancel()
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return uids
	}
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
	ne.joinJournal()
	// The hook's pods are fenced (deploy/credentials for DNS, the journal
	// and the API server; the hook's own NetworkPolicy for the servers).
	apiIP, apiPort := ne.apiEndpoint()
	ne.applyAll(renderCredentialsFence(t, ne.ns, apiIP, apiPort))
	ne.serversImage()
	c := ne.kube.Client()
	passwordA, passwordB := []byte(randomHexT(t)), []byte(randomHexT(t))
	for _, name := range []string{"shop-orders-cache-app", "shop-bus-users"} {
		_, err := c.CoreV1().Secrets(ne.ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
			Data: map[string][]byte{"password": passwordA, "username": []byte("app")}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	ne.serverStatefulSet("shop-orders-cache", "shop-orders-cache-app", 6379,
		"redis-server", "--port", "6379", "--requirepass", "$(PASSWORD)", "--save", "", "--appendonly", "no")
	ne.serverStatefulSet("shop-bus", "shop-bus-users", 4222,
		"nats-server", "--port", "4222", "--user", "app", "--pass", "$(PASSWORD)")
	cacheIP := ne.waitPodReady("shop-orders-cache-0", 90*time.Second)
	busIP := ne.waitPodReady("shop-bus-0", 90*time.Second)
	require.Equal(t, "+OK", valkeyAuth(t, net.JoinHostPort(cacheIP, "6379"), passwordA))
	require.Equal(t, "PONG", natsAuth(t, net.JoinHostPort(busIP, "4222"), "app", passwordA))

	// The incident: the Secrets are rewritten after the servers started.
	for _, name := range []string{"shop-orders-cache-app", "shop-bus-users"} {
		s := ne.getSecret(name)
		s.Data["password"] = passwordB
		_, err := c.CoreV1().Secrets(ne.ns).Update(t.Context(), s, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	require.True(t, strings.HasPrefix(valkeyAuth(t, net.JoinHostPort(cacheIP, "6379"), passwordB), "-WRONGPASS"))
	require.Contains(t, natsAuth(t, net.JoinHostPort(busIP, "4222"), "app", passwordB), "Authorization Violation")

	plan := credentialPlan(ne.ns, "mut-node-316", []planSecret{
		{name: "shop-orders-cache-app", keys: []map[string]any{generated("password", 32, "hex"), literal("username", "app")}},
		{name: "shop-bus-users", keys: []map[string]any{generated("password", 32, "hex"), literal("username", "app")}},
	}, func(spec map[string]any) {
		spec["servers"] = []any{
			map[string]any{"protocol": "valkey", "pod": "shop-orders-cache-0", "port": 6379, "secret": "shop-orders-cache-app", "passwordKey": "password"},
			map[string]any{"protocol": "nats", "pod": "shop-bus-0", "port": 4222, "secret": "shop-bus-users", "userKey": "username", "passwordKey": "password"},
		}
		// The Secrets were written by hand here (the incident's controller
		// in the story): unproven, so the restart onto them is opted in.
		spec["repair"] = map[string]any{"restartOnUnproven": true}
	})
	dir := ne.renderHook(plan)
	stopCache, stopBus := ne.podUIDs("shop-orders-cache-0"), ne.podUIDs("shop-bus-0")
	ne.applyHook(dir)
	cacheIP = ne.waitPodReady("shop-orders-cache-0", 90*time.Second)
	busIP = ne.waitPodReady("shop-bus-0", 90*time.Second)
	require.Equal(t, "+OK", valkeyAuth(t, net.JoinHostPort(cacheIP, "6379"), passwordB), "a client authenticates with the stored password")
	require.Equal(t, "PONG", natsAuth(t, net.JoinHostPort(busIP, "4222"), "app", passwordB))
	for _, name := range []string{"shop-orders-cache-app", "shop-bus-users"} {
		require.Equal(t, passwordB, ne.getSecret(name).Data["password"], "the stored password is kept (create-once)")
	}

	// A second sync: every server accepts; nothing is restarted.
	ne.applyHook(dir)
	cacheUIDs, busUIDs := stopCache(), stopBus()
	require.Len(t, cacheUIDs, 2, "the Valkey pod was replaced exactly once: %v", cacheUIDs)
	require.Len(t, busUIDs, 2, "the NATS pod was replaced exactly once: %v", busUIDs)
	require.Equal(t, "+OK", valkeyAuth(t, net.JoinHostPort(cacheIP, "6379"), passwordB))
}
