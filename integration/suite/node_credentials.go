package suite

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/keyledger/keyledger/integration/platform"
)

// SyncExpectingFailure runs `keyledger apply-hook DIR` (an Argo CD sync)
// whose Job fails after its retries, and returns the exit codes of the
// Job's pods and their logs; applyHookOutput, when given, receives what
// apply-hook printed.
func (ne *NodeEnv) SyncExpectingFailure(dir, owner string, applyHookOutput ...*string) (codes []int32, logs string) {
	ne.T.Helper()
	r := ne.Keyledger([]string{"apply-hook", dir, "--timeout", "4m"})
	for _, out := range applyHookOutput {
		*out = r.Stdout + r.Stderr
	}
	require.NotEqual(ne.T, 0, r.Code, "the sync fails: %s %s", r.Stdout, r.Stderr)
	require.Contains(ne.T, r.Stdout+r.Stderr, "hook-job-failed", "%s %s\n%s", r.Stdout, r.Stderr, ne.HookPodLogs())
	pods, err := ne.Kube.Client().CoreV1().Pods(ne.NS).List(context.Background(), metav1.ListOptions{LabelSelector: "keyledger.dev/owner=" + owner})
	require.NoError(ne.T, err)
	for i := range pods.Items {
		p := &pods.Items[i]
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Terminated == nil {
			continue
		}
		codes = append(codes, p.Status.ContainerStatuses[0].State.Terminated.ExitCode)
	}
	return codes, ne.HookPodLogs()
}

// RenderHook runs `keyledger render credentials` for plan into a fresh
// directory, with the node test image and the flags given, and returns the
// directory.
func (ne *NodeEnv) RenderHook(plan map[string]any, flags ...string) string {
	ne.T.Helper()
	planPath := ne.WriteCommand("plan.json", plan)
	dir := filepath.Join(ne.T.TempDir(), "hook")
	r := ne.Keyledger(append([]string{"render", "credentials", "--plan", planPath, "--image", nodeShared.image, "--out-dir", dir}, flags...))
	require.Equal(ne.T, 0, r.Code, "render: %s %s", r.Stdout, r.Stderr)
	return dir
}

// ApplyHook runs `keyledger apply-hook DIR` (what Argo CD does at a sync)
// and requires the Job to succeed in its pod.
func (ne *NodeEnv) ApplyHook(dir string) {
	ne.T.Helper()
	r := ne.Keyledger([]string{"apply-hook", dir, "--timeout", "3m"})
	if r.Code != 0 || !strings.Contains(r.Stdout, `"outcome":"succeeded"`) {
		ne.T.Fatalf("apply-hook: exit %d\nstdout %s\nstderr %s\njob pods:\n%s", r.Code, r.Stdout, r.Stderr, ne.HookPodLogs())
	}
}

// HookPodLogs gathers the logs of the credentials Job's pods (for failures).
func (ne *NodeEnv) HookPodLogs() string {
	pods, err := ne.Kube.Client().CoreV1().Pods(ne.NS).List(context.Background(), metav1.ListOptions{LabelSelector: "keyledger.dev/owner"})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for i := range pods.Items {
		p := &pods.Items[i]
		raw, err := ne.Kube.Client().CoreV1().Pods(ne.NS).GetLogs(p.Name, &corev1.PodLogOptions{Container: "keyledger"}).Do(context.Background()).Raw()
		fmt.Fprintf(&b, "--- %s (%s): %s%v\n", p.Name, p.Status.Phase, raw, err)
	}
	return b.String()
}

// ServerImage is the Debian redis-server and nats-server image, imported
// into the node once.
var ServerImage struct {
	once sync.Once
	tag  string
	err  error
}

func (ne *NodeEnv) ServersImage() string {
	ne.T.Helper()
	ServerImage.once.Do(func() {
		out, err := exec.Command("bash", filepath.Join(platform.RepoRoot(), "hack", "servers-image.sh")).Output()
		if err != nil {
			ServerImage.err = fmt.Errorf("building the servers image: %w", err)
			return
		}
		ServerImage.tag = strings.TrimSpace(string(out))
		ServerImage.err = ne.Node.ImportImages(context.Background(), ServerImage.tag)
	})
	require.NoError(ne.T, ServerImage.err)
	return ServerImage.tag
}

// ServerStatefulSet runs one server pod (NAME-0) whose password comes from
// secret's key password when the pod is created, as a chart would wire it.
func (ne *NodeEnv) ServerStatefulSet(name, secret string, port int32, command ...string) {
	ne.T.Helper()
	labels := map[string]string{"app": name}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.StatefulSetSpec{
		Replicas: Ptr(int32(1)), ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  Ptr(false),
			TerminationGracePeriodSeconds: Ptr(int64(1)),
			Containers: []corev1.Container{{Name: "server", Image: ne.ServersImage(), ImagePullPolicy: corev1.PullNever,
				Command: command,
				Env: []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "password"}}}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}}, PeriodSeconds: 1},
			}},
		}},
	}}
	_, err := ne.Kube.Client().AppsV1().StatefulSets(ne.NS).Create(ne.T.Context(), sts, metav1.CreateOptions{})
	require.NoError(ne.T, err)
}

// PodUIDs records every UID the pod name had, from the API server's watch
// history, until stop is called.
func (ne *NodeEnv) PodUIDs(name string) (stop func() []string) {
	ne.T.Helper()
	ctx, cancel := context.WithCancel(ne.T.Context())
	w, err := ne.Kube.Client().CoreV1().Pods(ne.NS).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	require.NoError(ne.T, err)
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

// HookJobEnd is a failed hook Job of owner as the API server holds it
// after the sync: the Job (its Failed condition) and every pod it made.
func (ne *NodeEnv) HookJobEnd(owner string) (batchv1.Job, batchv1.JobCondition, []corev1.Pod) {
	ne.T.Helper()
	t, c := ne.T, ne.Kube.Client()
	sel := metav1.ListOptions{LabelSelector: "keyledger.dev/owner=" + owner}
	jobs, err := c.BatchV1().Jobs(ne.NS).List(t.Context(), sel)
	require.NoError(t, err)
	require.Len(t, jobs.Items, 1, "one hook Job of %s", owner)
	job := jobs.Items[0]
	var failed batchv1.JobCondition
	for _, cond := range job.Status.Conditions {
		if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
			failed = cond
		}
	}
	require.Equal(t, batchv1.JobFailed, failed.Type, "the Job failed: %v", job.Status.Conditions)
	pods, err := c.CoreV1().Pods(ne.NS).List(t.Context(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
	require.NoError(t, err)
	return job, failed, pods.Items
}
