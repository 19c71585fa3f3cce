package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/store"
)

// server is a real Valkey-protocol (redis-server) or NATS server process on
// a loopback address, playing the container of one pod.
//
// These repair tests keep the PlayKubelet stand-in on purpose: they need pod
// states a real node cannot give quickly or at all (a pod whose IP is a
// loopback address with a server that never answers, one that refuses
// forever, one whose replacement appears only when the test says). The
// repair as users get it, a StatefulSet's real pod restarted by the hook Job
// and recreated by the kubelet, is TestIntegrationNodeIncident316.
type server struct {
	t          *testing.T
	protocol   string
	ip         string
	port       int
	dir        string
	cmd        *exec.Cmd
	user       string
	configFile string
}

func serverBinary(protocol string) string {
	if protocol == "valkey" {
		return "redis-server"
	}
	return "nats-server"
}

// startServer starts protocol's server at ip on a free port with password.
func startServer(t *testing.T, protocol, ip, user, password string) *server {
	t.Helper()
	if _, err := exec.LookPath(serverBinary(protocol)); err != nil {
		t.Skipf("%s is not installed (hack/deps.sh installs it): %v", serverBinary(protocol), err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	s := &server{t: t, protocol: protocol, ip: ip, port: port, dir: t.TempDir(), user: user}
	s.start(password)
	t.Cleanup(s.stop)
	return s
}

// start writes the server's configuration (mode 0600, so the password is
// in no process argument) and starts it, waiting until it listens.
func (s *server) start(password string) {
	s.t.Helper()
	s.configFile = filepath.Join(s.dir, "server.conf")
	var conf string
	if s.protocol == "valkey" {
		conf = fmt.Sprintf("bind %s\nport %d\nrequirepass %s\nsave \"\"\nappendonly no\ndir %s\nprotected-mode no\n", s.ip, s.port, password, s.dir)
	} else {
		conf = fmt.Sprintf("listen: %q\nauthorization { user: %q, password: %q }\n", net.JoinHostPort(s.ip, strconv.Itoa(s.port)), s.user, password)
	}
	require.NoError(s.t, os.WriteFile(s.configFile, []byte(conf), 0o600))
	if s.protocol == "valkey" {
		s.cmd = exec.Command(serverBinary(s.protocol), s.configFile)
	} else {
		s.cmd = exec.Command(serverBinary(s.protocol), "-c", s.configFile)
	}
	require.NoError(s.t, s.cmd.Start())
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(s.ip, strconv.Itoa(s.port)), time.Second)
		if err == nil {
			c.Close()
			return
		}
		require.True(s.t, time.Now().Before(deadline), "%s did not start listening", s.protocol)
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *server) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// statefulSet creates a one-replica StatefulSet; its controller creates the
// pod <name>-0 and replaces it when it is deleted.
func (e *env) statefulSet(name string) string {
	e.t.Helper()
	one := int32(1)
	labels := map[string]string{"app": name}
	_, err := e.kube.Client().AppsV1().StatefulSets(e.ns).Create(e.t.Context(), &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{Replicas: &one, ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "server:test"}}}}},
	}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	return name + "-0"
}

// playServerPod plays the kubelet for pod: the first incarnation is ready at
// s's address; when a replacement (new UID) appears, the server restarts
// with what the Secret holds now, as a real container would read it at
// start (restart(nil) keeps the wrong password), and only then is the
// replacement reported ready. It returns the first UID.
func (e *env) playServerPod(ctx context.Context, pod string, s *server, secret, userKey, passwordKey string, restartRight bool) types.UID {
	e.t.Helper()
	first, err := e.kube.PlayKubelet(ctx, e.ns, pod, s.ip)
	require.NoError(e.t, err)
	go func() {
		for ctx.Err() == nil {
			p, err := e.kube.Client().CoreV1().Pods(e.ns).Get(ctx, pod, metav1.GetOptions{})
			if err == nil && p.UID != first.UID && p.DeletionTimestamp == nil {
				if restartRight {
					sec, err := e.kube.Client().CoreV1().Secrets(e.ns).Get(ctx, secret, metav1.GetOptions{})
					if err != nil {
						continue
					}
					if userKey != "" {
						s.user = string(sec.Data[userKey])
					}
					s.stop()
					s.start(string(sec.Data[passwordKey]))
				}
				_, _ = e.kube.PlayKubelet(ctx, e.ns, pod, s.ip)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return first.UID
}

func TestIntegrationCredentialsRepair(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	valkey := startServer(t, "valkey", "127.0.0.2", "", "wrong-password-from-an-old-run")
	nats := startServer(t, "nats", "127.0.0.3", "bus", "wrong-password-from-an-old-run")
	cachePod, busPod := e.statefulSet("shop-orders-cache"), e.statefulSet("shop-bus")
	cacheUID := e.playServerPod(ctx, cachePod, valkey, "shop-orders-cache-app", "", "password", true)
	busUID := e.playServerPod(ctx, busPod, nats, "shop-bus-users", "user", "password", true)

	bus := planSecret{name: "shop-bus-users", keys: []map[string]any{literal("user", "bus"), generated("password", 32, "base64url")}}
	plan := credentialPlan(e.ns, "mut-repair", []planSecret{standardSecret("shop-orders-cache-app"), bus}, func(spec map[string]any) {
		spec["servers"] = []any{
			map[string]any{"protocol": "valkey", "pod": cachePod, "port": valkey.port, "secret": "shop-orders-cache-app", "passwordKey": "password"},
			map[string]any{"protocol": "nats", "pod": busPod, "port": nats.port, "secret": "shop-bus-users", "userKey": "user", "passwordKey": "password"},
		}
	})
	as := e.asCredentialRunner(plan)
	r := e.keyledger([]string{"run", e.writeCommand("plan.json", plan)}, as)
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, map[string]any{"accepted": 2.0, "repaired": 2.0, "skipped": 0.0}, outcome(t, r)["servers"])

	_, records := e.journalOf("mut-repair:run-1")
	for pod, uid := range map[string]types.UID{cachePod: cacheUID, busPod: busUID} {
		var statuses []string
		for _, p := range recordsOf(records, store.RecordProbe, "probe-server") {
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
		for _, c := range recordsOf(records, store.RecordAuthorityCall, "delete-pod") {
			if c.Target.String() == "pod/"+pod {
				deletes = append(deletes, c)
			}
		}
		require.Len(t, deletes, 1, "%s deleted once", pod)
		require.Equal(t, string(uid), deletes[0].UID, "the delete named the refusing incarnation")
		now, err := e.kube.Client().CoreV1().Pods(e.ns).Get(ctx, pod, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotEqual(t, uid, now.UID, "%s replaced", pod)
	}
	requireNoValues(t, r.Stdout+r.Stderr+e.journalText("mut-repair:run-1"), e.secretValues("shop-orders-cache-app", "shop-bus-users"))

	// An unknown answer (nothing listens) restarts nothing: exit 75.
	silent := e.statefulSet("shop-silent")
	silentPod, err := e.kube.PlayKubelet(ctx, e.ns, silent, "127.0.0.4")
	require.NoError(t, err)
	plan = credentialPlan(e.ns, "mut-unknown", []planSecret{standardSecret("shop-silent-app")}, func(spec map[string]any) {
		spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": silent, "port": valkey.port, "secret": "shop-silent-app", "passwordKey": "password"}}
	})
	r = e.keyledger([]string{"run", e.writeCommand("unknown.json", plan)}, e.asCredentialRunner(plan))
	require.Equal(t, 75, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "probe-unknown", outcome(t, r)["reason"])
	now, err := e.kube.Client().CoreV1().Pods(e.ns).Get(ctx, silent, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, silentPod.UID, now.UID, "an unknown answer never restarts a pod")
	_, records = e.journalOf("mut-unknown:run-1")
	probes := recordsOf(records, store.RecordProbe, "probe-server")
	require.Len(t, probes, 1)
	require.Equal(t, store.Status("unknown"), probes[0].Status)
	require.Equal(t, store.Reason("connection-refused"), probes[0].Reason)
	require.Empty(t, recordsOf(records, store.RecordAuthorityCall, "delete-pod"))
	// Run again after exit 75: the interrupted run is resumed, not a new one.
	r = e.keyledger([]string{"run", e.writeCommand("unknown.json", plan)}, e.asCredentialRunner(plan))
	require.Equal(t, 75, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	runs := e.runsOf("mut-unknown")
	require.Len(t, runs, 1, "exit 75 leaves the run open; the next run of the plan resumes it")
	require.Equal(t, "mut-unknown:run-1", runs[0].MutationID)
	_, records = e.journalOf("mut-unknown:run-1")
	require.Len(t, recordsOf(records, store.RecordProbe, "probe-server"), 2, "probed again by the resumed run")
	require.Len(t, recordsOf(records, store.RecordAuthorityCall, "create-secret"), 1, "its Secret not created again")

	// A replacement that still refuses: deleted once, then exit 2.
	stubborn := startServer(t, "valkey", "127.0.0.5", "", "wrong-password-forever")
	stubbornPod := e.statefulSet("shop-stubborn")
	stubbornUID := e.playServerPod(ctx, stubbornPod, stubborn, "", "", "", false)
	plan = credentialPlan(e.ns, "mut-stubborn", []planSecret{standardSecret("shop-stubborn-app")}, func(spec map[string]any) {
		spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": stubbornPod, "port": stubborn.port, "secret": "shop-stubborn-app", "passwordKey": "password"}}
	})
	r = e.keyledger([]string{"run", e.writeCommand("stubborn.json", plan)}, e.asCredentialRunner(plan))
	require.Equal(t, 2, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "server-still-refuses", outcome(t, r)["reason"])
	_, records = e.journalOf("mut-stubborn:run-1")
	deletes := recordsOf(records, store.RecordAuthorityCall, "delete-pod")
	require.Len(t, deletes, 1, "deleted once, never twice")
	require.Equal(t, string(stubbornUID), deletes[0].UID)
}
