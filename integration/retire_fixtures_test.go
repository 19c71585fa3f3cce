package integration

import (
	"strconv"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/keyledger/keyledger/workflow/retire"
	"github.com/keyledger/keyledger/workflow/retire/keyring"
	"github.com/keyledger/keyledger/workflow/retire/keyring/keyringtest"
)

const dataKey = "keyring.json"

// standardKeyring has three keys: two retirable, k-2026-08 active.
func standardKeyring() *keyring.Manifest {
	return keyringtest.New(
		keyringtest.WithKey("k-2026-06", "2026-06-01T00:00:00Z", keyringtest.Material("k-2026-06")),
		keyringtest.WithKey("k-2026-07", "2026-07-01T00:00:00Z", keyringtest.Material("k-2026-07")),
		keyringtest.WithKey("k-2026-08", "2026-08-01T00:00:00Z", keyringtest.Material("k-2026-08")),
		keyringtest.WithActive("k-2026-08"),
		keyringtest.WithGeneration(4),
	)
}

// allMaterial is every key's material in standardKeyring (canaries).
func allMaterial() [][]byte {
	return [][]byte{keyringtest.Material("k-2026-06"), keyringtest.Material("k-2026-07"), keyringtest.Material("k-2026-08")}
}

// secretOption modifies a keyring Secret before it is created.
type secretOption func(*corev1.Secret)

// keyringSecret is a valid keyring Secret holding m.
func keyringSecret(name string, m *keyring.Manifest, opts ...secretOption) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{retire.LabelKeyring: retire.LabelKeyringManaged},
			Annotations: map[string]string{
				retire.AnnotationGeneration:    strconv.FormatInt(m.Generation, 10),
				retire.AnnotationCatalogDigest: m.CatalogDigest(),
			},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{dataKey: m.Encode()},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func (e *env) createSecret(s *corev1.Secret) *corev1.Secret {
	e.t.Helper()
	created, err := e.kube.Client().CoreV1().Secrets(e.ns).Create(e.t.Context(), s, metav1.CreateOptions{})
	require.NoError(e.t, err)
	return created
}

func (e *env) getSecret(name string) *corev1.Secret {
	e.t.Helper()
	s, err := e.kube.Client().CoreV1().Secrets(e.ns).Get(e.t.Context(), name, metav1.GetOptions{})
	require.NoError(e.t, err)
	return s
}

// secretWrites counts the API server's writes to a Secret between two
// resourceVersions.
func (e *env) secretWrites(name, from, until string) int {
	e.t.Helper()
	return writesBetween(e.t, e.kube.Client().CoreV1().Secrets(e.ns).Watch, name, from, until)
}

// retireCommand is a KeyRetirement command for s; opts change its spec.
func retireCommand(s *corev1.Secret, keyID, mutation string, opts ...func(spec map[string]any)) map[string]any {
	spec := map[string]any{
		"namespace": s.Namespace, "secretName": s.Name, "expectedUID": string(s.UID), "dataKey": dataKey,
		"keyId": keyID, "retirementId": "ret-" + mutation, "expectedMaterialDigest": keyring.MaterialDigest(keyringtest.Material(keyID)),
	}
	for _, o := range opts {
		o(spec)
	}
	return map[string]any{
		"apiVersion": "keyledger.dev/v1", "kind": "KeyRetirement",
		"metadata": map[string]any{"requestId": "req-" + mutation, "mutationId": mutation},
		"spec":     spec,
	}
}

// retirementRules are exactly the rights a retirement needs, as the family
// declares them.
func retirementRules(secretName string) []rbacv1.PolicyRule { return retire.Rules(secretName) }

// serviceAccountKubeconfig creates a ServiceAccount bound to a Role with
// rules, mints a TokenRequest token for it (600 s) and returns a kubeconfig
// that runs as it.
func (e *env) serviceAccountKubeconfig(name string, rules []rbacv1.PolicyRule) string {
	e.t.Helper()
	path, err := e.kube.KubeconfigForConfig(e.serviceAccountConfig(name, rules), e.t.TempDir())
	require.NoError(e.t, err)
	return path
}

// serviceAccountConfig makes the ServiceAccount name of the test's
// namespace hold exactly rules (a Role and its RoleBinding) and returns a
// client configuration with a token of it.
func (e *env) serviceAccountConfig(name string, rules []rbacv1.PolicyRule) *rest.Config {
	e.t.Helper()
	ctx, c := e.t.Context(), e.kube.Client()
	_, err := c.RbacV1().Roles(e.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	_, err = c.RbacV1().RoleBindings(e.ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: e.ns}},
	}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	cfg, err := e.kube.ServiceAccountConfig(ctx, e.ns, name, 600)
	require.NoError(e.t, err)
	return cfg
}

// asRetirerOf runs as a ServiceAccount holding exactly a retirement's rights
// on s (get and update on that one Secret): the only identity that passes
// the permission matrix. The kubeconfig is made once per Secret.
func (e *env) asRetirerOf(s *corev1.Secret) runOption {
	e.t.Helper()
	if e.retirers == nil {
		e.retirers = map[string]string{}
	}
	path, ok := e.retirers[s.Name]
	if !ok {
		path = e.serviceAccountKubeconfig("retirer-"+s.Name, retirementRules(s.Name))
		e.retirers[s.Name] = path
	}
	return asKubeconfig(path)
}
