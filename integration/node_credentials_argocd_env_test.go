package integration

import (
	"context"
	"encoding/json"
	"fmt"
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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/workflow/credentials"
)

var applicationResource = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}

// gitRepo is a local git repository Argo CD's repo-server clones over
// file://; the test commits the application's manifests under app/.
type gitRepo struct {
	t   *testing.T
	dir string
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	r := &gitRepo{t: t, dir: filepath.Join(t.TempDir(), "shop.git")}
	require.NoError(t, os.MkdirAll(filepath.Join(r.dir, "app"), 0o755))
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *gitRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=keyledger-test", "-c", "user.email=test@keyledger.invalid"}, args...)...)
	cmd.Dir = r.dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + r.dir, "GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	require.NoError(r.t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// put copies the files of a rendered hook directory to app/sub/ (replacing
// what was there) and writes the extra objects to app/NAME.yaml.
func (r *gitRepo) putHook(sub, hookDir string) {
	r.t.Helper()
	dst := filepath.Join(r.dir, "app", sub)
	require.NoError(r.t, os.RemoveAll(dst))
	require.NoError(r.t, os.MkdirAll(dst, 0o755))
	for _, f := range append(append([]string{}, credentials.HookFiles...), credentials.SyncFile) {
		b, err := os.ReadFile(filepath.Join(hookDir, f))
		require.NoError(r.t, err)
		require.NoError(r.t, os.WriteFile(filepath.Join(dst, f), b, 0o644))
	}
}

// putFile copies one file of a rendered hook directory to app/sub/.
func (r *gitRepo) putFile(sub, hookDir, name string) {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(hookDir, name))
	require.NoError(r.t, err)
	require.NoError(r.t, os.WriteFile(filepath.Join(r.dir, "app", sub, name), b, 0o644))
}

func (r *gitRepo) putObject(name string, obj map[string]any) {
	r.t.Helper()
	b, err := yaml.Marshal(obj)
	require.NoError(r.t, err)
	require.NoError(r.t, os.WriteFile(filepath.Join(r.dir, "app", name+".yaml"), b, 0o644))
}

// commit commits everything and returns the commit's hash.
func (r *gitRepo) commit(msg string) string {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// argoApp is the Application syncing the repository's app/ into the test
// namespace, with automated sync and a short retry (limit 2, 2 s apart).
type argoApp struct {
	ne   *nodeEnv
	argo *platform.ArgoCD
	name string
	apps dynamic.ResourceInterface
}

func argoApplication(ne *nodeEnv, argo *platform.ArgoCD, repo *gitRepo) *argoApp {
	ne.T.Helper()
	dyn, err := dynamic.NewForConfig(ne.Kube.Config())
	require.NoError(ne.T, err)
	a := &argoApp{ne: ne, argo: argo, name: "shop-" + ne.NS, apps: dyn.Resource(applicationResource).Namespace(platform.ArgoCDNamespace)}
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": a.name, "namespace": platform.ArgoCDNamespace},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": "file://" + repo.dir, "targetRevision": "main", "path": "app", "directory": map[string]any{"recurse": true}},
			"destination": map[string]any{"server": platform.InClusterServer, "namespace": ne.NS},
			"syncPolicy": map[string]any{
				"automated": map[string]any{"prune": false, "selfHeal": false},
				"retry":     argoRetry,
			},
		},
	}}
	_, err = a.apps.Create(ne.T.Context(), app, metav1.CreateOptions{})
	require.NoError(ne.T, err)
	ne.T.Cleanup(func() { _ = a.apps.Delete(context.Background(), a.name, metav1.DeleteOptions{}) })
	return a
}

// argoRetry is the Applications' retry: 2 retries, 2 s apart (Argo CD's
// default under automated sync is 5, 5 s doubling).
var argoRetry = map[string]any{"limit": int64(2), "backoff": map[string]any{"duration": "2s", "factor": int64(1), "maxDuration": "2s"}}

// refresh asks Argo CD to compare with the repository now, as a git
// webhook would (instead of its 3-minute poll).
func (a *argoApp) refresh() {
	a.ne.T.Helper()
	patch := []byte(`{"metadata":{"annotations":{"argocd.argoproj.io/refresh":"normal"}}}`)
	_, err := a.apps.Patch(a.ne.T.Context(), a.name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(a.ne.T, err)
}

// sync requests a sync of revision, as argocd-server does for `argocd app
// sync`: the Application's operation field, initiated by user (which
// waitOperation finds it by).
func (a *argoApp) sync(revision, user string) {
	a.ne.T.Helper()
	op := map[string]any{"operation": map[string]any{"initiatedBy": map[string]any{"username": user},
		"sync": map[string]any{"revision": revision}, "retry": argoRetry}}
	b, err := json.Marshal(op)
	require.NoError(a.ne.T, err)
	_, err = a.apps.Patch(a.ne.T.Context(), a.name, types.MergePatchType, b, metav1.PatchOptions{})
	require.NoError(a.ne.T, err)
}

// waitCompared waits (at most limit) until Argo CD compared the
// Application with revision and returns the sync status it found
// (Synced, OutOfSync). Automated sync decides in the same reconcile.
func (a *argoApp) waitCompared(revision string, limit time.Duration) string {
	t := a.ne.T
	t.Helper()
	var status string
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, limit, true, func(ctx context.Context) (bool, error) {
		app, err := a.apps.Get(ctx, a.name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		rev, _, _ := unstructured.NestedString(app.Object, "status", "sync", "revision")
		status, _, _ = unstructured.NestedString(app.Object, "status", "sync", "status")
		_, refreshing := app.GetAnnotations()["argocd.argoproj.io/refresh"]
		return rev == revision && !refreshing, nil
	})
	require.NoError(t, err, "Argo CD did not compare %s within %s:\n%s", revision, limit, a.argo.LogTails(15))
	return status
}

// operation is what the Application's status says of its last sync.
type operation struct {
	Phase, Message, Revision, User string
	Automated                      bool
	RetryCount                     int64
	Status                         map[string]any
}

func (a *argoApp) operation(ctx context.Context) (operation, error) {
	app, err := a.apps.Get(ctx, a.name, metav1.GetOptions{})
	if err != nil {
		return operation{}, err
	}
	var op operation
	op.Phase, _, _ = unstructured.NestedString(app.Object, "status", "operationState", "phase")
	op.Message, _, _ = unstructured.NestedString(app.Object, "status", "operationState", "message")
	op.Revision, _, _ = unstructured.NestedString(app.Object, "status", "operationState", "syncResult", "revision")
	op.User, _, _ = unstructured.NestedString(app.Object, "status", "operationState", "operation", "initiatedBy", "username")
	op.Automated, _, _ = unstructured.NestedBool(app.Object, "status", "operationState", "operation", "initiatedBy", "automated")
	op.RetryCount, _, _ = unstructured.NestedInt64(app.Object, "status", "operationState", "retryCount")
	op.Status, _, _ = unstructured.NestedMap(app.Object, "status")
	return op, nil
}

// waitOperation waits (at most limit) for the sync of revision that user
// requested (sync), or automated sync started when user is "", to end, and
// returns how it ended.
func (a *argoApp) waitOperation(revision, user string, limit time.Duration) operation {
	t := a.ne.T
	t.Helper()
	var op operation
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, limit, true, func(ctx context.Context) (bool, error) {
		if err := a.argo.Exited(); err != nil {
			return false, err
		}
		var err error
		if op, err = a.operation(ctx); err != nil {
			return false, nil
		}
		ended := op.Phase == "Succeeded" || op.Phase == "Failed" || op.Phase == "Error"
		return ended && op.Revision == revision && op.User == user && op.Automated == (user == ""), nil
	})
	if err != nil {
		st, _ := json.Marshal(op.Status)
		t.Fatalf("no sync of %s ended within %s: %v\nstatus %s\n%s\nhook pods:\n%s", revision, limit, err, st, a.argo.LogTails(15), a.ne.HookPodLogs())
	}
	return op
}

// kubeEvent is one event of the API server's watch history.
type kubeEvent struct {
	Kind, Name, UID string
	Type            watch.EventType
	RV              int64
	Complete        bool // a Job with condition Complete
	Failed          bool // a Job with condition Failed
}

// history records the watch events of the namespace's Secrets, Jobs,
// StatefulSets and Pods from when it starts until stop. Their
// resourceVersions come from one etcd: their order is the order the API
// server wrote them in.
type history struct {
	mu     sync.Mutex
	events []kubeEvent
	stops  []func()
}

func watchHistory(ne *nodeEnv) *history {
	ne.T.Helper()
	c, ctx := ne.Kube.Client(), ne.T.Context()
	h := &history{}
	watches := []func() (watch.Interface, error){
		func() (watch.Interface, error) { return c.CoreV1().Secrets(ne.NS).Watch(ctx, metav1.ListOptions{}) },
		func() (watch.Interface, error) { return c.BatchV1().Jobs(ne.NS).Watch(ctx, metav1.ListOptions{}) },
		func() (watch.Interface, error) {
			return c.AppsV1().StatefulSets(ne.NS).Watch(ctx, metav1.ListOptions{})
		},
		func() (watch.Interface, error) { return c.CoreV1().Pods(ne.NS).Watch(ctx, metav1.ListOptions{}) },
	}
	for _, start := range watches {
		w, err := start()
		require.NoError(ne.T, err)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ev := range w.ResultChan() {
				h.record(ev)
			}
		}()
		h.stops = append(h.stops, func() { w.Stop(); <-done })
	}
	ne.T.Cleanup(h.stop)
	return h
}

func (h *history) record(ev watch.Event) {
	if ev.Type == watch.Bookmark || ev.Type == watch.Error {
		return
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return
	}
	rv, _ := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
	e := kubeEvent{Name: m.GetName(), UID: string(m.GetUID()), Type: ev.Type, RV: rv}
	switch o := ev.Object.(type) {
	case *corev1.Secret:
		e.Kind = "Secret"
	case *corev1.Pod:
		e.Kind = "Pod"
	case *batchv1.Job:
		e.Kind = "Job"
		for _, c := range o.Status.Conditions {
			e.Complete = e.Complete || (c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue)
			e.Failed = e.Failed || (c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue)
		}
	default:
		e.Kind = "StatefulSet"
	}
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
}

func (h *history) stop() {
	for _, s := range h.stops {
		s()
	}
	h.stops = nil
}

// of returns the events of one object name of kind, in order.
func (h *history) of(kind, name string) []kubeEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []kubeEvent
	for _, e := range h.events {
		if e.Kind == kind && e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// writes counts the ADDED and MODIFIED events of a Secret.
func (h *history) writes(secret string) int {
	n := 0
	for _, e := range h.of("Secret", secret) {
		if e.Type == watch.Added || e.Type == watch.Modified {
			n++
		}
	}
	return n
}

// uids lists the UIDs an object name had, in order.
func (h *history) uids(kind, name string) []string {
	var out []string
	for _, e := range h.of(kind, name) {
		if len(out) == 0 || out[len(out)-1] != e.UID {
			out = append(out, e.UID)
		}
	}
	return out
}

// first is the first event of kind/name that match accepts, or fails.
func (h *history) first(t *testing.T, kind, name string, match func(kubeEvent) bool) kubeEvent {
	t.Helper()
	for _, e := range h.of(kind, name) {
		if match(e) {
			return e
		}
	}
	t.Fatalf("no matching event of %s %s in %v", kind, name, h.of(kind, name))
	return kubeEvent{}
}

// jobsNamed lists the names of the Jobs of the history whose name starts
// with prefix, in order of first appearance.
func (h *history) jobsNamed(prefix string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, e := range h.events {
		if e.Kind == "Job" && strings.HasPrefix(e.Name, prefix) && !seen[e.Name] {
			seen[e.Name] = true
			out = append(out, e.Name)
		}
	}
	return out
}

func (h *history) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, e := range h.events {
		fmt.Fprintf(&b, "%d %s %s %s %s complete=%v failed=%v\n", e.RV, e.Type, e.Kind, e.Name, e.UID, e.Complete, e.Failed)
	}
	return b.String()
}
