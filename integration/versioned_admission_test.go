package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// admittedAnnotation is what mutateSnapshotCreates adds.
const admittedAnnotation = "example.com/admitted"

// mutateSnapshotCreates installs a MutatingAdmissionPolicy that adds an
// annotation to every Secret created in this namespace under a snapshot
// name (the API server stores and answers the altered object), and waits
// until it takes effect. It is removed at cleanup.
func mutateSnapshotCreates(e *env) {
	e.T.Helper()
	ctx, c := e.T.Context(), e.Kube.Client().AdmissionregistrationV1beta1()
	policy := "keyledger-test-mutate-" + e.NS
	fail := admissionv1beta1.Fail
	_, err := c.MutatingAdmissionPolicies().Create(ctx, &admissionv1beta1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionv1beta1.MutatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1beta1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.NS}},
				ResourceRules: []admissionv1beta1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
				}}},
			},
			MatchConditions: []admissionv1beta1.MatchCondition{{Name: "snapshots", Expression: `object.metadata.name.startsWith("keyledger-h-")`}},
			Mutations: []admissionv1beta1.Mutation{{
				PatchType: admissionv1beta1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionv1beta1.ApplyConfiguration{
					Expression: `Object{metadata: Object.metadata{annotations: {"` + admittedAnnotation + `": "yes"}}}`,
				},
			}},
			ReinvocationPolicy: admissionv1beta1.NeverReinvocationPolicy,
		},
	}, metav1.CreateOptions{})
	require.NoError(e.T, err)
	_, err = c.MutatingAdmissionPolicyBindings().Create(ctx, &admissionv1beta1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec:       admissionv1beta1.MutatingAdmissionPolicyBindingSpec{PolicyName: policy},
	}, metav1.CreateOptions{})
	require.NoError(e.T, err)
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.MutatingAdmissionPolicyBindings().Delete(ctx, policy, metav1.DeleteOptions{})
		_ = c.MutatingAdmissionPolicies().Delete(ctx, policy, metav1.DeleteOptions{})
	})
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "keyledger-h-admission-probe"}}
	altered := func() bool {
		got, err := e.Kube.Client().CoreV1().Secrets(e.NS).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && got.Annotations[admittedAnnotation] == "yes"
	}
	require.Eventually(e.T, altered, time.Minute, 200*time.Millisecond, "the policy takes effect")
}

// A snapshot create whose answer admission altered (a
// MutatingAdmissionPolicy added an annotation, so the stored snapshot is
// not the one keyledger wrote) is not accepted as the archive: the update
// is refused, nothing live is written, and the altered object is left for
// review.
func TestIntegrationVersionedAdmissionAlteredSnapshot(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("altered")
	s := e.CreateSecret(suite.PlainSecret("altered", map[string][]byte{"k": suite.VCanary("0")}))
	mutateSnapshotCreates(e)

	r := e.RunCmd(suite.UpdateCommand(e.NS, "altered", s.ResourceVersion, "mut-altered", map[string][]byte{"k": suite.VCanary("1")}), as)
	// The answer is not the snapshot sent (result-mismatch); the re-read
	// finds keyledger's nonce on an object that is not the exact archive.
	suite.RequireRefused(t, r, "source-conflict")
	require.Equal(t, s.ResourceVersion, e.GetSecret("altered").ResourceVersion, "nothing live written")
	op, records := e.JournalOf("mut-altered")
	require.Equal(t, store.StateRefused, op.State)
	for _, rec := range records {
		if rec.Kind == store.RecordAuthorityCall {
			require.Equal(t, versioned.StepCreateSnapshot, rec.Step, "no call but the snapshot create")
		}
		if rec.Kind == store.RecordAuthorityResult && rec.Step == versioned.StepCreateSnapshot {
			require.NotEqual(t, store.Status("applied"), rec.Status, "the altered answer is not taken as applied")
		}
	}
	snaps := e.SnapshotsOf(s.UID)
	require.Len(t, snaps, 1, "the altered snapshot stays for review")
	require.Equal(t, "yes", snaps[0].Annotations[admittedAnnotation])
	suite.AssertNoCanary(t, r.Stdout+r.Stderr, suite.VCanary("0"), suite.VCanary("1"))
}
