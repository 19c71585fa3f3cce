package suite

import (
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/retire"
	"github.com/keyledger/keyledger/workflow/retire/keyring"
	"github.com/keyledger/keyledger/workflow/retire/keyring/keyringtest"
)

// DataKey is the keyring Secret's data key.
const DataKey = "keyring.json"

// StandardKeyring has three keys: two retirable, k-2026-08 active.
func StandardKeyring() *keyring.Manifest {
	return keyringtest.New(
		keyringtest.WithKey("k-2026-06", "2026-06-01T00:00:00Z", keyringtest.Material("k-2026-06")),
		keyringtest.WithKey("k-2026-07", "2026-07-01T00:00:00Z", keyringtest.Material("k-2026-07")),
		keyringtest.WithKey("k-2026-08", "2026-08-01T00:00:00Z", keyringtest.Material("k-2026-08")),
		keyringtest.WithActive("k-2026-08"),
		keyringtest.WithGeneration(4),
	)
}

// AllMaterial is every key's material in StandardKeyring (canaries).
func AllMaterial() [][]byte {
	return [][]byte{keyringtest.Material("k-2026-06"), keyringtest.Material("k-2026-07"), keyringtest.Material("k-2026-08")}
}

// SecretOption modifies a keyring Secret before it is created.
type SecretOption func(*corev1.Secret)

// KeyringSecret is a valid keyring Secret holding m.
func KeyringSecret(name string, m *keyring.Manifest, opts ...SecretOption) *corev1.Secret {
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
		Data: map[string][]byte{DataKey: m.Encode()},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// CreateSecret creates s in the test's namespace (as the admin).
func (e *Env) CreateSecret(s *corev1.Secret) *corev1.Secret {
	e.T.Helper()
	created, err := e.Kube.Client().CoreV1().Secrets(e.NS).Create(e.T.Context(), s, metav1.CreateOptions{})
	require.NoError(e.T, err)
	return created
}

// GetSecret reads a Secret of the test's namespace (as the admin).
func (e *Env) GetSecret(name string) *corev1.Secret {
	e.T.Helper()
	s, err := e.Kube.Client().CoreV1().Secrets(e.NS).Get(e.T.Context(), name, metav1.GetOptions{})
	require.NoError(e.T, err)
	return s
}

// SecretWrites counts the API server's writes to a Secret between two
// resourceVersions.
func (e *Env) SecretWrites(name, from, until string) int {
	e.T.Helper()
	return WritesBetween(e.T, e.Kube.Client().CoreV1().Secrets(e.NS).Watch, name, from, until)
}

// RetireCommand is a KeyRetirement command for s; opts change its spec.
func RetireCommand(s *corev1.Secret, keyID, mutation string, opts ...func(spec map[string]any)) map[string]any {
	spec := map[string]any{
		"namespace": s.Namespace, "secretName": s.Name, "expectedUID": string(s.UID), "dataKey": DataKey,
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

// RetirementRules are exactly the rights a retirement needs, as the family
// declares them.
func RetirementRules(secretName string) []rbacv1.PolicyRule { return retire.Rules(secretName) }

// ServiceAccountKubeconfig creates a ServiceAccount bound to a Role with
// rules, mints a TokenRequest token for it (600 s) and returns a kubeconfig
// that runs as it.
func (e *Env) ServiceAccountKubeconfig(name string, rules []rbacv1.PolicyRule) string {
	e.T.Helper()
	path, err := e.Kube.KubeconfigForConfig(e.ServiceAccountConfig(name, rules), e.T.TempDir())
	require.NoError(e.T, err)
	return path
}

// ServiceAccountConfig makes the ServiceAccount name of the test's
// namespace hold exactly rules (a Role and its RoleBinding) and returns a
// client configuration with a token of it.
func (e *Env) ServiceAccountConfig(name string, rules []rbacv1.PolicyRule) *rest.Config {
	e.T.Helper()
	ctx, c := e.T.Context(), e.Kube.Client()
	_, err := c.RbacV1().Roles(e.NS).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
	require.NoError(e.T, err)
	_, err = c.RbacV1().RoleBindings(e.NS).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: e.NS}},
	}, metav1.CreateOptions{})
	require.NoError(e.T, err)
	cfg, err := e.Kube.ServiceAccountConfig(ctx, e.NS, name, 600)
	require.NoError(e.T, err)
	return cfg
}

// AsRetirerOf runs as a ServiceAccount holding exactly a retirement's rights
// on s (get and update on that one Secret): the only identity that passes
// the permission matrix. The kubeconfig is made once per Secret.
func (e *Env) AsRetirerOf(s *corev1.Secret) RunOption {
	e.T.Helper()
	if e.Retirers == nil {
		e.Retirers = map[string]string{}
	}
	path, ok := e.Retirers[s.Name]
	if !ok {
		path = e.ServiceAccountKubeconfig("retirer-"+s.Name, RetirementRules(s.Name))
		e.Retirers[s.Name] = path
	}
	return AsKubeconfig(path)
}

// RequireRetired checks the Secret holds m minus keyID, with this
// mutation's receipt, one generation up, annotations in step.
func RequireRetired(t *testing.T, s *corev1.Secret, keyID, mutation string, before *keyring.Manifest) *keyring.Manifest {
	t.Helper()
	m, err := keyring.Parse(s.Data[DataKey])
	require.NoError(t, err)
	_, present := m.Key(keyID)
	require.False(t, present, "the retired key's material is gone")
	r, ok := m.Receipt(keyID)
	require.True(t, ok, "a receipt is left")
	require.Equal(t, mutation, r.MutationID)
	require.Equal(t, "ret-"+mutation, r.RetirementID)
	require.Equal(t, keyring.MaterialDigest(keyringtest.Material(keyID)), r.MaterialDigest)
	require.Equal(t, before.Generation+1, m.Generation)
	require.Equal(t, m.Generation, r.Generation)
	require.Equal(t, fmt.Sprint(m.Generation), s.Annotations["keyledger.dev/generation"])
	require.Equal(t, m.CatalogDigest(), s.Annotations["keyledger.dev/catalog-digest"])
	for _, k := range before.Keys {
		if k.ID == keyID {
			continue
		}
		kept, ok := m.Key(k.ID)
		require.True(t, ok, "key %s kept", k.ID)
		require.Equal(t, []byte(k.Material), []byte(kept.Material), "key %s material untouched", k.ID)
	}
	return m
}

// RetireUnderFault retires a key from a fresh keyring name with
// KEYLEDGER_FAULT=fault on the run and requires what every lost or refused
// answer must leave: exit 0 with outcome, the key retired by exactly one
// applied write, calls journaled calls, and one resolution (settled by
// re-reading). It returns the run's result for further checks.
func (e *Env) RetireUnderFault(t *testing.T, name, mutation, fault, want string, calls int) Result {
	t.Helper()
	before := StandardKeyring()
	s := e.CreateSecret(KeyringSecret(name, before))
	path := e.WriteCommand(mutation+".json", RetireCommand(s, "k-2026-06", mutation))
	r := e.Keyledger([]string{"run", path}, e.AsRetirerOf(s), WithEnv("KEYLEDGER_FAULT="+fault))
	require.Equal(t, 0, r.Code, "%s: %s %s", fault, r.Stdout, r.Stderr)
	require.Equal(t, want, Outcome(t, r)["outcome"], fault)
	after := e.GetSecret(s.Name)
	RequireRetired(t, after, "k-2026-06", mutation, before)
	require.Equal(t, 1, e.SecretWrites(s.Name, s.ResourceVersion, after.ResourceVersion), "%s: one write applied", fault)
	_, records := e.JournalOf(mutation)
	require.Equal(t, calls, Count(records, store.RecordAuthorityCall), "%s: %v", fault, Kinds(records))
	require.Equal(t, 1, Count(records, store.RecordResolution), "%s: settled by re-reading", fault)
	return r
}

// PGListener is a loopback TCP listener standing in for PostgreSQL: it
// counts connection attempts, to prove a run never contacted the database.
func PGListener(t *testing.T) (url string, connections *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	connections = &atomic.Int32{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			connections.Add(1)
			c.Close()
		}
	}()
	return "postgres://nobody:nothing@" + l.Addr().String() + "/journal?sslmode=disable", connections
}
