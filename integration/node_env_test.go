package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// keyledgerTestImage is the tag the node tests give the keyledger image.
const keyledgerTestImage = "keyledger.local/keyledger:node-test"

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
	img.Env = append(os.Environ(), "BINARY="+s.binary, "CONTEXT="+filepath.Join(dir, "image"), "IMAGE="+keyledgerTestImage)
	if out, err := img.CombinedOutput(); err != nil {
		s.err = fmt.Errorf("building the keyledger image: %v\n%s", err, out)
		return
	}
	s.image = keyledgerTestImage
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

// stopNodePlatform tears the node down; after a failed run the control
// plane's and node's logs are kept (their directory is printed).
func stopNodePlatform(failed bool) {
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

// nodeEnv is one node test's view: the node's control plane, a fresh
// namespace, and (after deployJournal) a journal PostgreSQL running as a pod
// in it.
type nodeEnv struct {
	*env
	node *platform.Node
}

// setupNode gives a test the real node. KEYLEDGER_NODE=off skips it
// visibly; a machine that cannot run a node fails here with the reason.
func setupNode(t *testing.T) *nodeEnv {
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
	return &nodeEnv{
		env:  &env{t: t, kube: k, ns: k.Namespace(t), binary: nodeShared.binary, dir: t.TempDir()},
		node: nodeShared.node,
	}
}

// applyAll server-side-applies objs (as the admin) into the test namespace.
func (ne *nodeEnv) applyAll(objs []*unstructured.Unstructured) {
	ne.t.Helper()
	a := ne.applier()
	for _, obj := range objs {
		_, err := a.apply(ne.t.Context(), obj.DeepCopy(), ne.ns, false)
		require.NoError(ne.t, err, "applying %s %s", obj.GetKind(), obj.GetName())
	}
}

// jobEnd is how a Job ended, read from the cluster: its status and its
// pod's containers.
type jobEnd struct {
	Complete, Failed bool
	Pod              *corev1.Pod
}

// waitJob waits until the Job completes or fails (limit bounds the wait).
func (ne *nodeEnv) waitJob(name string, limit time.Duration) jobEnd {
	ne.t.Helper()
	ctx, cancel := context.WithTimeout(ne.t.Context(), limit)
	defer cancel()
	c := ne.kube.Client()
	var end jobEnd
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		j, err := c.BatchV1().Jobs(ne.ns).Get(ctx, name, metav1.GetOptions{})
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
		pods, _ := c.CoreV1().Pods(ne.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
		for i := range pods.Items {
			b.WriteString(ne.describe(&pods.Items[i]))
		}
		j, _ := c.BatchV1().Jobs(ne.ns).Get(context.Background(), name, metav1.GetOptions{})
		js, _ := json.Marshal(j.Status)
		ne.t.Fatalf("Job %s did not finish within %s (status %s; node logs in %s):\n%s", name, limit, js, ne.node.StateDir(), b.String())
	}
	pods, err := c.CoreV1().Pods(ne.ns).List(ne.t.Context(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
	require.NoError(ne.t, err)
	require.Len(ne.t, pods.Items, 1, "one pod for Job %s (backoffLimit 0)", name)
	end.Pod = &pods.Items[0]
	return end
}

// logs reads a container's log through the API server (which asks the
// kubelet).
func (ne *nodeEnv) logs(pod *corev1.Pod, container string) string {
	ne.t.Helper()
	b, err := ne.kube.Client().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container}).Do(ne.t.Context()).Raw()
	require.NoError(ne.t, err, "logs of %s/%s", pod.Name, container)
	return string(b)
}

// describe is a failed pod's story for a test failure: its containers'
// states and whatever logs they left.
func (ne *nodeEnv) describe(pod *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s phase %s\n", pod.Name, pod.Status.Phase)
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			st, _ := json.Marshal(cs.State)
			raw, err := ne.kube.Client().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: cs.Name}).Do(context.Background()).Raw()
			fmt.Fprintf(&b, "container %s: %s\nlog: %s%v\n", cs.Name, st, raw, err)
		}
	}
	return b.String()
}

// outcomeLine finds the one JSON line with an "outcome" member in a
// container log (stdout and stderr are interleaved there; structured log
// lines have no outcome member).
func outcomeLine(t *testing.T, log string) map[string]any {
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

// containerExit is a terminated container's exit code, or -1 when it never
// ran to an end (never started, or still waiting).
func containerExit(statuses []corev1.ContainerStatus, name string) int {
	for _, s := range statuses {
		if s.Name == name && s.State.Terminated != nil {
			return int(s.State.Terminated.ExitCode)
		}
	}
	return -1
}

// deleteJob deletes a Job and its pod and waits until both are gone.
func (ne *nodeEnv) deleteJob(name string) {
	ne.t.Helper()
	ctx, cancel := context.WithTimeout(ne.t.Context(), 60*time.Second)
	defer cancel()
	c := ne.kube.Client()
	bg := metav1.DeletePropagationForeground
	err := c.BatchV1().Jobs(ne.ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	require.NoError(ne.t, err)
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := c.BatchV1().Jobs(ne.ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(ne.t, err, "Job %s not gone", name)
}
