package platform

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Environment variables naming the control-plane binaries. The first two are
// envtest's own; when all three are set hack/controlplane.sh is not run.
const (
	EnvKubeAPIServer         = "TEST_ASSET_KUBE_APISERVER"
	EnvEtcd                  = "TEST_ASSET_ETCD"
	EnvKubeControllerManager = "TEST_ASSET_KUBE_CONTROLLER_MANAGER"
)

// DefaultControllers are the kube-controller-manager controllers StartKube
// runs: the garbage collector (owner references, Orphan deletion), the Job and
// StatefulSet controllers, the ServiceAccount controller (a "default"
// ServiceAccount per namespace) and the namespace controller (so deleted test
// namespaces really go away).
var DefaultControllers = []string{
	"garbage-collector-controller",
	"job-controller",
	"statefulset-controller",
	"serviceaccount-controller",
	"namespace-controller",
}

// serviceAccountIssuer is the issuer (and audience) of every ServiceAccount
// token the API server mints.
const serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// Kube is a running Kubernetes control plane: etcd and kube-apiserver started
// through envtest, and kube-controller-manager as a child process. It has no
// nodes, no scheduler and no kubelet (see PlayKubelet). One Kube is meant to
// be shared by all tests of a package; tests isolate with Namespace.
type Kube struct {
	env        *envtest.Environment
	config     *rest.Config
	client     kubernetes.Interface
	kubeconfig string
	workDir    string
	removeDir  bool

	logs []*os.File // component logs, closed by Stop

	kcm        *exec.Cmd
	kcmDone    chan struct{}
	kcmErr     error
	kcmLog     *os.File
	kcmHealthz string

	// Set for a control plane started WithNode: the cluster CA that signs
	// the API server's serving certificate and the API server's client
	// certificate towards kubelets (see node.go).
	cluster *clusterPKI
}

type kubeOptions struct {
	workDir      string
	controllers  []string
	buildOutput  io.Writer
	startTimeout time.Duration
	node         bool
}

// KubeOption configures StartKube.
type KubeOption func(*kubeOptions)

// WithWorkDir keeps the control plane's files (component logs, kubeconfigs,
// ServiceAccount keys) in dir and leaves them there after Stop, for
// debugging. By default a temporary directory is used and removed by Stop
// (it is kept when StartKube fails).
func WithWorkDir(dir string) KubeOption {
	return func(o *kubeOptions) { o.workDir = dir }
}

// WithControllers replaces DefaultControllers.
func WithControllers(names ...string) KubeOption {
	return func(o *kubeOptions) { o.controllers = names }
}

// WithBuildOutput receives hack/controlplane.sh's progress (it only prints
// when it has to build). The default is os.Stderr.
func WithBuildOutput(w io.Writer) KubeOption {
	return func(o *kubeOptions) { o.buildOutput = w }
}

// WithStartTimeout bounds the start of each component (default 90s).
func WithStartTimeout(d time.Duration) KubeOption {
	return func(o *kubeOptions) { o.startTimeout = d }
}

// WithNode prepares the control plane for a real node (StartNode): the API
// server binds the node address (NodeAddress, on the loopback interface) so
// that pods reach it through the kubernetes Service, serves a certificate for
// that address and the Service's ClusterIP and names, authorizes kubelets
// with the Node authorizer and NodeRestriction, and kube-controller-manager
// runs every controller and publishes the cluster CA to each namespace. It
// changes machine-wide state (an address on lo), so it needs root.
func WithNode() KubeOption {
	return func(o *kubeOptions) { o.node = true; o.controllers = []string{"*"} }
}

// StartKube starts a control plane and returns once the API server serves,
// kube-controller-manager reports healthy and the garbage collector has been
// seen deleting a dependent. The binaries come from the TEST_ASSET_*
// variables when set, else from hack/controlplane.sh (which builds them on
// first use). Call Stop when done.
func StartKube(ctx context.Context, opts ...KubeOption) (_ *Kube, retErr error) {
	o := kubeOptions{controllers: DefaultControllers, buildOutput: os.Stderr, startTimeout: 90 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	k := &Kube{workDir: o.workDir}
	if k.workDir == "" {
		dir, err := os.MkdirTemp("", "keyledger-kube-")
		if err != nil {
			return nil, fmt.Errorf("creating control plane work dir: %w", err)
		}
		k.workDir, k.removeDir = dir, true
	} else if err := os.MkdirAll(k.workDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating control plane work dir: %w", err)
	}
	defer func() {
		if retErr != nil {
			k.removeDir = false // keep the component logs for the post-mortem
			if err := k.Stop(); err != nil {
				retErr = errors.Join(retErr, err)
			}
			retErr = fmt.Errorf("%w (component logs in %s)", retErr, k.workDir)
		}
	}()

	steps := []struct {
		name string
		run  func(context.Context, kubeOptions) error
	}{
		{"locate binaries", k.locateBinaries},      // TEST_ASSET_* or hack/controlplane.sh
		{"start API server", k.startAPIServer},     // etcd + kube-apiserver via envtest
		{"write admin kubeconfig", k.writeAdmin},   // for kubectl and CLI subprocesses
		{"start controller manager", k.startKCM},   // child process with its own identity
		{"wait for controller manager", k.waitKCM}, // /healthz on its secure port
		{"probe garbage collector", k.probeGC},     // a dependent really gets collected
	}
	for _, s := range steps {
		if err := s.run(ctx, o); err != nil {
			return nil, fmt.Errorf("starting Kubernetes control plane: %s: %w", s.name, err)
		}
	}
	return k, nil
}

// Config returns a copy of the admin (system:masters) client configuration.
func (k *Kube) Config() *rest.Config { return rest.CopyConfig(k.config) }

// Client returns an admin clientset.
func (k *Kube) Client() kubernetes.Interface { return k.client }

// Host is the API server's URL (https://127.0.0.1:PORT/).
func (k *Kube) Host() string { return k.config.Host }

// KubeconfigFile is an admin kubeconfig on disk, for kubectl and for running
// the CLI as a subprocess.
func (k *Kube) KubeconfigFile() string { return k.kubeconfig }

// WorkDir holds the component logs (etcd.log, kube-apiserver.log,
// kube-controller-manager.log) and generated kubeconfigs.
func (k *Kube) WorkDir() string { return k.workDir }

// auditPolicy logs every request on Secrets at the Metadata level (verb,
// namespace, name, user, response code; no body) once its response is
// complete, and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted", "Panic"]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: ["secrets"]
- level: None
`

// AuditLog is the API server's audit log (JSON lines, Secrets only).
func (k *Kube) AuditLog() string { return filepath.Join(k.workDir, "audit.log") }

// KeepWorkDir leaves the work directory in place at Stop (for a post-mortem
// after a failed test).
func (k *Kube) KeepWorkDir() { k.removeDir = false }

// Stop stops kube-controller-manager, then the API server and etcd, and
// removes the work directory unless WithWorkDir chose it. It is safe to call
// on a partly started Kube.
func (k *Kube) Stop() error {
	var errs []error
	if k.kcm != nil && k.kcm.Process != nil {
		if err := k.stopKCM(); err != nil {
			errs = append(errs, fmt.Errorf("stopping kube-controller-manager: %w", err))
		}
		k.kcm = nil
	}
	if k.env != nil {
		if err := k.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping API server and etcd: %w", err))
		}
		k.env = nil
		if k.cluster != nil && !nodeOwnedByOther() {
			removeNodeAddress()
		}
	}
	for _, f := range k.logs {
		_ = f.Close()
	}
	k.logs = nil
	if k.removeDir {
		if err := os.RemoveAll(k.workDir); err != nil {
			errs = append(errs, fmt.Errorf("removing work dir: %w", err))
		}
		k.removeDir = false
	}
	return errors.Join(errs...)
}

// Namespace creates a namespace with a fresh name derived from the test's
// name and deletes it when the test ends (the namespace controller then
// removes its contents).
func (k *Kube) Namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: namespacePrefix(t.Name()),
		Labels:       map[string]string{"keyledger.test/test": "true"},
	}}
	created, err := k.client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating test namespace: %v", err)
	}
	if k.cluster != nil {
		// ServiceAccount admission (on with a node) refuses pods until the
		// serviceaccount controller made the namespace's default account.
		err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := k.client.CoreV1().ServiceAccounts(created.Name).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("waiting for the default ServiceAccount of %s: %v", created.Name, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := k.client.CoreV1().Namespaces().Delete(ctx, created.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting test namespace %s: %v", created.Name, err)
		}
	})
	return created.Name
}

var notDNSLabel = regexp.MustCompile(`[^a-z0-9]+`)

// namespacePrefix turns a test name into a GenerateName prefix: a DNS label
// of at most 57 characters, leaving room for the 5 random characters.
func namespacePrefix(testName string) string {
	s := notDNSLabel.ReplaceAllString(strings.ToLower(testName), "-")
	s = strings.TrimPrefix(s, "testintegration")
	s = strings.Trim(s, "-")
	if len(s) > 50 {
		s = strings.TrimRight(s[:50], "-")
	}
	if s == "" {
		s = "test"
	}
	return "kl-" + s + "-"
}

func (k *Kube) locateBinaries(ctx context.Context, o kubeOptions) error {
	apiserver, etcd, kcm := os.Getenv(EnvKubeAPIServer), os.Getenv(EnvEtcd), os.Getenv(EnvKubeControllerManager)
	if apiserver == "" || etcd == "" || kcm == "" {
		dir, err := runControlPlaneScript(ctx, o.buildOutput)
		if err != nil {
			return err
		}
		apiserver = cmp.Or(apiserver, filepath.Join(dir, "kube-apiserver"))
		etcd = cmp.Or(etcd, filepath.Join(dir, "etcd"))
		kcm = cmp.Or(kcm, filepath.Join(dir, "kube-controller-manager"))
	}
	for key, path := range map[string]string{EnvKubeAPIServer: apiserver, EnvEtcd: etcd, EnvKubeControllerManager: kcm} {
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		// envtest and anything else in this process find them the same way.
		if err := os.Setenv(key, path); err != nil {
			return err
		}
	}
	// A test process killed before it stopped its control plane (a panic,
	// a test timeout) leaves these binaries running, orphaned.
	reapOrphanedControlPlanes(apiserver, etcd, kcm)
	k.env = &envtest.Environment{}
	k.env.ControlPlane.APIServer = &envtest.APIServer{Path: apiserver}
	k.env.ControlPlane.Etcd = &envtest.Etcd{Path: etcd}
	k.kcm = exec.Command(kcm) // arguments are added by startKCM
	return nil
}

func runControlPlaneScript(ctx context.Context, progress io.Writer) (string, error) {
	script := filepath.Join(RepoRoot(), "hack", "controlplane.sh")
	cmd := exec.CommandContext(ctx, "bash", script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, progress
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("running %s: %w", script, err)
	}
	dir := strings.TrimSpace(out.String())
	if i := strings.LastIndexByte(dir, '\n'); i >= 0 {
		dir = dir[i+1:]
	}
	if dir == "" {
		return "", fmt.Errorf("%s printed no directory", script)
	}
	return dir, nil
}

func (k *Kube) startAPIServer(_ context.Context, o kubeOptions) error {
	pub, priv, err := writeServiceAccountKeys(k.workDir)
	if err != nil {
		return err
	}
	apiPort, err := freePort()
	if err != nil {
		return err
	}
	etcdPort, err := freePort()
	if err != nil {
		return err
	}
	etcdLog, err := k.createLog("etcd")
	if err != nil {
		return err
	}
	apiLog, err := k.createLog("kube-apiserver")
	if err != nil {
		return err
	}

	bindAddress := "127.0.0.1"
	if o.node {
		if err := ensureNodeAddress(); err != nil {
			return err
		}
		bindAddress = NodeAddress
	}
	cp := &k.env.ControlPlane
	cp.Etcd.URL = &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(etcdPort))}
	cp.Etcd.Out, cp.Etcd.Err = etcdLog, etcdLog

	api := cp.APIServer
	api.SecureServing.Address, api.SecureServing.Port = bindAddress, strconv.Itoa(apiPort)
	api.Out, api.Err = apiLog, apiLog
	args := api.Configure()
	// RBAC only: no AlwaysAllow fallback, so non-admin users are really
	// checked (envtest admins are system:masters and bypass it).
	args.Set("authorization-mode", "RBAC")
	args.Disable("authorization-config")
	// ServiceAccount tokens (TokenRequest) signed by our own RSA key pair.
	args.Set("service-account-issuer", serviceAccountIssuer)
	args.Set("api-audiences", serviceAccountIssuer)
	args.Set("service-account-key-file", pub)
	args.Set("service-account-signing-key-file", priv)
	args.Set("advertise-address", bindAddress)
	// An audit log of every request on Secrets (metadata only: never a
	// body), so tests count the requests keyledger sent from the API
	// server's own record (AuditEvents).
	policy := filepath.Join(k.workDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return err
	}
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", k.AuditLog())
	args.Set("audit-log-format", "json")
	args.Set("audit-log-mode", "blocking")
	// MutatingAdmissionPolicy (beta in 1.34, off by default): the versioned
	// tests alter a create's answer with one, as a cluster's admission may.
	args.Set("feature-gates", "MutatingAdmissionPolicy=true")
	args.Set("runtime-config", "admissionregistration.k8s.io/v1beta1=true")
	if o.node {
		if err := k.configureForNode(api, args); err != nil {
			return err
		}
	}

	k.env.ControlPlaneStartTimeout = o.startTimeout
	k.env.ControlPlaneStopTimeout = 30 * time.Second
	cfg, err := k.env.Start()
	if err != nil {
		return err
	}
	k.config = cfg
	k.client, err = kubernetes.NewForConfig(cfg)
	return err
}

func (k *Kube) createLog(component string) (*os.File, error) {
	f, err := os.Create(filepath.Join(k.workDir, component+".log"))
	if err != nil {
		return nil, fmt.Errorf("creating %s log: %w", component, err)
	}
	k.logs = append(k.logs, f)
	return f, nil
}

func (k *Kube) writeAdmin(_ context.Context, _ kubeOptions) error {
	path, err := k.KubeconfigForConfig(k.config, k.workDir)
	if err != nil {
		return err
	}
	k.kubeconfig = path
	return nil
}

func (k *Kube) startKCM(_ context.Context, o kubeOptions) error {
	// The controller manager gets its own client certificate. It is in
	// system:masters because with --use-service-account-credentials=false
	// every controller (the garbage collector lists and patches anything)
	// runs as this one identity.
	user, err := k.env.AddUser(envtest.User{Name: "system:kube-controller-manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("adding controller manager user: %w", err)
	}
	kubeconfig, err := k.KubeconfigForConfig(user.Config(), k.workDir)
	if err != nil {
		return err
	}
	certDir := filepath.Join(k.workDir, "kube-controller-manager")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	k.kcmLog, err = k.createLog("kube-controller-manager")
	if err != nil {
		return err
	}
	k.kcm.Args = append(k.kcm.Args,
		"--kubeconfig="+kubeconfig,
		"--controllers="+strings.Join(o.controllers, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+certDir,
		// No delegated authn/authz lookups: /healthz is always allowed.
		"--authentication-skip-lookup=true",
		"--kube-api-qps=100",
		"--kube-api-burst=200",
		"--v=2",
	)
	if k.cluster != nil {
		k.kcm.Args = append(k.kcm.Args,
			"--root-ca-file="+k.cluster.caFile,
			"--service-account-private-key-file="+filepath.Join(k.workDir, "sa.key"),
			"--service-cluster-ip-range="+ServiceCIDR,
		)
	}
	k.kcm.Stdout, k.kcm.Stderr = k.kcmLog, k.kcmLog
	if err := k.kcm.Start(); err != nil {
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	k.kcmDone = make(chan struct{})
	go func() {
		k.kcmErr = k.kcm.Wait()
		close(k.kcmDone)
	}()
	k.kcmHealthz = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/healthz"
	return nil
}

func (k *Kube) waitKCM(ctx context.Context, o kubeOptions) error {
	httpClient := &http.Client{
		Timeout: 2 * time.Second,
		// The serving certificate is self-signed; the check is only liveness.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, // loopback health probe (gosec is off for the test platform: .golangci.yml)
	}
	defer httpClient.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, o.startTimeout)
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-k.kcmDone:
			return false, fmt.Errorf("kube-controller-manager exited: %w", k.kcmErr)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.kcmHealthz, nil)
		if err != nil {
			return false, err
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		last = fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(body))
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		if last != "" {
			return fmt.Errorf("%w (last /healthz answer: %s)", err, last)
		}
		return err
	}
	return nil
}

// probeGC creates an owner and a dependent in kube-system, deletes the owner
// and waits for the garbage collector to delete the dependent: proof that its
// informers have synced and it acts.
func (k *Kube) probeGC(ctx context.Context, o kubeOptions) error {
	if !slices.ContainsFunc(o.controllers, func(c string) bool {
		return c == "*" || c == "garbage-collector-controller" || c == "garbagecollector"
	}) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.startTimeout)
	defer cancel()
	cms := k.client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "keyledger-gc-probe-"}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	dependent, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		GenerateName:    owner.Name + "-",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cms.Get(ctx, dependent.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("garbage collector did not delete a dependent: %w", err)
	}
	return nil
}

func (k *Kube) stopKCM() error {
	if k.kcmDone == nil { // never started
		return nil
	}
	_ = k.kcm.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.kcmDone:
	case <-time.After(15 * time.Second):
		_ = k.kcm.Process.Kill()
		<-k.kcmDone
		return errors.New("did not exit within 15s of SIGTERM; killed")
	}
	return nil
}

// writeServiceAccountKeys generates the RSA key pair the API server signs
// and verifies ServiceAccount tokens with.
func writeServiceAccountKeys(dir string) (pubPath, privPath string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", fmt.Errorf("generating service account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	privPath = filepath.Join(dir, "sa.key")
	pubPath = filepath.Join(dir, "sa.pub")
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(privPath, priv, 0o600); err != nil {
		return "", "", err
	}
	pub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	if err := os.WriteFile(pubPath, pub, 0o600); err != nil {
		return "", "", err
	}
	return pubPath, privPath, nil
}
