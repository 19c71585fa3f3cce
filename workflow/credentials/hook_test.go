package credentials

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
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
// HookJobName gives, the image, and the database Secret it was given.
func TestHookObjects(t *testing.T) {
	t.Parallel()
	plan := planJSON(validSpec)
	cmd, err := decode(t, plan)
	require.NoError(t, err)
	docs, err := Hook(cmd, []byte(plan), "img:1", "v9", "db-secret")
	require.NoError(t, err)
	require.Len(t, docs, 5)
	for i, kind := range []string{"ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Job"} {
		require.Contains(t, string(docs[i]), "kind: "+kind)
		require.NotContains(t, string(docs[i]), "creationTimestamp")
		require.NotContains(t, string(docs[i]), "status:")
	}
	var role rbacv1.Role
	require.NoError(t, yaml.UnmarshalStrict(docs[1], &role))
	require.Equal(t, Rules(cmd.Spec), role.Rules)
	var job batchv1.Job
	require.NoError(t, yaml.UnmarshalStrict(docs[4], &job))
	require.Equal(t, HookJobName(cmd.Spec.Owner, []byte(plan), "v9", "img:1"), job.Name)
	require.Equal(t, cmd.Spec.Namespace, job.Namespace)
	c := job.Spec.Template.Spec.Containers[0]
	require.Equal(t, "img:1", c.Image)
	require.Equal(t, "db-secret", c.Env[0].ValueFrom.SecretKeyRef.Name)
}
