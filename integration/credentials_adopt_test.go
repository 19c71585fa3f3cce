package integration

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/credentials"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A concurrent writer changes the Secret between keyledger's read and its
// patch: the patch's resourceVersion test fails with 422, the run re-reads,
// recomputes and patches only what is still missing; the writer's value stays.
func TestIntegrationCredentialsConcurrentWriter(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	canary := []byte("CANARY-existing-password-abcdefgh")
	existing := e.CreateSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shop-orders-cache-app"},
		Data: map[string][]byte{"password": canary}})
	secret := suite.StandardSecret(existing.Name)
	secret.Keys = append(secret.Keys, suite.Generated("admin-password", 24, "alphanumeric"))
	plan := suite.CredentialPlan(e.NS, "mut-writer", []suite.PlanSecret{secret})
	path := e.WriteCommand("plan.json", plan)

	// The plan's identity, through a transport that lets a second writer
	// change the Secret right before keyledger's first patch of it reaches
	// the API server (after the read the patch was built from, however
	// many reads came before).
	name := "credentials-" + suite.RandomSuffix(t)
	e.ServiceAccountKubeconfig(name, credentials.Rules(suite.SpecOf(t, plan)))
	cfg, err := e.Kube.ServiceAccountConfig(ctx, e.NS, name, 600)
	require.NoError(t, err)
	var wrote atomic.Bool
	writerValue := []byte("written-by-the-concurrent-writer")
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/secrets/"+existing.Name) && wrote.CompareAndSwap(false, true) {
				s := e.GetSecret(existing.Name)
				s.Data["username"] = writerValue
				_, uerr := e.Kube.Client().CoreV1().Secrets(e.NS).Update(context.Background(), s, metav1.UpdateOptions{})
				require.NoError(t, uerr)
			}
			return next.RoundTrip(req)
		})
	})
	client, err := kube.NewClient(cfg)
	require.NoError(t, err)
	f, err := command.Read(path, command.ReadOptions{})
	require.NoError(t, err)
	cmd, err := credentials.Decode(f)
	require.NoError(t, err)
	wp, err := credentials.Plan(cmd, cfg)
	require.NoError(t, err)
	res, err := workflow.Execute(ctx, workflow.Deps{Kube: client,
		OpenStore: workflow.PostgresStore(e.Journal.OperatorURL)}, wp)
	require.NoError(t, err)
	require.Equal(t, workflow.OutcomeCompleted, res.Outcome)
	require.True(t, wrote.Load())

	after := e.GetSecret(existing.Name)
	require.Equal(t, canary, after.Data["password"], "the existing value is untouched")
	require.Equal(t, writerValue, after.Data["username"], "the writer's value is not overwritten")
	suite.RequireAlphabet(t, after.Data["admin-password"], 24, suite.AlphanumericChars)
	require.Equal(t, "shop", after.Labels["app.kubernetes.io/part-of"])

	_, records := e.JournalOf("mut-writer:run-1")
	results := suite.RecordsOf(records, store.RecordAuthorityResult, "patch-secret")
	require.Len(t, results, 2)
	require.Equal(t, store.Status("unknown"), results[0].Status)
	require.Equal(t, store.Reason("test-failed"), results[0].Reason)
	require.EqualValues(t, 422, workflowtest.Fields(results[0].Detail)["code"], "a failed test answers 422, not 409")
	require.Equal(t, store.Status("applied"), results[1].Status)
	calls := suite.RecordsOf(records, store.RecordAuthorityCall, "patch-secret")
	require.Len(t, calls, 2)
	require.Equal(t, []any{"username", "admin-password"}, workflowtest.Fields(calls[0].Detail)["addKeys"])
	require.Equal(t, []any{"admin-password"}, workflowtest.Fields(calls[1].Detail)["addKeys"], "recomputed against the new version")
	require.NotEqual(t, calls[0].ResourceVersion, calls[1].ResourceVersion)
	require.Equal(t, store.Reason("resource-version-changed"), suite.RecordsOf(records, store.RecordResolution, "patch-secret")[0].Reason)
	suite.RequireNoValues(t, e.JournalText("mut-writer:run-1"), append(e.SecretValues(existing.Name), canary))
}

func TestIntegrationCredentialsAdoption(t *testing.T) {
	t.Parallel()
	e := setup(t)
	suite.InstallExternalSecretsCRDs(t)
	ctx, dyn := t.Context(), e.DynamicClient()
	ess, passwords := dyn.Resource(suite.ExternalSecretsGVR).Namespace(e.NS), dyn.Resource(suite.PasswordsGVR).Namespace(e.NS)
	const name, generator = "shop-orders-cache-app", "shop-orders-cache-password"

	_, err := passwords.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Password",
		"metadata": map[string]any{"name": generator},
		"spec":     map[string]any{"length": int64(32), "allowRepeat": true, "noUpper": false},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	es, err := ess.Create(ctx, suite.GeneratorBackedExternalSecret(name, generator), metav1.CreateOptions{})
	require.NoError(t, err)
	// The Secret as External Secrets Operator left it: owned by the
	// ExternalSecret, tracked by Argo CD.
	canary := []byte("CANARY-generated-by-eso-0123456789")
	yes := true
	kept := e.CreateSecret(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{"app.kubernetes.io/instance": "shop", "app.kubernetes.io/part-of": "shop"},
			Annotations: map[string]string{"argocd.argoproj.io/tracking-id": "shop:/Secret:shop/" + name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "external-secrets.io/v1", Kind: "ExternalSecret", Name: name,
				UID: es.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}},
		Data: map[string][]byte{"password": canary},
	})

	plan := suite.CredentialPlan(e.NS, "mut-adopt", []suite.PlanSecret{suite.StandardSecret(name)}, func(spec map[string]any) {
		spec["adopt"] = []any{map[string]any{"externalSecret": name, "generators": []any{generator}}}
	})
	r := e.Keyledger([]string{"run", e.WriteCommand("plan.json", plan)}, e.AsCredentialRunner(plan))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out := suite.Outcome(t, r)
	require.Equal(t, "completed", out["outcome"])
	require.EqualValues(t, 1, out["externalSecretsDeleted"])
	require.EqualValues(t, 1, out["generatorsDeleted"])

	_, err = ess.Get(ctx, name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the ExternalSecret is gone: %v", err)
	_, err = passwords.Get(ctx, generator, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the generator is gone: %v", err)
	after := e.GetSecret(name)
	require.Equal(t, kept.UID, after.UID, "the garbage collector orphaned the Secret, it did not delete it")
	require.Equal(t, canary, after.Data["password"], "the value survives byte-identical")
	require.Equal(t, "app", string(after.Data["username"]))
	require.Empty(t, after.OwnerReferences)
	require.NotContains(t, after.Annotations, "argocd.argoproj.io/tracking-id")
	require.NotContains(t, after.Labels, "app.kubernetes.io/instance")
	require.Equal(t, "shop", after.Labels["app.kubernetes.io/part-of"])

	_, records := e.JournalOf("mut-adopt:run-1")
	require.Len(t, suite.RecordsOf(records, store.RecordAuthorityCall, "orphan-external-secret"), 1)
	require.Equal(t, string(es.GetUID()), suite.RecordsOf(records, store.RecordAuthorityCall, "orphan-external-secret")[0].UID)
	require.Len(t, suite.RecordsOf(records, store.RecordAuthorityCall, "delete-generator"), 1)
	require.Len(t, suite.RecordsOf(records, store.RecordObservation, "wait-external-secret-gone"), 1)
	requireGoneBeforeGenerators(t, records, string(es.GetUID()))
	suite.RequireNoValues(t, r.Stdout+r.Stderr+e.JournalText("mut-adopt:run-1"), [][]byte{canary})

	// A remote-store-backed ExternalSecret stops the run before any write.
	const remote, other = "shop-vault-app", "shop-other-app"
	_, err = ess.Create(ctx, suite.RemoteExternalSecret(remote), metav1.CreateOptions{})
	require.NoError(t, err)
	plan = suite.CredentialPlan(e.NS, "mut-remote", []suite.PlanSecret{suite.StandardSecret(other), suite.StandardSecret(remote)}, func(spec map[string]any) {
		spec["adopt"] = []any{map[string]any{"externalSecret": remote}}
	})
	r = e.Keyledger([]string{"run", e.WriteCommand("remote.json", plan)}, e.AsCredentialRunner(plan))
	require.Equal(t, 2, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "external-secret-not-generator-backed", suite.Outcome(t, r)["reason"])
	_, err = ess.Get(ctx, remote, metav1.GetOptions{})
	require.NoError(t, err, "the remote-backed ExternalSecret is left alone")
	_, err = e.Kube.Client().CoreV1().Secrets(e.NS).Get(ctx, other, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "nothing was written")
	_, records = e.JournalOf("mut-remote:run-1")
	require.Zero(t, suite.Count(records, store.RecordAuthorityCall))
}

// requireGoneBeforeGenerators checks ADR-072's order in the journal: the
// ExternalSecret's disappearance (the wait-external-secret-gone
// observation, status gone, its UID) is recorded before the first
// generator delete is.
func requireGoneBeforeGenerators(t *testing.T, records []store.Record, externalSecretUID string) {
	t.Helper()
	gone, firstDelete := -1, -1
	for i, r := range records {
		switch {
		case gone < 0 && r.Kind == store.RecordObservation && r.Step == "wait-external-secret-gone":
			require.Equal(t, store.Status("gone"), r.Status)
			require.Equal(t, externalSecretUID, r.UID)
			gone = i
		case firstDelete < 0 && r.Kind == store.RecordAuthorityCall && r.Step == "delete-generator":
			firstDelete = i
		}
	}
	require.GreaterOrEqual(t, gone, 0, "the disappearance is recorded: %v", suite.Kinds(records))
	require.GreaterOrEqual(t, firstDelete, 0, "a generator delete is recorded: %v", suite.Kinds(records))
	require.Less(t, gone, firstDelete, "the ExternalSecret is gone before the first generator delete")
}
