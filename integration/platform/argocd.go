package platform

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
)

// EnvArgoCD turns the Argo CD suite off: KEYLEDGER_ARGOCD=off skips the
// tests that sync the rendered credentials hook with a real Argo CD (and
// `make platform` does not build it). Any other value, or none, runs them.
const EnvArgoCD = "KEYLEDGER_ARGOCD"

// ArgoCDNamespace is where Argo CD's configuration and Applications live.
const ArgoCDNamespace = "argocd"

// ArgoCDSkipReason says why the Argo CD suite must not run here, or "" when
// it should. It runs beside the operator suites: KEYLEDGER_OPERATORS=off
// skips it too, as `make platform` then does not build it.
func ArgoCDSkipReason() string {
	switch {
	case os.Getenv(EnvArgoCD) == "off":
		return EnvArgoCD + "=off: the Argo CD suite skipped"
	case os.Getenv(EnvOperators) == "off":
		return EnvOperators + "=off: the Argo CD suite (built with the operators) skipped"
	}
	return ""
}

// ArgoCD is Argo CD (ARGOCD_VERSION, built from the Go module proxy by
// hack/argocd.sh) running out of cluster against a control plane: its
// application controller and repo-server, with a redis-server of the host,
// all on loopback except the controller's metrics port (v3.6.1 binds it on
// every interface and has no flag for the address). The controller uses
// Argo CD's own local mechanism: ARGOCD_FAKE_IN_CLUSTER=true and KUBECONFIG,
// so the in-cluster destination https://kubernetes.default.svc is that
// control plane. No argocd-server runs: a sync is requested by writing the
// Application's operation field, as the server would. Stop ends every
// process it started, by PID.
type ArgoCD struct {
	dir   string
	procs []*argoProc
}

type argoProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  string
}

// InClusterServer is the destination server of an Application deployed to
// the control plane Argo CD runs against.
const InClusterServer = "https://kubernetes.default.svc"

// StartArgoCD builds (first run) Argo CD, installs its CRDs and
// configuration into k and starts redis-server, the repo-server and the
// application controller, each logging into the node's state directory.
// Each process's argv[0] names that directory, so the next StartNode after
// a test process died (reapDeadNode) ends them with the node's.
func StartArgoCD(ctx context.Context, k *Kube, n *Node) (_ *ArgoCD, retErr error) {
	home, err := runHackScript(ctx, "argocd.sh")
	if err != nil {
		return nil, err
	}
	if err := installArgoCD(ctx, k, home); err != nil {
		return nil, fmt.Errorf("installing Argo CD: %w", err)
	}
	a := &ArgoCD{dir: filepath.Join(n.StateDir(), "argocd")}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, a.Stop())
		}
	}()
	ports := make([]int, 4)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	redisPort, repoPort, repoMetrics, ctrlMetrics := ports[0], ports[1], ports[2], ports[3]
	redis := "127.0.0.1:" + strconv.Itoa(redisPort)
	if err := a.start("redis", nil, "redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(redisPort),
		"--save", "", "--appendonly", "no"); err != nil {
		return nil, err
	}
	if err := a.wait(ctx, "redis-server", func() bool { return dialable(redis) }); err != nil {
		return nil, err
	}
	repo := "127.0.0.1:" + strconv.Itoa(repoPort)
	if err := a.startRepoServer(home, redis, repoPort, repoMetrics); err != nil {
		return nil, err
	}
	if err := a.wait(ctx, "the repo-server", func() bool { return dialable(repo) }); err != nil {
		return nil, err
	}
	ctrl := []string{"ARGOCD_BINARY_NAME=argocd-application-controller", "ARGOCD_FAKE_IN_CLUSTER=true", "KUBECONFIG=" + k.KubeconfigFile()}
	if err := a.start("application-controller", ctrl, filepath.Join(home, "argocd"),
		"--namespace", ArgoCDNamespace, "--redis", redis, "--repo-server", repo, "--repo-server-plaintext",
		"--metrics-port", strconv.Itoa(ctrlMetrics), "--status-processors", "2", "--operation-processors", "2",
		"--loglevel", "info"); err != nil {
		return nil, err
	}
	healthz := "127.0.0.1:" + strconv.Itoa(ctrlMetrics)
	if err := a.wait(ctx, "the application controller", func() bool { return dialable(healthz) }); err != nil {
		return nil, err
	}
	return a, nil
}

// startRepoServer runs the repo-server on loopback without TLS, its data
// directories under the work directory and git-verify-wrapper.sh (mode
// 0755, from the module) on its PATH.
func (a *ArgoCD) startRepoServer(home, redis string, port, metrics int) error {
	data := filepath.Join(a.dir, "repo-server")
	env := []string{"ARGOCD_BINARY_NAME=argocd-repo-server", "ARGOCD_GPG_ENABLED=false",
		"PATH=" + filepath.Join(home, "bin") + ":/usr/bin:/bin"}
	for _, d := range []struct{ env, dir string }{
		{"ARGOCD_TLS_DATA_PATH", "tls"}, {"ARGOCD_SSH_DATA_PATH", "ssh"}, {"ARGOCD_GNUPGHOME", "gnupg"},
		{"ARGOCD_GPG_DATA_PATH", "gpg"}, {"TMPDIR", "tmp"},
	} {
		if err := os.MkdirAll(filepath.Join(data, d.dir), 0o700); err != nil {
			return err
		}
		env = append(env, d.env+"="+filepath.Join(data, d.dir))
	}
	// Otherwise one fixed socket path, shared by every repo-server of the
	// machine.
	env = append(env, "ARGOCD_ASK_PASS_SOCK="+filepath.Join(data, "askpass.sock"))
	return a.start("repo-server", env, filepath.Join(home, "argocd"),
		"--address", "127.0.0.1", "--port", strconv.Itoa(port), "--metrics-address", "127.0.0.1",
		"--metrics-port", strconv.Itoa(metrics), "--redis", redis, "--disable-tls", "--client-ca-path", "",
		"--loglevel", "info")
}

// installArgoCD applies the CRDs, the namespace, the four configuration
// objects of the module (argocd-secret with a server.secretkey) and the
// default AppProject, which argocd-server would otherwise create.
func installArgoCD(ctx context.Context, k *Kube, home string) error {
	if _, err := ApplyManifest(ctx, k, filepath.Join(home, "crds.yaml"), nil); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ArgoCDNamespace}}
	if _, err := k.Client().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	key, err := randomHex(32)
	if err != nil {
		return err
	}
	_, err = ApplyManifest(ctx, k, filepath.Join(home, "config.yaml"), func(o *unstructured.Unstructured) bool {
		o.SetNamespace(ArgoCDNamespace)
		if o.GetKind() == "Secret" && o.GetName() == "argocd-secret" {
			_ = unstructured.SetNestedField(o.Object, map[string]any{"server.secretkey": key}, "stringData")
		}
		return true
	})
	if err != nil {
		return err
	}
	project := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
		"metadata": map[string]any{"name": "default", "namespace": ArgoCDNamespace},
		"spec": map[string]any{
			"sourceRepos":              []any{"*"},
			"destinations":             []any{map[string]any{"server": "*", "namespace": "*"}},
			"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
		},
	}}
	return ApplyObjects(ctx, k, []*unstructured.Unstructured{project})
}

// start runs one process with env (PATH and HOME added when missing),
// logging into the work directory, in its own process group.
func (a *ArgoCD) start(name string, env []string, path string, args ...string) error {
	if err := os.MkdirAll(a.dir, 0o700); err != nil {
		return err
	}
	logPath := filepath.Join(a.dir, name+".log")
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(path, args...)
	// argv[0] in the node's state directory (the argocd binary picks its
	// component from ARGOCD_BINARY_NAME, not from argv[0]).
	cmd.Args[0] = filepath.Join(a.dir, name)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + a.dir}, env...)
	cmd.Dir = a.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting Argo CD's %s: %w", name, err)
	}
	p := &argoProc{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	a.procs = append(a.procs, p)
	return nil
}

// wait polls ready (at most two minutes), failing at once when a process
// exited.
func (a *ArgoCD) wait(ctx context.Context, what string, ready func() bool) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		if err := a.Exited(); err != nil {
			return false, err
		}
		return ready(), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// Exited reports a process that ended, with the end of its log, or nil
// while all run.
func (a *ArgoCD) Exited() error {
	for _, p := range a.procs {
		select {
		case <-p.done:
			return fmt.Errorf("argo CD's %s exited: %v:\n%s", p.name, p.err, logTail(p.log, 20))
		default:
		}
	}
	return nil
}

// LogTails is the end of every process's log, for a test failure.
func (a *ArgoCD) LogTails(lines int) string {
	var out string
	for _, p := range a.procs {
		out += fmt.Sprintf("--- %s (%s)\n%s\n", p.name, p.log, logTail(p.log, lines))
	}
	return out
}

// Stop ends the processes in reverse order: SIGTERM, SIGKILL after 10 s.
func (a *ArgoCD) Stop() error {
	if a == nil {
		return nil
	}
	for i := len(a.procs) - 1; i >= 0; i-- {
		p := a.procs[i]
		select {
		case <-p.done:
			continue
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	return nil
}

func dialable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}
