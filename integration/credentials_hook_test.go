package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/workflow/credentials"
)

// The rendered hook's identity on the real control plane: the rendered
// ServiceAccount, Role and RoleBinding apply, a run as that ServiceAccount
// with the plan the rendered ConfigMap holds completes (and the next run,
// as the next sync would start it, converges writing nothing), and the Role
// allows exactly the run. The Job itself runs in a pod on the real node
// (TestIntegrationNodeCredentialsHook); nothing here pretends to be a
// kubelet.
func TestIntegrationCredentialsRenderedHook(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	plan := suite.CredentialPlan(e.NS, "mut-hook", []suite.PlanSecret{suite.StandardSecret("shop-orders-cache-app"), suite.StandardSecret("shop-bus-users")})
	planPath := e.WriteCommand("plan.json", plan)
	dir := filepath.Join(e.Dir, "hook")
	r := e.Keyledger([]string{"render", "credentials", "--plan", planPath, "--image", "keyledger:test", "--out-dir", dir})
	require.Equal(t, 0, r.Code, r.Stderr)

	var saName, fromConfigMap string
	a := e.Applier()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, entry := range entries {
		data, err := os.ReadFile(filepath.Join(dir, entry.Name()))
		require.NoError(t, err)
		obj := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal(data, &obj.Object), entry.Name())
		switch obj.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding":
			_, err := a.Apply(ctx, obj, e.NS, false)
			require.NoError(t, err, "applying the rendered %s", obj.GetKind())
			if obj.GetKind() == "ServiceAccount" {
				saName = obj.GetName()
			}
		case "ConfigMap":
			if entry.Name() == credentials.SyncFile { // the sync marker: the Job's name, no plan
				job, _, _ := unstructured.NestedString(obj.Object, "data", "job")
				require.True(t, strings.HasPrefix(job, "shop-orders-cache-credentials-"), job)
				continue
			}
			planJSON, ok, err := unstructured.NestedString(obj.Object, "data", "plan.json")
			require.NoError(t, err)
			require.True(t, ok, "the rendered ConfigMap holds plan.json")
			fromConfigMap = filepath.Join(e.Dir, "from-configmap.json")
			require.NoError(t, os.WriteFile(fromConfigMap, []byte(planJSON), 0o644))
		}
	}
	require.Equal(t, "shop-orders-cache-credentials", saName)
	require.NotEmpty(t, fromConfigMap)
	cfg, err := e.Kube.ServiceAccountConfig(ctx, e.NS, saName, 600)
	require.NoError(t, err)
	kubeconfig, err := e.Kube.KubeconfigForConfig(cfg, t.TempDir())
	require.NoError(t, err)
	for i, want := range []string{"completed", "existing"} {
		rv := ""
		if i > 0 {
			rv = e.GetSecret("shop-orders-cache-app").ResourceVersion
		}
		r := e.Keyledger([]string{"run", fromConfigMap}, suite.AsKubeconfig(kubeconfig))
		require.Equal(t, 0, r.Code, "the run under the rendered Role succeeds: %s %s", r.Stdout, r.Stderr)
		require.Equal(t, want, suite.Outcome(t, r)["outcome"])
		require.Equal(t, fmt.Sprintf("mut-hook:run-%d", i+1), suite.Outcome(t, r)["run"])
		if i > 0 {
			require.Equal(t, rv, e.GetSecret("shop-orders-cache-app").ResourceVersion, "the next run writes nothing")
		}
	}

	// What the rendered Role allows, asked as its ServiceAccount (what
	// `kubectl auth can-i --as` would answer).
	sa, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	canI := func(verb, resource, name string) bool {
		t.Helper()
		rev, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: e.NS, Verb: verb, Resource: resource, Name: name}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		return rev.Status.Allowed
	}
	require.True(t, canI("get", "secrets", "shop-orders-cache-app"))
	require.True(t, canI("patch", "secrets", "shop-bus-users"))
	require.True(t, canI("create", "secrets", ""))
	require.False(t, canI("get", "secrets", "another-secret"), "cannot read another Secret")
	require.False(t, canI("update", "secrets", "shop-orders-cache-app"), "cannot update")
	require.False(t, canI("list", "secrets", ""), "cannot list")
	require.False(t, canI("watch", "secrets", ""))
	require.False(t, canI("delete", "secrets", "shop-orders-cache-app"))
	// And really: the API server refuses the read.
	_, err = sa.CoreV1().Secrets(e.NS).Get(ctx, "another-secret", metav1.GetOptions{})
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "forbidden"), "%v", err)

	// A run under an identity with one right more (list) stops with 77
	// before the journal is opened.
	wider := append(rulesOf(t, dir), rbacWider()...)
	r = e.Keyledger([]string{"run", planPath}, suite.AsKubeconfig(e.ServiceAccountKubeconfig("wider", wider)))
	require.Equal(t, 77, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Contains(t, suite.Outcome(t, r)["error"], "list secrets")
}

// The keyledger binary renders, without --image, the image of the versions
// table's KEYLEDGER_IMAGE row: the tag `make image` builds.
func TestIntegrationCredentialsRenderDefaultImage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	want, err := platform.Version("KEYLEDGER_IMAGE")
	require.NoError(t, err)
	plan := suite.CredentialPlan(e.NS, "mut-image", []suite.PlanSecret{suite.StandardSecret("shop-orders-cache-app")})
	dir := filepath.Join(e.Dir, "hook")
	r := e.Keyledger([]string{"render", "credentials", "--plan", e.WriteCommand("plan.json", plan), "--out-dir", dir})
	require.Equal(t, 0, r.Code, r.Stderr)
	b, err := os.ReadFile(filepath.Join(dir, "6-job.yaml"))
	require.NoError(t, err)
	var job batchv1.Job
	require.NoError(t, yaml.UnmarshalStrict(b, &job))
	require.Equal(t, want, job.Spec.Template.Spec.Containers[0].Image)
	make, err := os.ReadFile(filepath.Join(platform.RepoRoot(), "Makefile"))
	require.NoError(t, err)
	require.Contains(t, string(make), "IMAGE=$(KEYLEDGER_IMAGE) bash hack/image.sh", "make image builds the same tag")
}

// `keyledger apply-hook` on the real control plane, which runs the Job
// controller but no kubelet: each rendered object replaces the one of its
// name by delete, wait until gone, create (Argo CD's BeforeHookCreation),
// again at the next sync; the wait for a Job no pod ever runs ends at
// --timeout with 75 hook-job-unfinished; an identity without the rights stops
// at the first delete with 77 (kubernetes-forbidden) and changes nothing. The Job succeeding in its
// pod is TestIntegrationNodeCredentialsHook's.
func TestIntegrationCredentialsRenderedHookApplyWithoutKubelet(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, c := t.Context(), e.Kube.Client()
	planPath := e.WriteCommand("plan.json", suite.CredentialPlan(e.NS, "mut-apply", []suite.PlanSecret{suite.StandardSecret("shop-orders-cache-app")}))
	dir := filepath.Join(e.Dir, "hook")
	r := e.Keyledger([]string{"render", "credentials", "--plan", planPath, "--image", "keyledger:test", "--out-dir", dir})
	require.Equal(t, 0, r.Code, r.Stderr)
	b, err := os.ReadFile(filepath.Join(dir, "6-job.yaml"))
	require.NoError(t, err)
	var job batchv1.Job
	require.NoError(t, yaml.UnmarshalStrict(b, &job))
	const name = "shop-orders-cache-credentials"
	// A ConfigMap of the hook's name, as an earlier sync left it.
	stale, err := c.CoreV1().ConfigMaps(e.NS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
		Data: map[string]string{"plan.json": "{}"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	r = e.Keyledger([]string{"apply-hook", dir, "--timeout", "20s"}, suite.AsKubeconfig(e.ServiceAccountKubeconfig("no-rights", nil)))
	// A forbidden request is a permission the identity lacks (exit 77,
	// kubernetes-forbidden), not an unavailable dependency.
	require.Equal(t, 77, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stderr, "deleting serviceaccount/"+name+":")
	require.Contains(t, r.Stderr, "[kubernetes-forbidden, exit 77]")
	cm, err := c.CoreV1().ConfigMaps(e.NS).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, stale.UID, cm.UID, "nothing was replaced")

	uids := func() []types.UID {
		t.Helper()
		var out []types.UID
		for _, get := range []func() (metav1.Object, error){
			func() (metav1.Object, error) {
				return c.CoreV1().ServiceAccounts(e.NS).Get(ctx, name, metav1.GetOptions{})
			},
			func() (metav1.Object, error) { return c.RbacV1().Roles(e.NS).Get(ctx, name, metav1.GetOptions{}) },
			func() (metav1.Object, error) {
				return c.RbacV1().RoleBindings(e.NS).Get(ctx, name, metav1.GetOptions{})
			},
			func() (metav1.Object, error) { return c.CoreV1().ConfigMaps(e.NS).Get(ctx, name, metav1.GetOptions{}) },
			func() (metav1.Object, error) { return c.BatchV1().Jobs(e.NS).Get(ctx, job.Name, metav1.GetOptions{}) },
		} {
			o, err := get()
			require.NoError(t, err)
			out = append(out, o.GetUID())
		}
		return out
	}
	plan, err := os.ReadFile(planPath)
	require.NoError(t, err)
	var before []types.UID
	for sync := range 2 {
		r := e.Keyledger([]string{"apply-hook", dir, "--timeout", "5s"})
		require.Equal(t, 75, r.Code, "sync %d: stdout %s stderr %s", sync, r.Stdout, r.Stderr)
		require.Contains(t, r.Stderr, "[hook-job-unfinished, exit 75]")
		require.Empty(t, r.Stdout, "no success line")
		got := uids()
		if sync == 0 {
			require.NotEqual(t, stale.UID, got[3], "the stale ConfigMap was replaced")
		} else {
			for i := range got {
				require.NotEqual(t, before[i], got[i], "sync %d replaces object %d", sync, i)
			}
		}
		cm, err := c.CoreV1().ConfigMaps(e.NS).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, string(plan), cm.Data["plan.json"])
		before = got
	}
}

// rulesOf reads the rendered Role's rules.
func rulesOf(t *testing.T, dir string) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "2-role.yaml"))
	require.NoError(t, err)
	var role rbacv1.Role
	require.NoError(t, yaml.UnmarshalStrict(b, &role))
	return role.Rules
}

// rbacWider is one right the plan must not have.
func rbacWider() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}}
}
