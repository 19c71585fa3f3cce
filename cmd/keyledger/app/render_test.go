package app

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger"
	"github.com/keyledger/keyledger/workflow/credentials"
)

var update = flag.Bool("update", false, "rewrite golden files")

const renderPlan = `{"apiVersion":"keyledger.dev/v1","kind":"CredentialPlan",
 "metadata":{"requestId":"req-1","mutationId":"mut-1"},
 "spec":{"owner":"shop-orders-cache","namespace":"shop",
   "secrets":[{"name":"shop-orders-cache-app","labels":{"app.kubernetes.io/part-of":"shop"},
               "keys":[{"name":"password","generate":{"length":32,"alphabet":"alphanumeric"}},{"name":"username","value":"app"}]},
              {"name":"shop-bus-users","keys":[{"name":"user","value":"bus"},{"name":"password","generate":{"length":32,"alphabet":"hex"}}]}],
   "adopt":[{"externalSecret":"shop-orders-cache-app","generators":["shop-orders-cache-password"]}],
   "servers":[{"protocol":"valkey","pod":"shop-orders-cache-0","port":6379,"secret":"shop-orders-cache-app","passwordKey":"password"},
              {"protocol":"nats","pod":"shop-bus-0","port":4222,"secret":"shop-bus-users","userKey":"user","passwordKey":"password"}]}}
`

func render(t *testing.T, args ...string) (string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plan.json")
	require.NoError(t, os.WriteFile(path, []byte(renderPlan), 0o644))
	var out, errOut bytes.Buffer
	err := Run(context.Background(), append([]string{"render", "credentials", "--plan", path}, args...), IOStreams{Out: &out, ErrOut: &errOut})
	return out.String(), err
}

func TestRenderCredentialsGolden(t *testing.T) {
	out, err := render(t, "--image", "registry.example/keyledger:v1")
	require.NoError(t, err)
	golden := filepath.Join("testdata", "render-credentials.golden.yaml")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(out), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), out)

	docs := strings.Split(out, "\n---\n")
	require.Len(t, docs, 7, "six hook objects and the sync marker")
	for i, kind := range []string{"ServiceAccount", "Role", "RoleBinding", "ConfigMap", "NetworkPolicy", "Job"} {
		require.Contains(t, docs[i], "kind: "+kind)
		require.Contains(t, docs[i], "argocd.argoproj.io/hook: PreSync")
	}
	var role rbacv1.Role
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[1]), &role))
	require.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"shop-orders-cache-app", "shop-bus-users"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{"external-secrets.io"}, Resources: []string{"externalsecrets"}, ResourceNames: []string{"shop-orders-cache-app", "shop-bus-users"}, Verbs: []string{"get", "delete"}},
		{APIGroups: []string{"generators.external-secrets.io"}, Resources: []string{"passwords"}, ResourceNames: []string{"shop-orders-cache-password"}, Verbs: []string{"get", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"shop-orders-cache-0", "shop-bus-0"}, Verbs: []string{"get", "delete"}},
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, ResourceNames: []string{"shop-orders-cache", "shop-bus"}, Verbs: []string{"get"}},
	}, role.Rules, "exactly the issue's rules, nothing else")
	require.Equal(t, "0", role.Annotations["argocd.argoproj.io/sync-wave"])
	require.Equal(t, "BeforeHookCreation", role.Annotations["argocd.argoproj.io/hook-delete-policy"])

	var job batchv1.Job
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[5]), &job))
	require.Equal(t, credentials.HookJobName("shop-orders-cache", []byte(renderPlan), Version, "registry.example/keyledger:v1"), job.Name)
	require.Regexp(t, `^shop-orders-cache-credentials-[0-9a-f]{8}$`, job.Name)
	require.Equal(t, "1", job.Annotations["argocd.argoproj.io/sync-wave"])
	require.Equal(t, "BeforeHookCreation,HookSucceeded", job.Annotations["argocd.argoproj.io/hook-delete-policy"])
	require.NotNil(t, job.Spec.TTLSecondsAfterFinished)
	pod := job.Spec.Template.Spec
	require.True(t, *pod.SecurityContext.RunAsNonRoot)
	c := pod.Containers[0].SecurityContext
	require.True(t, *c.ReadOnlyRootFilesystem)
	require.False(t, *c.AllowPrivilegeEscalation)
	require.Equal(t, "ALL", string(c.Capabilities.Drop[0]))
}

func TestRenderAndApplyHookUsage(t *testing.T) {
	t.Parallel()
	_, err := render(t, "--image", "")
	require.Equal(t, ExitUsage, ExitCode(err), "an empty image")
	_, err = render(t, "--image", "a b")
	require.Equal(t, ExitUsage, ExitCode(err))
	for _, args := range [][]string{{"render"}, {"render", "secrets"}, {"apply-hook"}, {"apply-hook", t.TempDir()}} {
		var out, errOut bytes.Buffer
		err := Run(context.Background(), args, IOStreams{Out: &out, ErrOut: &errOut})
		require.Equal(t, ExitUsage, ExitCode(err), "%v: %v", args, err)
	}
	dir := t.TempDir()
	_, err = render(t, "--image", "img", "--out-dir", dir)
	require.NoError(t, err)
	objs, err := readHook(dir)
	require.NoError(t, err)
	require.Equal(t, "shop", objs.Job.Namespace)
	require.NoError(t, os.Rename(filepath.Join(dir, "2-role.yaml"), filepath.Join(dir, "2-x.yaml")))
	_, err = readHook(dir)
	require.Equal(t, ExitUsage, ExitCode(err))
	require.NoError(t, os.Rename(filepath.Join(dir, "2-x.yaml"), filepath.Join(dir, "2-role.yaml")))
	require.NoError(t, os.Rename(filepath.Join(dir, credentials.SyncFile), filepath.Join(dir, "7-x.yaml")))
	_, err = readHook(dir)
	require.Equal(t, ExitUsage, ExitCode(err), "the sync marker missing")
}

// Argo CD compares only non-hook objects with the cluster: the last object
// render writes is an ordinary ConfigMap (no hook annotation, no secret)
// naming the hook Job, so a change of the plan, the image or keyledger's
// version (each a new Job name) changes an object Argo CD compares, and a
// render that changes none of them writes the same marker.
func TestRenderSyncMarkerNamesTheHookJob(t *testing.T) {
	t.Parallel()
	marker := func(out string) corev1.ConfigMap {
		t.Helper()
		docs := strings.Split(out, "\n---\n")
		require.Len(t, docs, 7)
		var cm corev1.ConfigMap
		require.NoError(t, yaml.UnmarshalStrict([]byte(docs[6]), &cm))
		return cm
	}
	out, err := render(t, "--image", "img:1")
	require.NoError(t, err)
	job, _ := renderedHookJob(t, out)
	cm := marker(out)
	require.Equal(t, "ConfigMap", cm.Kind)
	require.Equal(t, "shop-orders-cache-credentials-sync", cm.Name)
	require.Equal(t, job.Namespace, cm.Namespace)
	require.Empty(t, cm.Annotations, "not a hook: Argo CD compares it")
	require.Equal(t, map[string]string{"job": job.Name}, cm.Data, "the Job's name and nothing else")
	again, err := render(t, "--image", "img:1")
	require.NoError(t, err)
	require.Equal(t, cm, marker(again), "the same render, the same marker")
	other, err := render(t, "--image", "img:2")
	require.NoError(t, err)
	job2, _ := renderedHookJob(t, other)
	require.NotEqual(t, job.Name, job2.Name)
	require.Equal(t, job2.Name, marker(other).Data["job"], "a new image changes the marker")
}

// The Job's container must read the plan as a regular file. A ConfigMap
// volume mounted as a directory holds each key as a symlink into ..data/ on
// a real kubelet, and `run` refuses to open a symlink (exit 64); a subPath
// mount of the one key is a bind mount of the resolved file. The path `run`
// is given must be exactly such a mount, of the ConfigMap key holding the plan.
func TestRenderJobReadsPlanFromSubPathMount(t *testing.T) {
	t.Parallel()
	out, err := render(t, "--image", "img")
	require.NoError(t, err)
	docs := strings.Split(out, "\n---\n")
	var cm corev1.ConfigMap
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[3]), &cm))
	var job batchv1.Job
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[5]), &job))
	pod := job.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	require.Equal(t, []string{"run", "/etc/keyledger/plan.json"}, c.Args)
	var mount *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == c.Args[1] {
			mount = &c.VolumeMounts[i]
		}
	}
	require.NotNil(t, mount, "the plan path is a mount point of its own, not a file inside a mounted directory")
	require.True(t, mount.ReadOnly)
	var vol *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == mount.Name {
			vol = &pod.Volumes[i]
		}
	}
	require.NotNil(t, vol)
	require.NotNil(t, vol.ConfigMap)
	require.Equal(t, cm.Name, vol.ConfigMap.Name)
	// The subPath is the path the volume gives the plan key.
	path := mount.SubPath
	require.NotEmpty(t, path, "a subPath mount, so the container sees a regular file")
	if len(vol.ConfigMap.Items) > 0 {
		found := false
		for _, it := range vol.ConfigMap.Items {
			if it.Path == path {
				require.Equal(t, "plan.json", it.Key)
				found = true
			}
		}
		require.True(t, found, "the subPath is one of the volume's items")
	}
	require.Contains(t, cm.Data, "plan.json")
	require.Equal(t, renderPlan, cm.Data["plan.json"])
}

// Without --image, the Job runs the versions table's image.
func TestRenderDefaultImageIsTheVersionsTables(t *testing.T) {
	t.Parallel()
	out, err := render(t)
	require.NoError(t, err)
	docs := strings.Split(out, "\n---\n")
	var job batchv1.Job
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[5]), &job))
	require.NotEmpty(t, keyledger.Image())
	require.Equal(t, keyledger.Image(), job.Spec.Template.Spec.Containers[0].Image)
	require.Equal(t, credentials.HookJobName("shop-orders-cache", []byte(renderPlan), Version, keyledger.Image()), job.Name)
}

// The hook's Role reads Secrets of the plan's namespace: render refuses a
// plan whose namespace is the journal's (where the owner's and
// CloudNativePG's Secrets are), and names the flag; the journal flags must
// be names.
func TestRenderCredentialsRefusesTheJournalNamespace(t *testing.T) {
	t.Parallel()
	_, err := render(t, "--image", "img", "--journal-namespace", "shop")
	require.Equal(t, ExitUsage, ExitCode(err), "%v", err)
	require.Contains(t, err.Error(), "--journal-namespace")
	for _, flag := range []string{"--journal-namespace", "--journal-credentials", "--journal-ca", "--journal-pooler"} {
		_, err := render(t, "--image", "img", flag, "Not_A_Name")
		require.Equal(t, ExitUsage, ExitCode(err), "%s: %v", flag, err)
		require.Contains(t, err.Error(), flag)
	}
	out, err := render(t, "--image", "img", "--journal-namespace", "platform-journal", "--journal-credentials", "shop-journal", "--journal-ca", "shop-journal-ca")
	require.NoError(t, err)
	job, env := renderedHookJob(t, out)
	require.Equal(t, "keyledger-journal-rw.platform-journal.svc", env["PGHOST"].Value, "the -rw Service of the journal's namespace")
	require.Equal(t, "shop-journal", env["PGUSER"].ValueFrom.SecretKeyRef.Name)
	require.Equal(t, "shop-journal", env["PGPASSWORD"].ValueFrom.SecretKeyRef.Name)
	require.Contains(t, env["KEYLEDGER_DATABASE_URL"].Value, "sslmode=verify-full&sslrootcert=/etc/keyledger/journal-ca/ca.crt")
	require.NotContains(t, env["KEYLEDGER_DATABASE_URL"].Value, "@", "the URL holds no login")
	var ca *corev1.Volume
	for i, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == "journal-ca" {
			ca = &job.Spec.Template.Spec.Volumes[i]
		}
	}
	require.NotNil(t, ca)
	require.NotNil(t, ca.ConfigMap, "the CA's public certificate, from a ConfigMap of the plan's namespace")
	require.Equal(t, "shop-journal-ca", ca.ConfigMap.Name)
}

// --journal-pooler: the hook connects through the Pooler's Service of the
// journal's namespace; the rest of the connection (role, CA, verify-full)
// is the same.
func TestRenderCredentialsThroughThePooler(t *testing.T) {
	t.Parallel()
	out, err := render(t, "--image", "img", "--journal-namespace", "platform-journal", "--journal-pooler", "keyledger-journal-pooler")
	require.NoError(t, err)
	_, env := renderedHookJob(t, out)
	require.Equal(t, "keyledger-journal-pooler.platform-journal.svc", env["PGHOST"].Value)
	require.Equal(t, "keyledger-journal-credentials", env["PGUSER"].ValueFrom.SecretKeyRef.Name)
	require.Contains(t, env["KEYLEDGER_DATABASE_URL"].Value, "sslmode=verify-full&sslrootcert=/etc/keyledger/journal-ca/ca.crt")
}

// renderedHookJob decodes the Job (the sixth object) of render's output
// and its main container's environment by name.
func renderedHookJob(t *testing.T, out string) (batchv1.Job, map[string]corev1.EnvVar) {
	t.Helper()
	docs := strings.Split(out, "\n---\n")
	require.Len(t, docs, 7)
	var job batchv1.Job
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[5]), &job))
	env := map[string]corev1.EnvVar{}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e
	}
	return job, env
}
