package versioned

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// The versioned Job's Role is the family's declaration: deploy/versioned
// names the placeholder live Secret "LIVE-SECRET", which the private
// overlay replaces.
func TestDeployRoleIsRules(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../../deploy/versioned/role.yaml")
	require.NoError(t, err)
	defer f.Close()
	var role rbacv1.Role
	require.NoError(t, yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&role))
	require.Equal(t, "Role", role.Kind)
	require.Equal(t, Rules("LIVE-SECRET"), role.Rules, "deploy/versioned/role.yaml must grant exactly versioned.Rules")
}
