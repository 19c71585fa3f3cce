package credentials

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

func TestHookJobName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 60)
	plan := []byte("{}")
	name := HookJobName(long, plan, "v1", "img")
	require.Equal(t, strings.Repeat("a", 42)+"-credentials-", name[:55])
	require.Len(t, name, 63)
	require.NotEqual(t, name, HookJobName(long, plan, "v2", "img"), "a new version renames the Job")
	require.NotEqual(t, name, HookJobName(long, plan, "v1", "img2"), "a new image renames the Job")
	require.NotEqual(t, name, HookJobName(long, []byte("{ }"), "v1", "img"), "a new plan renames the Job")
}

// Hook's Role grants exactly Rules of the plan, and its Job carries the name
// HookJobName gives, the image, and the journal it was given: the -rw
// Service of the journal's namespace, the login from the credentials Secret,
// verify-full against the CA ConfigMap.
func TestHookObjects(t *testing.T) {
	t.Parallel()
	plan := planJSON(validSpec)
	cmd, err := decode(t, plan)
	require.NoError(t, err)
	docs, err := Hook(cmd, []byte(plan), "img:1", "v9", HookJournal{Namespace: "journal", Credentials: "db-secret", CA: "db-ca"})
	require.NoError(t, err)
	require.Len(t, docs, 6)
	for i, kind := range []string{"ServiceAccount", "Role", "RoleBinding", "ConfigMap", "NetworkPolicy", "Job"} {
		require.Contains(t, string(docs[i]), "kind: "+kind)
		require.NotContains(t, string(docs[i]), "creationTimestamp")
		require.NotContains(t, "\n"+string(docs[i]), "\nstatus:", "no status object (a pod condition pattern has a status of its own)")
	}
	// The hook's own fence: this plan's pods, nothing in, each server pod
	// on its port and nothing else.
	var np networkingv1.NetworkPolicy
	require.NoError(t, yaml.UnmarshalStrict(docs[4], &np))
	require.Equal(t, HookPolicy(cmd.Spec), np.Spec)
	require.Equal(t, cmd.Spec.Owner, np.Spec.PodSelector.MatchLabels["keyledger.dev/owner"])
	require.Empty(t, np.Spec.Ingress)
	require.Len(t, np.Spec.Egress, len(cmd.Spec.Servers))
	for i, srv := range cmd.Spec.Servers {
		rule := np.Spec.Egress[i]
		require.Equal(t, srv.Pod, rule.To[0].PodSelector.MatchLabels["statefulset.kubernetes.io/pod-name"])
		require.Nil(t, rule.To[0].NamespaceSelector, "in the plan's namespace only")
		require.Nil(t, rule.To[0].IPBlock)
		require.Equal(t, srv.Port, rule.Ports[0].Port.IntValue())
		require.Len(t, rule.Ports, 1)
	}
	var role rbacv1.Role
	require.NoError(t, yaml.UnmarshalStrict(docs[1], &role))
	require.Equal(t, Rules(cmd.Spec), role.Rules)
	var job batchv1.Job
	require.NoError(t, yaml.UnmarshalStrict(docs[5], &job))
	require.Equal(t, HookJobName(cmd.Spec.Owner, []byte(plan), "v9", "img:1"), job.Name)
	require.Equal(t, cmd.Spec.Namespace, job.Namespace)
	c := job.Spec.Template.Spec.Containers[0]
	require.Equal(t, "img:1", c.Image)
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	require.Equal(t, "keyledger-journal-rw.journal.svc", env["PGHOST"].Value)
	require.Equal(t, "db-secret", env["PGUSER"].ValueFrom.SecretKeyRef.Name)
	require.Equal(t, "db-secret", env["PGPASSWORD"].ValueFrom.SecretKeyRef.Name)
	require.Equal(t, "postgresql://$(PGHOST):$(PGPORT)/$(PGDATABASE)?sslmode=verify-full&sslrootcert=/etc/keyledger/journal-ca/ca.crt",
		env["KEYLEDGER_DATABASE_URL"].Value)
	pod := job.Spec.Template.Spec
	require.Equal(t, "db-ca", pod.Volumes[1].ConfigMap.Name)
	require.Equal(t, "journal-ca", c.VolumeMounts[1].Name)
	require.Equal(t, "/etc/keyledger/journal-ca", c.VolumeMounts[1].MountPath)
}
