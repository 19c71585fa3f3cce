package platform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The test node's addresses. They are private ranges that exist only inside
// this machine: the node address is on the loopback interface, the pod range
// on the cni0 bridge, the Service range only in kube-proxy's rules. A guard
// rule rejects anything a pod sends that is not for a pod or the node.
const (
	NodeName     = "keyledger-node"
	NodeAddress  = "10.200.0.1"
	ServiceCIDR  = "10.96.0.0/24"
	APIServiceIP = "10.96.0.1"
	DNSServiceIP = "10.96.0.10"
	PodCIDR      = "10.244.0.0/24"
)

// EnvNode turns the node tests off: KEYLEDGER_NODE=off skips them visibly,
// for machines that cannot run a node (not root, no cgroups). Any other
// value, or none, runs them; a machine that cannot is then a failure.
const EnvNode = "KEYLEDGER_NODE"

// Image references the node's containerd holds (imported, never pulled).
const (
	PauseImage    = "keyledger.local/pause:1"
	NodeToolImage = "keyledger.local/nodetool:1"
)

// nodeStateRoot holds the owner record of the one node this machine runs
// (a variable so tests of the record's rules use a directory of their own).
var nodeStateRoot = "/run/keyledger-node"

// Node is a real Kubernetes node on this machine, attached to a Kube
// started WithNode: containerd (its own instance), the kubelet, kube-proxy
// (iptables), kube-scheduler, kube-router (NetworkPolicy enforcement only)
// and a cluster DNS pod. Only one node runs per machine at a time: it
// changes machine-wide network and cgroup state. Stop tears everything
// down by PID; a node left by a dead test process is torn down by the next
// StartNode.
type Node struct {
	kube  *Kube
	state string // per-run directory under the control plane's work dir
	run   string // per-run directory under /run (short socket paths)
	bins  string
	procs []*component
	owner ownerRecord
	// guardDone stops the node address guard (guardAddress).
	guardDone chan struct{}
	guardWait chan struct{}
}

type component struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  *os.File
}

// NodeSkipReason says why node tests must not run here, or "" when they
// should. Only KEYLEDGER_NODE=off skips; a machine that cannot run a node
// fails in StartNode with the reason.
func NodeSkipReason() string {
	if os.Getenv(EnvNode) == "off" {
		return EnvNode + "=off: real-node tests skipped"
	}
	return ""
}

// StartNode brings up a node for k (which must have been started WithNode)
// and returns when the node is Ready, pods can be scheduled and started,
// NetworkPolicies are enforced and cluster DNS answers.
func StartNode(ctx context.Context, k *Kube) (_ *Node, retErr error) {
	if k.cluster == nil {
		return nil, errors.New("starting node: the control plane was not started WithNode")
	}
	if err := nodePrerequisites(); err != nil {
		return nil, fmt.Errorf("starting node: %w", err)
	}
	if err := reapDeadNode(); err != nil {
		return nil, fmt.Errorf("starting node: cleaning up after an earlier test process: %w", err)
	}
	n := &Node{kube: k, state: filepath.Join(k.workDir, "node"), run: filepath.Join(nodeStateRoot, strconv.Itoa(os.Getpid()))}
	defer func() {
		if retErr != nil {
			if err := n.Stop(); err != nil {
				retErr = errors.Join(retErr, err)
			}
			k.removeDir = false // keep the component logs for the post-mortem
			retErr = fmt.Errorf("%w (component logs in %s)", retErr, n.state)
		}
	}()
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"claim the machine", n.claim},             // owner record: one node per machine
		{"build binaries", n.locateBinaries},       // hack/node.sh, cached per version
		{"prepare the network", n.prepareNetwork},  // sysctls, guard rule
		{"start containerd", n.startContainerd},    // its own root, state and socket
		{"import images", n.importImages},          // docker save | ctr import
		{"start kubelet", n.startKubelet},          // registers the node
		{"wait for node Ready", n.waitReady},       // kubelet reports Ready
		{"start kube-proxy", n.startKubeProxy},     // Service ClusterIPs
		{"start kube-scheduler", n.startScheduler}, // Jobs' pods get a node
		{"start kube-router", n.startKubeRouter},   // NetworkPolicy enforcement
		{"start cluster DNS", n.startDNS},          // Service names resolve in pods
		{"wait for cluster DNS", n.waitDNS},        // answers through its ClusterIP
	}
	for i, s := range steps {
		if err := s.run(ctx); err != nil {
			return nil, fmt.Errorf("starting node: %s: %w", s.name, err)
		}
		if i == 0 { // claimed: from now on the address is this node's
			n.guardDone, n.guardWait = make(chan struct{}), make(chan struct{})
			go n.guardAddress()
		}
	}
	return n, nil
}

// guardAddress puts the node address back on lo whenever it disappears
// while this node runs: a test process built before nodeOwnedByOther
// existed removes it when its own node start is refused and its control
// plane stops, which cuts this node's API server off from everything.
func (n *Node) guardAddress() {
	defer close(n.guardWait)
	for {
		select {
		case <-n.guardDone:
			return
		case <-time.After(500 * time.Millisecond):
		}
		out, err := exec.Command("ip", "-4", "addr", "show", "dev", "lo").Output()
		if err != nil || bytes.Contains(out, []byte(" "+NodeAddress+"/32")) {
			continue
		}
		if err := ensureNodeAddress(); err == nil {
			fmt.Fprintf(os.Stderr, "node: the node address %s was removed from lo by another process; put back\n", NodeAddress)
		}
	}
}

// nodePrerequisites names what this machine lacks to run a node.
func nodePrerequisites() error {
	var missing []string
	if os.Geteuid() != 0 {
		return errors.New("a node needs root (it runs containerd and the kubelet, and changes network and cgroup state); set " + EnvNode + "=off to skip the node tests")
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err != nil {
		if _, err2 := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err2 != nil {
			return errors.New("no cgroup hierarchy under /sys/fs/cgroup; set " + EnvNode + "=off to skip the node tests")
		}
	}
	for _, c := range []string{"containerd", "runc", "ctr", "iptables", "ip", "ipset", "conntrack", "docker"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	for _, p := range []string{"bridge", "host-local", "portmap", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			missing = append(missing, cniBinDir+"/"+p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s (Debian: apt-get install docker.io containernetworking-plugins conntrack ipset iptables iproute2; hack/deps.sh installs them)", strings.Join(missing, ", "))
	}
	return nil
}

const cniBinDir = "/usr/lib/cni"

// ensureNodeAddress puts NodeAddress on the loopback interface (the kernel
// here has no dummy interfaces).
func ensureNodeAddress() error {
	out, err := exec.Command("ip", "-4", "addr", "show", "dev", "lo").CombinedOutput()
	if err != nil {
		return fmt.Errorf("reading lo addresses: %v: %s", err, out)
	}
	if bytes.Contains(out, []byte(" "+NodeAddress+"/32")) {
		return nil
	}
	if out, err := exec.Command("ip", "addr", "add", NodeAddress+"/32", "dev", "lo").CombinedOutput(); err != nil {
		return fmt.Errorf("adding the node address %s to lo (needs root): %v: %s", NodeAddress, err, out)
	}
	return nil
}

func (n *Node) locateBinaries(ctx context.Context) error {
	dir, err := runHackScript(ctx, "node.sh")
	if err != nil {
		return err
	}
	n.bins = dir
	return nil
}

// guardRule rejects every packet a pod sends that is not for another pod:
// traffic to the node address and to Service IPs is DNATed or delivered
// locally before FORWARD, so nothing a pod sends can leave the machine.
var guardRule = []string{"FORWARD", "-i", "cni0", "!", "-d", PodCIDR, "-m", "comment", "--comment", "keyledger-node-guard", "-j", "REJECT"}

func (n *Node) prepareNetwork(context.Context) error {
	for key, value := range map[string]string{
		"/proc/sys/net/ipv4/ip_forward":                "1",
		"/proc/sys/net/bridge/bridge-nf-call-iptables": "1",
		"/proc/sys/net/ipv4/conf/all/route_localnet":   "1",
	} {
		if err := os.WriteFile(key, []byte(value), 0o644); err != nil {
			return fmt.Errorf("setting %s: %w", key, err)
		}
	}
	if err := ensureNodeAddress(); err != nil {
		return err
	}
	if exec.Command("iptables", append([]string{"-C"}, guardRule...)...).Run() != nil {
		if out, err := exec.Command("iptables", append([]string{"-I"}, guardRule...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("adding the guard rule: %v: %s", err, out)
		}
	}
	for _, d := range []string{n.state, n.run, filepath.Join(n.state, "cni", "net.d")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	conflist := fmt.Sprintf(`{"cniVersion":"0.4.0","name":"keyledger","plugins":[
  {"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":false,"hairpinMode":true,
   "ipam":{"type":"host-local","ranges":[[{"subnet":%q}]],"routes":[{"dst":"0.0.0.0/0"}],"dataDir":%q}},
  {"type":"portmap","capabilities":{"portMappings":true}}]}
`, PodCIDR, filepath.Join(n.state, "cni", "ipam"))
	return os.WriteFile(filepath.Join(n.state, "cni", "net.d", "10-keyledger.conflist"), []byte(conflist), 0o644)
}

func (n *Node) socket() string { return filepath.Join(n.run, "containerd.sock") }

func (n *Node) startContainerd(ctx context.Context) error {
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, filepath.Join(n.state, "containerd", "root"), filepath.Join(n.run, "state"), n.socket(), n.socket()+".ttrpc",
		filepath.Join(n.state, "containerd", "opt"), PauseImage, cniBinDir, filepath.Join(n.state, "cni", "net.d"))
	path := filepath.Join(n.state, "containerd.toml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return err
	}
	if err := n.start("containerd", "containerd", "--config", path); err != nil {
		return err
	}
	return n.poll(ctx, "containerd", 30*time.Second, func(ctx context.Context) (bool, error) {
		return exec.CommandContext(ctx, "ctr", "--address", n.socket(), "version").Run() == nil, nil
	})
}

func (n *Node) startKubelet(ctx context.Context) error {
	user, err := n.kube.env.AddUser(envtest.User{Name: "system:node:" + NodeName, Groups: []string{"system:nodes"}}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := n.kube.KubeconfigForConfig(user.Config(), n.dir("kubelet-kubeconfig"))
	if err != nil {
		return err
	}
	// Pods resolve names through cluster DNS only (ClusterFirst). Pods that
	// ask for the node's resolver get one that answers nothing: no lookup
	// can reach the machine's upstream resolver.
	resolv := filepath.Join(n.state, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
		return err
	}
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
clusterDNS: [%s]
clusterDomain: cluster.local
resolvConf: %q
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard: {"memory.available": "100Mi", "nodefs.available": "1%%", "imagefs.available": "1%%", "nodefs.inodesFree": "1%%"}
nodeStatusUpdateFrequency: 2s
syncFrequency: 5s
fileCheckFrequency: 5s
maxPods: 60
podLogsDir: %q
`, NodeAddress, n.kube.cluster.caFile, n.socket(), DNSServiceIP, resolv, filepath.Join(n.state, "pod-logs"))
	path := filepath.Join(n.state, "kubelet.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return err
	}
	return n.start("kubelet", filepath.Join(n.bins, "kubelet"),
		"--config="+path,
		"--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(n.state, "kubelet"),
		"--cert-dir="+filepath.Join(n.state, "kubelet-pki"),
		"--hostname-override="+NodeName,
		"--node-ip="+NodeAddress,
		"--v=1",
	)
}

func (n *Node) dir(name string) string {
	d := filepath.Join(n.state, name)
	_ = os.MkdirAll(d, 0o700)
	return d
}

func (n *Node) waitReady(ctx context.Context) error {
	return n.poll(ctx, "node Ready", 90*time.Second, func(ctx context.Context) (bool, error) {
		node, err := n.kube.client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

func (n *Node) startKubeProxy(ctx context.Context) error {
	user, err := n.kube.env.AddUser(envtest.User{Name: "system:kube-proxy"}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := n.kube.KubeconfigForConfig(user.Config(), n.dir("kube-proxy-kubeconfig"))
	if err != nil {
		return err
	}
	config := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
bindAddress: %s
clusterCIDR: %s
hostnameOverride: %s
clientConnection: {kubeconfig: %q}
healthzBindAddress: ""
metricsBindAddress: 127.0.0.1:0
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {syncPeriod: 5s, minSyncPeriod: 0s}
`, NodeAddress, PodCIDR, NodeName, kubeconfig)
	metricsPort, err := freePort()
	if err != nil {
		return err
	}
	config = strings.Replace(config, "metricsBindAddress: 127.0.0.1:0", "metricsBindAddress: 127.0.0.1:"+strconv.Itoa(metricsPort), 1)
	path := filepath.Join(n.state, "kube-proxy.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return err
	}
	return n.start("kube-proxy", filepath.Join(n.bins, "kube-proxy"), "--config="+path, "--v=1")
}

func (n *Node) startScheduler(ctx context.Context) error {
	user, err := n.kube.env.AddUser(envtest.User{Name: "system:kube-scheduler"}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := n.kube.KubeconfigForConfig(user.Config(), n.dir("kube-scheduler-kubeconfig"))
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	return n.start("kube-scheduler", filepath.Join(n.bins, "kube-scheduler"),
		"--kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--authentication-skip-lookup=true",
		"--v=1",
	)
}

func (n *Node) startKubeRouter(ctx context.Context) error {
	// kube-router watches pods, namespaces, policies and nodes cluster-wide;
	// a test-only enforcer, it runs as an admin.
	user, err := n.kube.env.AddUser(envtest.User{Name: "keyledger-test:kube-router", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := n.kube.KubeconfigForConfig(user.Config(), n.dir("kube-router-kubeconfig"))
	if err != nil {
		return err
	}
	return n.start("kube-router", filepath.Join(n.bins, "kube-router"),
		"--kubeconfig="+kubeconfig,
		"--run-firewall=true", "--run-router=false", "--run-service-proxy=false", "--enable-cni=false",
		"--service-cluster-ip-range="+ServiceCIDR,
		"--hostname-override="+NodeName,
		"--health-port=0",
		"--metrics-port=0",
		"--v=1",
	)
}

// startDNS runs cluster DNS as a pod in kube-system labelled k8s-app:
// kube-dns behind the kube-dns Service, as most clusters do, so the
// NetworkPolicies that allow DNS the usual way are the ones enforced.
func (n *Node) startDNS(ctx context.Context) error {
	c := n.kube.client
	const name = "kube-dns"
	if _, err := c.CoreV1().ServiceAccounts("kube-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "keyledger-test:kube-dns"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"list"}}}}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "keyledger-test:kube-dns"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: "kube-system"}}}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	labels := map[string]string{"k8s-app": "kube-dns"}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.ServiceSpec{
		ClusterIP: DNSServiceIP, Selector: labels,
		Ports: []corev1.ServicePort{
			{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(53)},
			{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(53)},
		}}}
	if _, err := c.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.PodSpec{
		ServiceAccountName: name,
		DNSPolicy:          corev1.DNSDefault,
		// Port 53 in the pod, as cluster DNS serves it: NetworkPolicies
		// match the port after the Service's translation.
		SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "53"}}},
		Containers: []corev1.Container{{
			Name: "dns", Image: NodeToolImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{"dns", ":53"},
			SecurityContext: &corev1.SecurityContext{RunAsUser: ptrTo(int64(65534)), RunAsNonRoot: ptrTo(true),
				AllowPrivilegeEscalation: ptrTo(false), ReadOnlyRootFilesystem: ptrTo(true)},
		}},
	}}
	_, err := c.CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }

// waitDNS asks cluster DNS, through its ClusterIP from the node (kube-proxy
// NATs it), for the kubernetes Service's address.
func (n *Node) waitDNS(ctx context.Context) error {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(DNSServiceIP, "53"))
	}}
	var last error
	err := n.poll(ctx, "cluster DNS", 90*time.Second, func(ctx context.Context) (bool, error) {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		addrs, err := r.LookupHost(qctx, "kubernetes.default.svc.cluster.local")
		if err != nil {
			last = err
			return false, nil
		}
		return len(addrs) == 1 && addrs[0] == APIServiceIP, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (last answer: %v)", err, last)
	}
	return err
}

// start runs a node component as a child process with its own log file.
func (n *Node) start(name, path string, args ...string) error {
	log, err := os.Create(filepath.Join(n.state, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so a signal to the test process's group (a
	// terminal's Ctrl-C) reaches the test first and Stop tears down in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	c := &component{name: name, cmd: cmd, done: make(chan struct{}), log: log}
	go func() { c.err = cmd.Wait(); close(c.done) }()
	n.procs = append(n.procs, c)
	n.owner.PIDs = append(n.owner.PIDs, cmd.Process.Pid)
	return n.writeOwner()
}

// poll waits up to limit for cond, failing early when a component exited.
func (n *Node) poll(ctx context.Context, what string, limit time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, c := range n.procs {
			select {
			case <-c.done:
				return false, fmt.Errorf("%s exited: %v (log: %s):\n%s", c.name, c.err, c.log.Name(), logTail(c.log.Name(), 20))
			default:
			}
		}
		return cond(ctx)
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// logTail returns the last lines of a log file.
func logTail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// StateDir holds the node components' logs and configuration.
func (n *Node) StateDir() string { return n.state }
