package integration

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/workflow/credentials"
)

// argoSuite is the shared state of TestIntegrationNodeArgoCD's steps: one
// node namespace joined to the journal, one Argo CD, one repository and
// Application, and the watch history of the namespace since before the
// first sync.
type argoSuite struct {
	ne      *nodeEnv
	argo    *platform.ArgoCD
	repo    *gitRepo
	app     *argoApp
	history *history
	plan    map[string]any
	image   string // the hook's image from hookOnlyChange on
	// commits by step, and the hook Job names seen.
	first, imageChange, failing  string
	firstJob, imageJob, stuckJob string
}

const (
	argoSecret   = "shop-orders-cache-app"
	argoWorkload = "shop-orders-cache"
	argoShopJobs = "shop-orders-cache-credentials-"
	argoStuck    = "stuck-cache"
)

// The credentials hook synced by a real Argo CD (the application controller
// and repo-server of ARGOCD_VERSION) on the test node: `keyledger render
// credentials` output committed to a git repository beside a Valkey
// StatefulSet reading the generated Secret, an Application with automated
// sync, the hook Job running as a pod against the real journal. Secret
// writes, Job completions and the workload's creation are read from the API
// server's watch history, started before the first sync.
func TestIntegrationNodeArgoCD(t *testing.T) {
	ne := setupNode(t)
	if reason := platform.ArgoCDSkipReason(); reason != "" {
		t.Skip(reason)
	}
	ne.JoinJournal()
	apiIP, apiPort := ne.APIEndpoint()
	ne.ApplyAll(suite.RenderCredentialsFence(t, ne.NS, apiIP, apiPort))
	ne.ServersImage()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	argo, err := platform.StartArgoCD(ctx, ne.Kube, ne.Node)
	require.NoError(t, err)
	t.Cleanup(func() { _ = argo.Stop() })
	s := &argoSuite{ne: ne, argo: argo, repo: newGitRepo(t), history: watchHistory(ne),
		plan: suite.CredentialPlan(ne.NS, "mut-argocd-shop", []suite.PlanSecret{suite.StandardSecret(argoSecret)})}
	for _, step := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"first sync creates the Secret, then the workload", s.firstSync},
		{"second sync writes nothing", s.secondSync},
		{"a commit changing only the hook image syncs", s.hookOnlyChange},
		{"a failing hook fails the sync and its retries write nothing", s.failingHook},
		{"BeforeHookCreation replaces the leftover failed Job", s.afterFix},
		{"incident 316 is repaired through a sync", s.incident316},
	} {
		if !t.Run(step.name, step.run) {
			t.Logf("watch history:\n%s", s.history)
			t.FailNow()
		}
	}
	suite.RequireNoValues(t, argo.LogTails(1<<20), ne.SecretValues(argoSecret, argoStuck+"-app"))
}

// firstSync: the Application's first automated sync runs the hook (Secret
// created once), applies the workload only after the Job completed, deletes
// the Job (HookSucceeded) and applies the sync marker naming the Job; the
// workload's server accepts the generated password.
func (s *argoSuite) firstSync(t *testing.T) {
	ne := s.ne
	s.repo.putHook("shop", ne.RenderHook(s.plan))
	s.repo.putObject("workload", valkeyObject(ne, argoWorkload, argoSecret))
	s.first = s.repo.commit("shop: the credentials hook and the cache")
	s.app = argoApplication(ne, s.argo, s.repo)
	op := s.app.waitOperation(s.first, "", 5*time.Minute)
	require.Equal(t, "Succeeded", op.Phase, op.Message)

	s.firstJob = s.markerJob(t)
	require.Equal(t, []string{s.firstJob}, s.history.jobsNamed(argoShopJobs))
	require.Equal(t, 1, s.history.writes(argoSecret), "the Secret is written once:\n%s", s.history)
	done := s.history.first(t, "Job", s.firstJob, func(e kubeEvent) bool { return e.Complete })
	created := s.history.first(t, "StatefulSet", argoWorkload, func(e kubeEvent) bool { return e.Type == watch.Added })
	require.Less(t, done.RV, created.RV, "the workload is created after the hook Job completed")
	s.waitJobGone(t, s.firstJob)
	ip := ne.WaitPodReady(argoWorkload+"-0", 90*time.Second)
	require.Equal(t, "+OK", valkeyAuth(t, net.JoinHostPort(ip, "6379"), ne.GetSecret(argoSecret).Data["password"]))
}

// secondSync: a sync of the same commit runs the hook Job again (the same
// name) and writes no Secret; the server's pod is not restarted.
func (s *argoSuite) secondSync(t *testing.T) {
	s.app.sync(s.first, "second-sync")
	op := s.app.waitOperation(s.first, "second-sync", 4*time.Minute)
	require.Equal(t, "Succeeded", op.Phase, op.Message)
	require.Equal(t, 2, s.countAdded("Job", s.firstJob), "the hook Job ran again")
	require.Equal(t, 1, s.history.writes(argoSecret), "no Secret written by the second sync:\n%s", s.history)
	require.Len(t, s.history.uids("Pod", argoWorkload+"-0"), 1, "the server is not restarted")
	s.waitJobGone(t, s.firstJob)
}

// hookOnlyChange: a commit that changes only the hook's image (a new tag of
// the same image, imported into the node) is a new Job name and a new sync
// marker: the Application goes out of sync and automated sync runs the new
// Job, which writes nothing. First the Job alone is committed, as render
// wrote it before the marker: Argo CD compares it, finds the Application
// Synced, and starts no sync.
func (s *argoSuite) hookOnlyChange(t *testing.T) {
	ne := s.ne
	s.image = suite.KeyledgerTestImage + "-argocd"
	out, err := exec.Command("docker", "tag", suite.NodeImage(), s.image).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, ne.Node.ImportImages(t.Context(), s.image))
	dir := ne.RenderHook(s.plan, "--image", s.image)
	s.repo.putFile("shop", dir, credentials.HookFiles[len(credentials.HookFiles)-1])
	jobOnly := s.repo.commit("shop: the hook's new image, without the marker")
	s.app.refresh() // what a git webhook does; Argo CD polls every 3 minutes otherwise
	status := s.app.waitCompared(jobOnly, 2*time.Minute)
	require.Equal(t, "Synced", status, "hooks are not compared")
	last, err := s.app.operation(t.Context())
	require.NoError(t, err)
	require.Equal(t, "second-sync", last.User, "no sync started after the second: %s", last.Revision)
	require.Equal(t, []string{s.firstJob}, s.history.jobsNamed(argoShopJobs), "no sync ran the new Job")

	s.repo.putHook("shop", dir)
	s.imageChange = s.repo.commit("shop: the hook's new image")
	changed := strings.Fields(s.repo.git("diff", "--name-only", s.first, s.imageChange))
	require.Equal(t, []string{"app/shop/6-job.yaml", "app/shop/" + credentials.SyncFile}, changed, "only the hook Job and its marker change")
	s.app.refresh()
	op := s.app.waitOperation(s.imageChange, "", 4*time.Minute)
	require.Equal(t, "Succeeded", op.Phase, op.Message)
	s.imageJob = s.markerJob(t)
	require.NotEqual(t, s.firstJob, s.imageJob)
	require.Equal(t, []string{s.firstJob, s.imageJob}, s.history.jobsNamed(argoShopJobs))
	s.history.first(t, "Job", s.imageJob, func(e kubeEvent) bool { return e.Complete })
	require.Equal(t, 1, s.history.writes(argoSecret), "the new Job writes no Secret")
	s.waitJobGone(t, s.imageJob)
}

// failingHook: a commit adds a second plan whose server never accepts its
// stored password (its pod runs a password of its own) and a new workload.
// The hook restarts the server once, exits 2 server-still-refuses, and the
// sync fails; Argo CD retries it twice, each retry re-running the whole
// PreSync phase: three runs of the Job, one restart, no Secret write after
// the first run (which labels the hand-written Secret as planned). The
// new workload is not created; the last failed Job is there to read, its
// reason in its pod's termination message.
func (s *argoSuite) failingHook(t *testing.T) {
	ne := s.ne
	c := ne.Kube.Client()
	_, err := c.CoreV1().Secrets(ne.NS).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: argoStuck + "-app"},
		Data: map[string][]byte{"password": []byte(suite.RandomHex(t, 16)), "username": []byte("app")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	ne.ServerStatefulSet(argoStuck, argoStuck+"-app", 6379, "redis-server", "--port", "6379",
		"--requirepass", "not-what-the-secret-holds-"+suite.RandomHex(t, 16), "--save", "", "--appendonly", "no")
	ne.WaitPodReady(argoStuck+"-0", 90*time.Second)
	stuckWrites := s.history.writes(argoStuck + "-app")
	shopRuns := s.countAdded("Job", s.imageJob)

	plan := suite.CredentialPlan(ne.NS, "mut-argocd-stuck", []suite.PlanSecret{suite.StandardSecret(argoStuck + "-app")}, func(spec map[string]any) {
		spec["owner"] = argoStuck
		spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": argoStuck + "-0", "port": 6379, "secret": argoStuck + "-app", "passwordKey": "password"}}
		spec["repair"] = map[string]any{"restartOnUnproven": true} // the Secret was written by hand: unproven
	})
	dir := ne.RenderHook(plan)
	s.stuckJob = jobNameIn(t, dir)
	s.repo.putHook("stuck", dir)
	s.repo.putObject("sessions", valkeyObject(ne, "shop-sessions", argoSecret))
	s.failing = s.repo.commit("stuck: a second plan and the sessions cache")
	s.app.refresh()
	op := s.app.waitOperation(s.failing, "", 6*time.Minute)
	require.Equal(t, "Failed", op.Phase, op.Message)
	require.EqualValues(t, 2, op.RetryCount, "Argo CD retried the sync twice: %s", op.Message)

	require.Equal(t, 3, s.countAdded("Job", s.stuckJob), "each retry re-runs the PreSync phase:\n%s", s.history)
	require.Equal(t, shopRuns+3, s.countAdded("Job", s.imageJob), "the other hook of the phase runs each time too")
	require.Len(t, s.history.uids("Pod", argoStuck+"-0"), 2, "the server was restarted once for one cause:\n%s", s.history)
	// The first run labels the hand-written Secret as planned (one write);
	// the retries write nothing.
	firstEnd := s.history.first(t, "Job", s.stuckJob, func(e kubeEvent) bool { return e.Failed })
	require.LessOrEqual(t, s.history.writes(argoStuck+"-app"), stuckWrites+1, "at most the first run writes:\n%s", s.history)
	for _, e := range s.history.of("Secret", argoStuck+"-app") {
		require.Less(t, e.RV, firstEnd.RV, "no Secret write after the first run ended:\n%s", s.history)
	}
	require.Equal(t, 1, s.history.writes(argoSecret))
	require.Empty(t, s.history.of("StatefulSet", "shop-sessions"), "the new workload is not applied")

	end := ne.WaitJob(s.stuckJob, 30*time.Second)
	require.True(t, end.Failed, "the failed Job is kept for reading")
	term := end.Pod.Status.ContainerStatuses[0].State.Terminated
	require.NotNil(t, term)
	require.EqualValues(t, 2, term.ExitCode)
	require.Contains(t, term.Message, "server-still-refuses", "the reason is in the termination message")
}

// afterFix: once the server reads its Secret (the operator's fix), a sync
// of the same commit deletes the leftover failed Job before creating the
// one of the same name (BeforeHookCreation); the new Job succeeds without
// another restart and the new workload is applied.
func (s *argoSuite) afterFix(t *testing.T) {
	ne := s.ne
	c := ne.Kube.Client()
	failed, err := c.BatchV1().Jobs(ne.NS).Get(t.Context(), s.stuckJob, metav1.GetOptions{})
	require.NoError(t, err)
	set, err := c.AppsV1().StatefulSets(ne.NS).Get(t.Context(), argoStuck, metav1.GetOptions{})
	require.NoError(t, err)
	set.Spec.Template.Spec.Containers[0].Command = []string{"redis-server", "--port", "6379", "--requirepass", "$(PASSWORD)", "--save", "", "--appendonly", "no"}
	_, err = c.AppsV1().StatefulSets(ne.NS).Update(t.Context(), set, metav1.UpdateOptions{})
	require.NoError(t, err)
	before := len(s.history.uids("Pod", argoStuck+"-0"))
	require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return len(s.history.uids("Pod", argoStuck+"-0")) > before, nil
	}), "the StatefulSet replaces its pod")
	ne.WaitPodReady(argoStuck+"-0", 90*time.Second)
	restarts := len(s.history.uids("Pod", argoStuck+"-0"))

	s.app.sync(s.failing, "after-fix")
	op := s.app.waitOperation(s.failing, "after-fix", 4*time.Minute)
	require.Equal(t, "Succeeded", op.Phase, op.Message)
	gone := s.history.first(t, "Job", s.stuckJob, func(e kubeEvent) bool { return e.Type == watch.Deleted && e.UID == string(failed.UID) })
	next := s.history.first(t, "Job", s.stuckJob, func(e kubeEvent) bool { return e.Type == watch.Added && e.RV > gone.RV })
	s.history.first(t, "Job", s.stuckJob, func(e kubeEvent) bool { return e.UID == next.UID && e.Complete })
	s.waitJobGone(t, s.stuckJob)
	require.Len(t, s.history.uids("Pod", argoStuck+"-0"), restarts, "no restart: the server accepts")
	_, err = c.AppsV1().StatefulSets(ne.NS).Get(t.Context(), "shop-sessions", metav1.GetOptions{})
	require.NoError(t, err, "the workload is applied once the hook succeeded")
	require.Equal(t, 1, s.history.writes(argoSecret))
}

// incident316: the Application's server runs with a password its Secret
// no longer holds (the Secret rewritten after the server started, as the
// controller in incident 316 did; the value it rewrote was the hook's, so
// the Secret is still proven). A commit adds the server to the shop plan
// (a new Job name and marker); automated sync runs the new Job once, which
// deletes the refusing pod once and probes its replacement; the sync
// succeeds, no Secret is written, the Job is deleted and a client
// authenticates with the Secret's password.
func (s *argoSuite) incident316(t *testing.T) {
	ne, pod := s.ne, argoWorkload+"-0"
	s.rewritePassword(t, pod)
	uids, writes := s.history.uids("Pod", pod), s.history.writes(argoSecret)

	plan := suite.CredentialPlan(ne.NS, "mut-argocd-shop", []suite.PlanSecret{suite.StandardSecret(argoSecret)}, func(spec map[string]any) {
		spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": pod, "port": 6379, "secret": argoSecret, "passwordKey": "password"}}
	})
	s.repo.putHook("shop", ne.RenderHook(plan, "--image", s.image))
	commit := s.repo.commit("shop: the cache's server in the plan")
	s.app.refresh()
	op := s.app.waitOperation(commit, "", 4*time.Minute)
	require.Equal(t, "Succeeded", op.Phase, op.Message)

	job := s.markerJob(t)
	require.NotEqual(t, s.imageJob, job)
	require.Equal(t, 1, s.countAdded("Job", job), "the new Job ran once:\n%s", s.history)
	s.waitJobGone(t, job)
	now := s.history.uids("Pod", pod)
	require.Len(t, now, len(uids)+1, "the server's pod is replaced exactly once:\n%s", s.history)
	require.Equal(t, uids, now[:len(uids)])
	added := s.history.first(t, "Job", job, func(e kubeEvent) bool { return e.Type == watch.Added })
	deleted := s.history.first(t, "Pod", pod, func(e kubeEvent) bool { return e.Type == watch.Deleted && e.UID == uids[len(uids)-1] })
	done := s.history.first(t, "Job", job, func(e kubeEvent) bool { return e.Complete })
	require.Less(t, added.RV, deleted.RV, "the pod is deleted while the hook Job runs")
	require.Less(t, deleted.RV, done.RV, "the pod is deleted while the hook Job runs")
	require.Equal(t, writes, s.history.writes(argoSecret), "no Secret written:\n%s", s.history)
	ip := ne.WaitPodReady(pod, 90*time.Second)
	require.Equal(t, "+OK", valkeyAuth(t, net.JoinHostPort(ip, "6379"), ne.GetSecret(argoSecret).Data["password"]))
}

// rewritePassword rewrites argoSecret's password after pod started and
// checks that pod's server refuses the new one (incident 316).
func (s *argoSuite) rewritePassword(t *testing.T, pod string) {
	t.Helper()
	ne := s.ne
	ip := ne.WaitPodReady(pod, 90*time.Second)
	secret := ne.GetSecret(argoSecret)
	secret.Data["password"] = []byte(suite.RandomHex(t, 16))
	_, err := ne.Kube.Client().CoreV1().Secrets(ne.NS).Update(t.Context(), secret, metav1.UpdateOptions{})
	require.NoError(t, err)
	answer := valkeyAuth(t, net.JoinHostPort(ip, "6379"), secret.Data["password"])
	require.True(t, strings.HasPrefix(answer, "-WRONGPASS"), "the server refuses its Secret's password: %s", answer)
}

// markerJob is the Job the sync marker in the cluster names.
func (s *argoSuite) markerJob(t *testing.T) string {
	t.Helper()
	cm, err := s.ne.Kube.Client().CoreV1().ConfigMaps(s.ne.NS).Get(t.Context(), "shop-orders-cache-credentials-sync", metav1.GetOptions{})
	require.NoError(t, err, "the sync marker is applied")
	require.True(t, strings.HasPrefix(cm.Data["job"], argoShopJobs), cm.Data)
	return cm.Data["job"]
}

func (s *argoSuite) countAdded(kind, name string) int {
	n := 0
	for _, e := range s.history.of(kind, name) {
		if e.Type == watch.Added {
			n++
		}
	}
	return n
}

// waitJobGone waits (30 s) until the hook Job was deleted (HookSucceeded).
func (s *argoSuite) waitJobGone(t *testing.T, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := s.ne.Kube.Client().BatchV1().Jobs(s.ne.NS).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "the succeeded hook Job %s is deleted", name)
}

// jobNameIn reads the Job's name from a rendered hook directory.
func jobNameIn(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, credentials.HookFiles[len(credentials.HookFiles)-1]))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "  name: "); ok {
			return v
		}
	}
	t.Fatalf("no name in the rendered Job")
	return ""
}

// valkeyObject is a StatefulSet running one redis-server whose password is
// secret's key password, as a manifest committed beside the hook.
func valkeyObject(ne *nodeEnv, name, secret string) map[string]any {
	ne.T.Helper()
	labels := map[string]any{"app": name}
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": name, "namespace": ne.NS},
		"spec": map[string]any{"replicas": 1, "serviceName": name, "selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{
				"automountServiceAccountToken": false, "terminationGracePeriodSeconds": 1,
				"containers": []any{map[string]any{"name": "server", "image": ne.ServersImage(), "imagePullPolicy": "Never",
					"command": []any{"redis-server", "--port", "6379", "--requirepass", "$(PASSWORD)", "--save", "", "--appendonly", "no"},
					"env":     []any{map[string]any{"name": "PASSWORD", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": secret, "key": "password"}}}},
				}},
			}}},
	}
}
