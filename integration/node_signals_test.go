package integration

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/workflow/command"
)

// terminationMessage is the hook container's termination message, decoded.
func terminationMessage(t *testing.T, p corev1.Pod) (map[string]any, int32) {
	t.Helper()
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "keyledger" && cs.State.Terminated != nil {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(cs.State.Terminated.Message), &m), "pod %s: %q", p.Name, cs.State.Terminated.Message)
			return m, cs.State.Terminated.ExitCode
		}
	}
	t.Fatalf("pod %s: the keyledger container did not terminate: %v", p.Name, p.Status.ContainerStatuses)
	return nil, 0
}

// What an operator sees of a failed hook without opening the source, on a
// real kubelet and Job controller: a hook Job whose run is refused (exit 2)
// fails at once with one pod (its podFailurePolicy's FailJob rule), the
// Job's Failed condition (reason PodFailurePolicy) names the container and
// the exit code, and the pod's termination message holds keyledger's
// outcome, reason and mutation ID, nothing else; the pod is found by the
// mutation ID's hash label. A hook Job whose run stays uncertain (exit 75)
// is retried: the pod and its backoffLimit's two retries, each exit 75, then
// BackoffLimitExceeded. Pods are counted from the API server.
func TestIntegrationNodeFailureSignals(t *testing.T) {
	ne := setupNode(t)
	ne.JoinJournal()
	apiIP, apiPort := ne.APIEndpoint()
	ne.ApplyAll(suite.RenderCredentialsFence(t, ne.NS, apiIP, apiPort))
	c := ne.Kube.Client()

	// Refused: the planned Secret exists with a type keyledger never
	// writes (secret-wrong-type, exit 2). The mutation ID holds ':', which
	// no label value may: the label is its hash.
	const refusedID, refusedOwner, refusedSecret = "node-signals:refused", "signals-refused", "signals-refused-app"
	_, err := c.CoreV1().Secrets(ne.NS).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: refusedSecret},
		Type: "example.com/not-opaque", Data: map[string][]byte{"password": []byte(suite.RandomHex(t, 16))}}, metav1.CreateOptions{})
	require.NoError(t, err)
	refused := suite.CredentialPlan(ne.NS, refusedID, []suite.PlanSecret{suite.StandardSecret(refusedSecret)}, func(spec map[string]any) {
		spec["owner"] = refusedOwner
	})
	var applyHook string
	_, logs := ne.SyncExpectingFailure(ne.RenderHook(refused), refusedOwner, &applyHook)
	job, failed, pods := ne.HookJobEnd(refusedOwner)
	require.Len(t, pods, 1, "exit 2 is not retried: %s", logs)
	require.Equal(t, "PodFailurePolicy", failed.Reason, failed.Message)
	require.Contains(t, failed.Message, "keyledger", "the condition names the container")
	require.Contains(t, failed.Message, "exit code 2", "the condition names the exit code")
	require.Contains(t, applyHook, failed.Message, "apply-hook reports the Job's Failed condition")
	msg, code := terminationMessage(t, pods[0])
	require.EqualValues(t, 2, code)
	require.Equal(t, map[string]any{"outcome": "refused", "reason": "secret-wrong-type", "kind": "CredentialPlan",
		"mutationId": refusedID, "exitCode": float64(2)}, msg)
	byLabel, err := c.CoreV1().Pods(ne.NS).List(t.Context(), metav1.ListOptions{
		LabelSelector: command.LabelMutationIDHash + "=" + command.MutationIDHash(refusedID)})
	require.NoError(t, err)
	require.Len(t, byLabel.Items, 1, "the pod is found by its mutation ID")
	require.Equal(t, pods[0].UID, byLabel.Items[0].UID)
	require.Equal(t, refusedID, byLabel.Items[0].Annotations[command.AnnotationMutationID])
	require.Equal(t, refusedID, job.Annotations[command.AnnotationMutationID])

	// Uncertain: the plan's server pod never runs (its node selector
	// matches no node), so its probe's answer is unknown and every run of
	// the plan ends 75 (probe-unknown) after its Secrets converged.
	const uncertainID, uncertainOwner, serverPod = "node-signals-uncertain", "signals-uncertain", "signals-cache-0"
	_, err = c.CoreV1().Pods(ne.NS).Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: serverPod},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"keyledger.dev/no-such-node": "true"}, AutomountServiceAccountToken: suite.Ptr(false),
			Containers: []corev1.Container{{Name: "server", Image: suite.NodeImage(), ImagePullPolicy: corev1.PullNever}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	uncertain := suite.CredentialPlan(ne.NS, uncertainID, []suite.PlanSecret{suite.StandardSecret("signals-cache-app")}, func(spec map[string]any) {
		spec["owner"] = uncertainOwner
		spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": serverPod, "port": 6379, "secret": "signals-cache-app", "passwordKey": "password"}}
	})
	codes, logs := ne.SyncExpectingFailure(ne.RenderHook(uncertain), uncertainOwner)
	_, failed, pods = ne.HookJobEnd(uncertainOwner)
	require.Len(t, pods, 3, "exit 75 is retried: the pod and backoffLimit's two retries: %s", logs)
	require.Equal(t, []int32{75, 75, 75}, codes, logs)
	require.Equal(t, "BackoffLimitExceeded", failed.Reason, failed.Message)
	for _, p := range pods {
		msg, _ := terminationMessage(t, p)
		require.Equal(t, map[string]any{"outcome": "uncertain", "reason": "probe-unknown", "kind": "CredentialPlan",
			"mutationId": uncertainID, "exitCode": float64(75)}, msg)
	}
}
