package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/credentials"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// denySecretCreate installs a ValidatingAdmissionPolicy that makes the API
// server refuse the creation of the Secret called name in the test's
// namespace, and waits until it is enforced (a dry-run create is refused).
func (e *env) denySecretCreate(name string) {
	e.t.Helper()
	ctx, c := e.t.Context(), e.kube.Client()
	policy := "deny-" + e.ns
	fail := admissionregistrationv1.Fail
	_, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name != '" + name + "'", Message: "denied by the test"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	e.t.Cleanup(func() {
		_ = c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), policy, metav1.DeleteOptions{})
		_ = c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), policy, metav1.DeleteOptions{})
	})
	_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.ns}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	require.Eventually(e.t, func() bool {
		_, err := c.CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil
	}, 30*time.Second, 100*time.Millisecond, "the admission policy is never enforced")
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "response dropped by the test" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// A batch of creates in which the API server rejects one and the answer of
// another is lost after it was applied: the lost one is settled (re-read:
// this call's Secret) before the operation is refused, and the refusal
// names what the batch applied.
func TestIntegrationCredentialsBatchSettledBeforeRefusal(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	const lost, rejected = "batch-lost", "batch-rejected"
	e.denySecretCreate(rejected)
	plan := credentialPlan(e.ns, "mut-batch", []planSecret{standardSecret(lost), standardSecret(rejected)})
	path := e.writeCommand("plan.json", plan)

	// The plan's identity, through a transport that drops the answer to the
	// create of one Secret after the API server applied it.
	name := "credentials-" + randomSuffix(t)
	e.serviceAccountKubeconfig(name, credentials.Rules(specOf(t, plan)))
	cfg, err := e.kube.ServiceAccountConfig(ctx, e.ns, name, 600)
	require.NoError(t, err)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodPost || req.Body == nil || !strings.HasSuffix(req.URL.Path, "/secrets") {
				return next.RoundTrip(req)
			}
			body, err := io.ReadAll(req.Body)
			if err != nil {
				return nil, err
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			resp, err := next.RoundTrip(req)
			// JSON or protobuf: the name is in the body as is.
			if err == nil && bytes.Contains(body, []byte(lost)) {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return nil, timeoutError{}
			}
			return resp, err
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
	_, err = workflow.Execute(ctx, workflow.Deps{Kube: client,
		OpenStore: workflow.PostgresStore(e.journal.OperatorURL)}, wp)
	var refused *workflow.Refused
	require.True(t, errors.As(err, &refused), "refused: %v", err)

	s := e.getSecret(lost)
	require.Len(t, s.Data["password"], 32)
	op, records := e.journalOf("mut-batch:run-1")
	require.Equal(t, store.StateRefused, op.State)
	results := map[string]store.Record{}
	for _, r := range recordsOf(records, store.RecordAuthorityResult, "create-secret") {
		results[r.Target.String()] = r
	}
	require.Equal(t, store.Status("unknown"), results["secret/"+lost].Status)
	require.Equal(t, store.Status("rejected"), results["secret/"+rejected].Status)
	res := recordsOf(records, store.RecordResolution, "create-secret")
	require.Len(t, res, 1, "the lost sibling is settled before the refusal")
	require.Equal(t, "secret/"+lost, res[0].Target.String())
	require.Equal(t, store.Status("ours"), res[0].Status)
	require.Equal(t, store.Reason("created-by-this-mutation"), res[0].Reason)
	require.Equal(t, string(s.UID), res[0].UID)
	refusal := recordsOf(records, store.RecordRefusal, "")
	require.Len(t, refusal, 1)
	require.Equal(t, []any{"secret/" + lost}, workflowtest.Fields(refusal[0].Detail)["applied"], "the refusal names what was applied")
	require.Equal(t, []any{"secret/" + rejected}, workflowtest.Fields(refusal[0].Detail)["notApplied"])
	require.Equal(t, []any{}, workflowtest.Fields(refusal[0].Detail)["kept"], "nothing was found in place")
	require.Equal(t, "secret/"+rejected, workflowtest.Fields(refusal[0].Detail)["rejected"])
	requireNoValues(t, e.journalText("mut-batch:run-1"), e.secretValues(lost))
}
