package retire

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// The deploy manifests' Role is the family's declaration: the base names
// the placeholder Secret "keyring", which the private overlay replaces.
func TestDeployRoleIsRules(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../../deploy/base/role.yaml")
	require.NoError(t, err)
	defer f.Close()
	var role rbacv1.Role
	require.NoError(t, yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&role))
	require.Equal(t, "Role", role.Kind)
	require.Equal(t, Rules("keyring"), role.Rules, "deploy/base/role.yaml must grant exactly retire.Rules")
}
