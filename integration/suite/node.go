package suite

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/keyledger/keyledger/integration/platform"
)

// The real node is started once per package run, on first use by a node
// test, with a control plane of its own (bound to the node address): the
// other tests keep their loopback control plane without a kubelet.
var nodeShared struct {
	once     sync.Once
	err      error
	kube     *platform.Kube
	node     *platform.Node
	binary   string // static keyledger, the one inside the image
	image    string // keyledger image, as `make image` builds it
	postgres string // the PostgreSQL image tag
	dir      string
}

// KeyledgerTestImage is the tag the node tests give the keyledger image.
const KeyledgerTestImage = "keyledger.local/keyledger:node-test"

func startNodePlatform() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	s := &nodeShared
	dir, err := os.MkdirTemp("", "keyledger-node-test-")
	if err != nil {
		s.err = err
		return
	}
	s.dir = dir
	// The binary and image a user gets from `make build` and `make image`.
	s.binary = filepath.Join(dir, "keyledger")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", s.binary, "./cmd/keyledger")
	build.Dir = platform.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		s.err = fmt.Errorf("building keyledger: %v\n%s", err, out)
		return
	}
	img := exec.CommandContext(ctx, "bash", filepath.Join(platform.RepoRoot(), "hack", "image.sh"))
	img.Env = append(os.Environ(), "BINARY="+s.binary, "CONTEXT="+filepath.Join(dir, "image"), "IMAGE="+KeyledgerTestImage)
	if out, err := img.CombinedOutput(); err != nil {
		s.err = fmt.Errorf("building the keyledger image: %v\n%s", err, out)
		return
	}
	s.image = KeyledgerTestImage
	pg := exec.CommandContext(ctx, "bash", filepath.Join(platform.RepoRoot(), "hack", "postgres-image.sh"))
	out, err := pg.Output()
	if err != nil {
		s.err = fmt.Errorf("building the PostgreSQL image: %v", err)
		return
	}
	s.postgres = strings.TrimSpace(string(out))
	if s.kube, s.err = platform.StartKube(ctx, platform.WithNode()); s.err != nil {
		return
	}
	if s.node, s.err = platform.StartNode(ctx, s.kube); s.err != nil {
		return
	}
	s.err = s.node.ImportImages(ctx, s.image, s.postgres)
}

// StopNodePlatform tears the node down; after a failed run the control
// plane's and node's logs are kept (their directory is printed).
func StopNodePlatform(failed bool) {
	s := &nodeShared
	if failed && s.kube != nil {
		s.kube.KeepWorkDir()
		fmt.Fprintln(os.Stderr, "node: logs kept in", s.kube.WorkDir())
	}
	if s.node != nil {
		if err := s.node.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping node:", err)
		}
	}
	if s.kube != nil {
		if err := s.kube.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping node control plane:", err)
		}
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// NodeEnv is one node test's view: the node's control plane, a fresh
// namespace, and (after DeployJournal) a journal PostgreSQL running as a pod
// in it.
type NodeEnv struct {
	*Env
	Node *platform.Node
}

// SetupNode gives a test the real node. KEYLEDGER_NODE=off skips it
// visibly; a machine that cannot run a node fails here with the reason.
func SetupNode(t *testing.T) *NodeEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the real platform (run without -short)")
	}
	if reason := platform.NodeSkipReason(); reason != "" {
		t.Skip(reason)
	}
	nodeShared.once.Do(startNodePlatform)
	if nodeShared.err != nil {
		t.Fatalf("node platform: %v", nodeShared.err)
	}
	k := nodeShared.kube
	return &NodeEnv{
		Env:  &Env{T: t, Kube: k, NS: k.Namespace(t), Binary: nodeShared.binary, Dir: t.TempDir()},
		Node: nodeShared.node,
	}
}

// ApplyAll server-side-applies objs (as the admin) into the test namespace.
func (ne *NodeEnv) ApplyAll(objs []*unstructured.Unstructured) {
	ne.T.Helper()
	a := ne.Applier()
	for _, obj := range objs {
		_, err := a.Apply(ne.T.Context(), obj.DeepCopy(), ne.NS, false)
		require.NoError(ne.T, err, "applying %s %s", obj.GetKind(), obj.GetName())
	}
}

// JobEnd is how a Job ended, read from the cluster: its status and its
// pod's containers.
type JobEnd struct {
	Complete, Failed bool
	Pod              *corev1.Pod
}

// WaitJob waits until the Job completes or fails (limit bounds the wait).
func (ne *NodeEnv) WaitJob(name string, limit time.Duration) JobEnd {
	ne.T.Helper()
	ctx, cancel := context.WithTimeout(ne.T.Context(), limit)
	defer cancel()
	c := ne.Kube.Client()
	var end JobEnd
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		j, err := c.BatchV1().Jobs(ne.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range j.Status.Conditions {
			if cond.Status != corev1.ConditionTrue {
				continue
			}
			switch cond.Type {
			case batchv1.JobComplete:
				end.Complete = true
			case batchv1.JobFailed:
				end.Failed = true
			}
		}
		return end.Complete || end.Failed, nil
	})
	if err != nil {
		var b strings.Builder
		pods, _ := c.CoreV1().Pods(ne.NS).List(context.Background(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
		for i := range pods.Items {
			b.WriteString(ne.Describe(&pods.Items[i]))
		}
		j, _ := c.BatchV1().Jobs(ne.NS).Get(context.Background(), name, metav1.GetOptions{})
		js, _ := json.Marshal(j.Status)
		ne.T.Fatalf("Job %s did not finish within %s (status %s; node logs in %s):\n%s", name, limit, js, ne.Node.StateDir(), b.String())
	}
	pods, err := c.CoreV1().Pods(ne.NS).List(ne.T.Context(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
	require.NoError(ne.T, err)
	require.Len(ne.T, pods.Items, 1, "one pod for Job %s (backoffLimit 0)", name)
	end.Pod = &pods.Items[0]
	return end
}

// Logs reads a container's log through the API server (which asks the
// kubelet).
func (ne *NodeEnv) Logs(pod *corev1.Pod, container string) string {
	ne.T.Helper()
	b, err := ne.Kube.Client().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container}).Do(ne.T.Context()).Raw()
	require.NoError(ne.T, err, "logs of %s/%s", pod.Name, container)
	return string(b)
}

// Describe is a failed pod's story for a test failure: its containers'
// states and whatever logs they left.
func (ne *NodeEnv) Describe(pod *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s phase %s\n", pod.Name, pod.Status.Phase)
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			st, _ := json.Marshal(cs.State)
			raw, err := ne.Kube.Client().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: cs.Name}).Do(context.Background()).Raw()
			fmt.Fprintf(&b, "container %s: %s\nlog: %s%v\n", cs.Name, st, raw, err)
		}
	}
	return b.String()
}

// OutcomeLine finds the one JSON line with an "outcome" member in a
// container log (stdout and stderr are interleaved there; structured log
// lines have no outcome member).
func OutcomeLine(t *testing.T, log string) map[string]any {
	t.Helper()
	var found map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		// The outcome line; structured log lines (with "msg") may carry an
		// outcome attribute too.
		if _, ok := m["outcome"]; ok && m["msg"] == nil {
			require.Nil(t, found, "more than one outcome line in:\n%s", log)
			found = m
		}
	}
	require.NotNil(t, found, "no outcome line in:\n%s", log)
	return found
}

// ContainerExit is a terminated container's exit code, or -1 when it never
// ran to an end (never started, or still waiting).
func ContainerExit(statuses []corev1.ContainerStatus, name string) int {
	for _, s := range statuses {
		if s.Name == name && s.State.Terminated != nil {
			return int(s.State.Terminated.ExitCode)
		}
	}
	return -1
}

// DeleteJob deletes a Job and its pod and waits until both are gone.
func (ne *NodeEnv) DeleteJob(name string) {
	ne.T.Helper()
	ctx, cancel := context.WithTimeout(ne.T.Context(), 60*time.Second)
	defer cancel()
	c := ne.Kube.Client()
	bg := metav1.DeletePropagationForeground
	err := c.BatchV1().Jobs(ne.NS).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	require.NoError(ne.T, err)
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := c.BatchV1().Jobs(ne.NS).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(ne.T, err, "Job %s not gone", name)
}

// ImageName is an image reference without its tag.
func ImageName(ref string) string { return ref[:strings.LastIndexByte(ref, ':')] }

// ImageTag is an image reference's tag.
func ImageTag(ref string) string { return ref[strings.LastIndexByte(ref, ':')+1:] }

// Ptr is a pointer to a copy of v.
func Ptr[T any](v T) *T { return &v }

// CanaryPod runs a TCP listener in a namespace of its own (no policy
// selects it) and returns its IP:port: reachable from any pod that no
// egress policy fences, and from nothing that is fenced.
func (ne *NodeEnv) CanaryPod() string {
	ne.T.Helper()
	ns := ne.Kube.Namespace(ne.T)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "canary"}, Spec: corev1.PodSpec{
		AutomountServiceAccountToken: Ptr(false),
		Containers: []corev1.Container{{Name: "listen", Image: platform.NodeToolImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{"listen", ":8080"}}},
	}}
	_, err := ne.Kube.Client().CoreV1().Pods(ns).Create(ne.T.Context(), pod, metav1.CreateOptions{})
	require.NoError(ne.T, err)
	other := *ne
	other.Env = &Env{T: ne.T, Kube: ne.Kube, NS: ns}
	return net.JoinHostPort(other.WaitPodRunning("canary", 60*time.Second), "8080")
}

// WaitPodRunning waits until the pod runs and has an IP.
func (ne *NodeEnv) WaitPodRunning(name string, limit time.Duration) string {
	ne.T.Helper()
	ctx, cancel := context.WithTimeout(ne.T.Context(), limit)
	defer cancel()
	for {
		p, err := ne.Kube.Client().CoreV1().Pods(ne.NS).Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			return p.Status.PodIP
		}
		select {
		case <-ctx.Done():
			ne.T.Fatalf("pod %s/%s not running within %s; node logs in %s", ne.NS, name, limit, ne.Node.StateDir())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// APIEndpoint is the address behind the kubernetes Service (what an
// operator fills into the api-egress component).
func (ne *NodeEnv) APIEndpoint() (string, int) {
	ne.T.Helper()
	u, err := url.Parse(ne.Kube.Host())
	require.NoError(ne.T, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(ne.T, err)
	require.Equal(ne.T, platform.NodeAddress, u.Hostname())
	return u.Hostname(), port
}

// RetirementOverlay renders the private overlay deploy/README.md tells an
// operator to write, on the cloudnativepg overlay, with the node test image.
func (ne *NodeEnv) RetirementOverlay(suffix, secretName, canary string, command map[string]any, apiEgress bool, edits ...func(*PrivateOverlay)) []*unstructured.Unstructured {
	ne.T.Helper()
	cmd, err := json.Marshal(command)
	require.NoError(ne.T, err)
	o := PrivateOverlay{Namespace: ne.NS, NameSuffix: suffix, SecretName: secretName, Canary: canary, Command: cmd,
		ImageName: ImageName(nodeShared.image), ImageTag: ImageTag(nodeShared.image)}
	if apiEgress {
		o.APIServerIP, o.APIServerPort = ne.APIEndpoint()
	}
	for _, edit := range edits {
		edit(&o)
	}
	objs := RenderPrivate(ne.T, o)
	require.Empty(ne.T, Audit(objs), "the overlay passes the deployment audit")
	ne.CleanupClusterScoped(objs)
	return objs
}

// CleanupClusterScoped deletes the cluster-scoped objects of objs when the
// test ends (the namespace's deletion removes the rest).
func (ne *NodeEnv) CleanupClusterScoped(objs []*unstructured.Unstructured) {
	a := ne.Applier()
	for _, obj := range objs {
		if obj.GetKind() != "ClusterRole" && obj.GetKind() != "ClusterRoleBinding" {
			continue
		}
		ri, err := a.Resource(obj.DeepCopy(), ne.NS)
		require.NoError(ne.T, err)
		name := obj.GetName()
		ne.T.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := ri.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				ne.T.Errorf("deleting %s: %v", name, err)
			}
		})
	}
}

// VersionedOverlay renders the private overlay deploy/README.md tells an
// operator to write for one versioned write (WriteVersionedOverlay), with
// the node's API server endpoint and the node test image.
func (ne *NodeEnv) VersionedOverlay(suffix, live, canary string, command map[string]any, edits ...func(*VersionedOverlay)) []*unstructured.Unstructured {
	t := ne.T
	t.Helper()
	cmd, err := json.Marshal(command)
	require.NoError(t, err)
	fsys := DeployFS(t)
	apiIP, apiPort := ne.APIEndpoint()
	o := VersionedOverlay{Namespace: ne.NS, NameSuffix: suffix, LiveSecret: live, Canary: canary, Command: cmd,
		APIServerIP: apiIP, APIServerPort: apiPort, ImageName: ImageName(nodeShared.image), ImageTag: ImageTag(nodeShared.image)}
	for _, edit := range edits {
		edit(&o)
	}
	dir := WriteVersionedOverlay(t, fsys, o)
	objs := Render(t, fsys, dir)
	require.Empty(t, Audit(objs), "the overlay passes the deployment audit")
	ne.CleanupClusterScoped(objs)
	return objs
}

// VersionedOverlay is what an operator fills in for one versioned write.
type VersionedOverlay struct {
	Namespace, NameSuffix, LiveSecret, Canary string
	Command                                   []byte
	APIServerIP                               string
	APIServerPort                             int
	ImageName, ImageTag                       string
	// Pooled adds components/cloudnativepg-pooler.
	Pooled bool
}

// WriteVersionedOverlay lays out, at /my-write in fsys, the private overlay
// deploy/README.md tells an operator to write for one versioned write:
// overlays/cloudnativepg-versioned, the filled api-egress component, the
// command as an immutable Secret, the live Secret's name in the Role and the
// canary in the gate. It returns the overlay's path.
func WriteVersionedOverlay(t *testing.T, fsys filesys.FileSystem, o VersionedOverlay) string {
	t.Helper()
	FillAPIEgress(t, fsys, "/my-write", o.APIServerIP, o.APIServerPort)
	require.NoError(t, fsys.WriteFile("/my-write/command.json", o.Command))
	pooler := ""
	if o.Pooled {
		pooler = "- ../deploy/components/cloudnativepg-pooler\n"
	}
	require.NoError(t, fsys.WriteFile("/my-write/kustomization.yaml", []byte(fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: "%[1]s"
nameSuffix: "-%[2]s"
resources:
- ../deploy/overlays/cloudnativepg-versioned
components:
- api-egress
%[7]ssecretGenerator:
- name: keyledger-versioned-command
  behavior: replace
  files:
  - command.json
  options:
    immutable: true
patches:
- target:
    kind: Role
    name: keyledger-versioned
  patch: |-
    - op: replace
      path: /rules/1/resourceNames
      value: [%[3]q]
- target:
    kind: Job
    name: keyledger-versioned
  patch: |-
    - op: replace
      path: /spec/template/spec/initContainers/0/env/0/value
      value: %[4]q
images:
- name: keyledger
  newName: %[5]s
  newTag: %[6]s
`, o.Namespace, o.NameSuffix, o.LiveSecret, o.Canary, o.ImageName, o.ImageTag, pooler))))
	return "/my-write"
}

// NodeImage is the keyledger image loaded into the node (by SetupNode).
func NodeImage() string { return nodeShared.image }

// NodeBinary is the release build inside NodeImage (by SetupNode).
func NodeBinary() string { return nodeShared.binary }
