package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// ADR-0262's acceptance on a real kubelet: the deploy/ retirement Job,
// filled in as deploy/README.md says, behind NetworkPolicies enforced by
// kube-router, in its namespace with its own journal role against the one
// journal of keyledger-journal (a part of TestIntegrationNodeTenancy). The control Job finds the canary reachable; a Job without the
// API-egress rule and a Job whose canary a policy allows both fail in the
// init container at the gate's deadline, the main container never starts
// and nothing is journaled; then two Jobs of one command: completed, then
// existing, the Secret written once, one preparation and one completion.
func nodeRetirementJob(t *testing.T) nodeTenant {
	ne := setupNode(t)
	ne.JoinJournal()
	canary := ne.CanaryPod()
	before := suite.StandardKeyring()
	s := ne.CreateSecret(suite.KeyringSecret("prompt-output-keyring", before))
	const mutation = "mut-node-retire"
	command := suite.RetireCommand(s, "k-2026-07", mutation)

	t.Run("control-job-reaches-the-canary", func(t *testing.T) {
		fsys := suite.DeployFS(t)
		require.NoError(t, fsys.WriteFile("/my-control/kustomization.yaml", []byte(fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
resources:
- ../deploy/control
patches:
- target:
    kind: Job
    name: keyledger-preflight-control
  patch: |-
    - op: replace
      path: /spec/template/spec/containers/0/env/0/value
      value: %q
images:
- name: keyledger
  newName: %s
  newTag: %s
`, ne.NS, canary, suite.ImageName(suite.NodeImage()), suite.ImageTag(suite.NodeImage())))))
		ne.ApplyAll(suite.Render(t, fsys, "/my-control"))
		end := ne.WaitJob("keyledger-preflight-control", 2*time.Minute)
		log := ne.Logs(end.Pod, "preflight")
		require.True(t, end.Complete, "control Job failed: %s", log)
		out := suite.OutcomeLine(t, log)
		require.Equal(t, "ready", out["outcome"])
		require.Equal(t, true, out["canary"].(map[string]any)["reachable"], "the canary is a live listener when no policy applies")
	})

	t.Run("gate-fails-closed", func(t *testing.T) {
		// Two wrongly fenced Jobs, side by side in two namespaces (a
		// namespace's retirement policies select all its retirement pods,
		// and policies add up): without the API-egress component the API
		// server is unreachable; with a policy that also allows the canary,
		// the canary is reachable.
		leakyNS := *ne
		leakyNS.Env = &env{T: t, Kube: ne.Kube, NS: ne.Kube.Namespace(t), Dir: t.TempDir()}
		// The pod mounts the journal's CA before any container starts: the
		// second namespace has the journal client's objects too (the main
		// container never starts there, so no grant is needed).
		creds := ne.GetSecret("keyledger-journal-credentials")
		leakyNS.JournalClient(leakyNS.NS, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: creds.Name}, Type: creds.Type, Data: creds.Data})
		noEgress := ne.RetirementOverlay("no-egress", s.Name, canary, command, false)
		leaky := leakyNS.RetirementOverlay("leaky", s.Name, canary, command, true)
		host, _, err := net.SplitHostPort(canary)
		require.NoError(t, err)
		allowCanary := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-canary"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "keyledger", "app.kubernetes.io/component": "retire"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: host + "/32"}}}}},
		}}
		_, err = ne.Kube.Client().NetworkingV1().NetworkPolicies(leakyNS.NS).Create(t.Context(), allowCanary, metav1.CreateOptions{})
		require.NoError(t, err)
		ne.ApplyAll(noEgress)
		leakyNS.ApplyAll(leaky)
		for _, tc := range []struct {
			env                *nodeEnv
			job                string
			apiOK, canaryReach bool
		}{
			{ne, "keyledger-retire-no-egress", false, false},
			{&leakyNS, "keyledger-retire-leaky", true, true},
		} {
			end := tc.env.WaitJob(tc.job, 3*time.Minute)
			require.True(t, end.Failed, "%s must fail", tc.job)
			pod := end.Pod
			require.Equal(t, 69, suite.ContainerExit(pod.Status.InitContainerStatuses, "preflight"), "%s: the gate exits 69", tc.job)
			for _, cs := range pod.Status.ContainerStatuses {
				require.Nil(t, cs.State.Running, "%s: main container never ran", tc.job)
				require.Nil(t, cs.State.Terminated, "%s: main container never ran", tc.job)
				require.Zero(t, cs.RestartCount)
			}
			out := suite.OutcomeLine(t, tc.env.Logs(pod, "preflight"))
			require.Equal(t, "not-ready", out["outcome"])
			require.Equal(t, tc.apiOK, out["api"].(map[string]any)["ok"], "%s: %v", tc.job, out)
			require.Equal(t, tc.canaryReach, out["canary"].(map[string]any)["reachable"], "%s: %v", tc.job, out)
			require.Greater(t, out["checks"], float64(1), "%s: the gate kept checking until its deadline", tc.job)
		}
		st, err := store.Open(t.Context(), ne.Journal.OwnerURL)
		require.NoError(t, err)
		defer st.Close()
		_, err = st.Load(t.Context(), "", mutation)
		require.True(t, errors.Is(err, store.ErrNotFound), "nothing journaled: %v", err)
		require.Equal(t, s.ResourceVersion, ne.GetSecret(s.Name).ResourceVersion)
	})

	t.Run("completed-then-existing", func(t *testing.T) {
		objs := ne.RetirementOverlay("run", s.Name, canary, command, true)
		const job = "keyledger-retire-run"
		want := []string{"completed", "existing"}
		var firstRV string
		for i, outcomeWord := range want {
			if i > 0 {
				ne.DeleteJob(job) // the operator's rerun: same command, a new Job
			}
			ne.ApplyAll(objs)
			end := ne.WaitJob(job, 3*time.Minute)
			require.True(t, end.Complete, "run %d failed: %s", i+1, ne.Describe(end.Pod))
			log := ne.Logs(end.Pod, "keyledger")
			require.Equal(t, "ready", suite.OutcomeLine(t, ne.Logs(end.Pod, "preflight"))["outcome"])
			require.Equal(t, outcomeWord, suite.OutcomeLine(t, log)["outcome"], "run %d", i+1)

			// The pod as admitted: the init container has no volume and
			// no token; the main container's token is projected, 600 s.
			pod := end.Pod
			require.False(t, *pod.Spec.AutomountServiceAccountToken)
			require.Empty(t, pod.Spec.InitContainers[0].VolumeMounts, "the gate has no volume and no token")
			var expiry int64
			for _, v := range pod.Spec.Volumes {
				if v.Projected != nil {
					for _, src := range v.Projected.Sources {
						if src.ServiceAccountToken != nil {
							expiry = *src.ServiceAccountToken.ExpirationSeconds
						}
					}
				}
			}
			require.EqualValues(t, 600, expiry)
			after := ne.GetSecret(s.Name)
			if i == 0 {
				firstRV = after.ResourceVersion
				suite.RequireRetired(t, after, "k-2026-07", mutation, before)
			}
			require.Equal(t, firstRV, after.ResourceVersion, "the second Job writes nothing")
		}
		require.Equal(t, 1, ne.SecretWrites(s.Name, s.ResourceVersion, firstRV), "the Secret was written once")

		r := ne.Keyledger([]string{"journal", "show", mutation, "-o", "json"})
		require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
		var shown struct {
			State   string `json:"state"`
			Records []struct {
				Kind string `json:"kind"`
			} `json:"records"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &shown), r.Stdout)
		require.Equal(t, string(store.StateCompleted), shown.State)
		kinds := map[string]int{}
		for _, rec := range shown.Records {
			kinds[rec.Kind]++
		}
		require.Equal(t, 1, kinds[string(store.RecordPreparation)], "one preparation: %v", kinds)
		require.Equal(t, 1, kinds[string(store.RecordCompletion)], "one completion: %v", kinds)
	})
	return nodeTenant{ns: ne.NS, roleURL: ne.Journal.OperatorURL, mutations: []string{mutation}}
}
