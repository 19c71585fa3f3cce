package retire

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/kubetest"
)

// oneSecretClient is a kube.Interface that serves Get of one Secret and
// nothing else (any other call panics on the nil interfaces it embeds): what
// Plan and Inspect wire must reach exactly that Secret.
type oneSecretClient struct {
	kube.Interface
	secret *corev1.Secret
	asked  []string
}

func (c *oneSecretClient) Secrets(namespace string) kube.Secrets {
	return secretsOf{c: c, namespace: namespace}
}

type secretsOf struct {
	kube.Secrets
	c         *oneSecretClient
	namespace string
}

func (s secretsOf) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Secret, error) {
	s.c.asked = append(s.c.asked, s.namespace+"/"+name)
	if s.namespace != s.c.secret.Namespace || name != s.c.secret.Name {
		return nil, apierrors.NewNotFound(kubetest.Secrets, name)
	}
	return s.c.secret.DeepCopy(), nil
}

// Plan journals the command's identity and binds the family to the one
// Secret the command names; the rights asked are exactly Rules.
func TestPlanBindsTheNamedSecret(t *testing.T) {
	t.Parallel()
	s := keyringSecret(standardKeyring())
	s.UID = "00000000-0000-4000-8000-000000000001"
	client := &oneSecretClient{secret: s}
	cmd := retirement(string(s.UID))
	p := Plan(cmd, client)

	require.Equal(t, store.PrepareParams{
		Kind: command.KindKeyRetirement, MutationID: fxMutation, RequestID: fxRequest, CommandDigest: cmd.Digest,
		Namespace: fxNamespace, Name: fxSecret, ExpectedUID: string(s.UID),
		Detail: store.DetailOf(map[string]any{"keyId": fxKey, "retirementId": fxRetirement}),
	}, p.Prepare)
	require.Equal(t, &kube.Rights{Namespace: fxNamespace, Rules: Rules(fxSecret)}, p.Rights)
	require.Equal(t, AccessMatrix(fxNamespace, fxSecret), p.Access)

	f, ok := p.Family.(*family)
	require.True(t, ok)
	got, err := f.secret.Get(t.Context())
	require.NoError(t, err)
	require.Equal(t, s, got)
	require.Equal(t, []string{fxNamespace + "/" + fxSecret}, client.asked)

	catalog, err := Inspect(t.Context(), client, fxNamespace, fxSecret, "")
	require.NoError(t, err)
	require.Equal(t, standardKeyring().Catalog(), catalog)
}

// The permission matrix allows get and update on the one Secret and
// requires every other verb on it, and any other Secret, ConfigMap or Pod,
// to be denied.
func TestAccessMatrixAllowsOnlyGetAndUpdate(t *testing.T) {
	t.Parallel()
	matrix := AccessMatrix(fxNamespace, fxSecret)
	var allowed []string
	denied := map[string]bool{}
	for _, c := range matrix {
		require.Equal(t, fxNamespace, c.Namespace)
		what := c.Resource + "/" + c.Name + " " + c.Verb
		if c.Allowed {
			allowed = append(allowed, what)
		} else {
			denied[what] = true
		}
	}
	require.Equal(t, []string{"secrets/" + fxSecret + " get", "secrets/" + fxSecret + " update"}, allowed)
	for _, verb := range []string{"list", "watch", "create", "delete", "patch"} {
		require.True(t, denied["secrets/"+fxSecret+" "+verb], "%s on the Secret must be denied", verb)
	}
	other := kube.OtherSecretName(fxSecret)
	require.NotEqual(t, fxSecret, other)
	require.True(t, denied["secrets/"+other+" get"], "another Secret must be out of reach")
	require.True(t, slices.ContainsFunc(matrix, func(c kube.AccessCheck) bool { return c.Resource == "configmaps" && !c.Allowed }))
	require.True(t, slices.ContainsFunc(matrix, func(c kube.AccessCheck) bool { return c.Resource == "pods" && !c.Allowed }))
}
