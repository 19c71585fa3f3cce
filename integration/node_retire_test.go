package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/store"
)

// canaryPod runs a TCP listener in a namespace of its own (no policy
// selects it) and returns its IP:port: reachable from any pod that no
// egress policy fences, and from nothing that is fenced.
func (ne *nodeEnv) canaryPod() string {
	ne.t.Helper()
	ns := ne.kube.Namespace(ne.t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "canary"}, Spec: corev1.PodSpec{
		AutomountServiceAccountToken: ptr(false),
		Containers: []corev1.Container{{Name: "listen", Image: platform.NodeToolImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{"listen", ":8080"}}},
	}}
	_, err := ne.kube.Client().CoreV1().Pods(ns).Create(ne.t.Context(), pod, metav1.CreateOptions{})
	require.NoError(ne.t, err)
	other := *ne
	other.env = &env{t: ne.t, kube: ne.kube, ns: ns}
	return net.JoinHostPort(other.waitPodRunning("canary", 60*time.Second), "8080")
}

// waitPodRunning waits until the pod runs and has an IP.
func (ne *nodeEnv) waitPodRunning(name string, limit time.Duration) string {
	ne.t.Helper()
	ctx, cancel := context.WithTimeout(ne.t.Context(), limit)
	defer cancel()
	for {
		p, err := ne.kube.Client().CoreV1().Pods(ne.ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			return p.Status.PodIP
		}
		select {
		case <-ctx.Done():
			ne.t.Fatalf("pod %s/%s not running within %s; node logs in %s", ne.ns, name, limit, ne.node.StateDir())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// apiEndpoint is the address behind the kubernetes Service (what an
// operator fills into the api-egress component).
func (ne *nodeEnv) apiEndpoint() (string, int) {
	ne.t.Helper()
	u, err := url.Parse(ne.kube.Host())
	require.NoError(ne.t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(ne.t, err)
	require.Equal(ne.t, platform.NodeAddress, u.Hostname())
	return u.Hostname(), port
}

// retirementOverlay renders the private overlay deploy/README.md tells an
// operator to write, on the cloudnativepg overlay, with the node test image.
func (ne *nodeEnv) retirementOverlay(suffix, secretName, canary string, command map[string]any, apiEgress bool, edits ...func(*privateOverlay)) []*unstructured.Unstructured {
	ne.t.Helper()
	cmd, err := json.Marshal(command)
	require.NoError(ne.t, err)
	o := privateOverlay{Namespace: ne.ns, NameSuffix: suffix, SecretName: secretName, Canary: canary, Command: cmd,
		ImageName: imageName(nodeShared.image), ImageTag: imageTag(nodeShared.image)}
	if apiEgress {
		o.APIServerIP, o.APIServerPort = ne.apiEndpoint()
	}
	for _, edit := range edits {
		edit(&o)
	}
	objs := renderPrivate(ne.t, o)
	require.Empty(ne.t, audit(objs), "the overlay passes the deployment audit")
	ne.cleanupClusterScoped(objs)
	return objs
}

// cleanupClusterScoped deletes the cluster-scoped objects of objs when the
// test ends (the namespace's deletion removes the rest).
func (ne *nodeEnv) cleanupClusterScoped(objs []*unstructured.Unstructured) {
	a := ne.applier()
	for _, obj := range objs {
		if obj.GetKind() != "ClusterRole" && obj.GetKind() != "ClusterRoleBinding" {
			continue
		}
		ri, err := a.resource(obj.DeepCopy(), ne.ns)
		require.NoError(ne.t, err)
		name := obj.GetName()
		ne.t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := ri.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				ne.t.Errorf("deleting %s: %v", name, err)
			}
		})
	}
}

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
	ne.joinJournal()
	canary := ne.canaryPod()
	before := standardKeyring()
	s := ne.createSecret(keyringSecret("prompt-output-keyring", before))
	const mutation = "mut-node-retire"
	command := retireCommand(s, "k-2026-07", mutation)

	t.Run("control-job-reaches-the-canary", func(t *testing.T) {
		fsys := deployFS(t)
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
`, ne.ns, canary, imageName(nodeShared.image), imageTag(nodeShared.image)))))
		ne.applyAll(render(t, fsys, "/my-control"))
		end := ne.waitJob("keyledger-preflight-control", 2*time.Minute)
		log := ne.logs(end.Pod, "preflight")
		require.True(t, end.Complete, "control Job failed: %s", log)
		out := outcomeLine(t, log)
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
		leakyNS.env = &env{t: t, kube: ne.kube, ns: ne.kube.Namespace(t), dir: t.TempDir()}
		// The pod mounts the journal's CA before any container starts: the
		// second namespace has the journal client's objects too (the main
		// container never starts there, so no grant is needed).
		creds := ne.getSecret("keyledger-journal-credentials")
		leakyNS.journalClient(leakyNS.ns, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: creds.Name}, Type: creds.Type, Data: creds.Data})
		noEgress := ne.retirementOverlay("no-egress", s.Name, canary, command, false)
		leaky := leakyNS.retirementOverlay("leaky", s.Name, canary, command, true)
		host, _, err := net.SplitHostPort(canary)
		require.NoError(t, err)
		allowCanary := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-canary"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "keyledger", "app.kubernetes.io/component": "retire"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: host + "/32"}}}}},
		}}
		_, err = ne.kube.Client().NetworkingV1().NetworkPolicies(leakyNS.ns).Create(t.Context(), allowCanary, metav1.CreateOptions{})
		require.NoError(t, err)
		ne.applyAll(noEgress)
		leakyNS.applyAll(leaky)
		for _, tc := range []struct {
			env                *nodeEnv
			job                string
			apiOK, canaryReach bool
		}{
			{ne, "keyledger-retire-no-egress", false, false},
			{&leakyNS, "keyledger-retire-leaky", true, true},
		} {
			end := tc.env.waitJob(tc.job, 3*time.Minute)
			require.True(t, end.Failed, "%s must fail", tc.job)
			pod := end.Pod
			require.Equal(t, 69, containerExit(pod.Status.InitContainerStatuses, "preflight"), "%s: the gate exits 69", tc.job)
			for _, cs := range pod.Status.ContainerStatuses {
				require.Nil(t, cs.State.Running, "%s: main container never ran", tc.job)
				require.Nil(t, cs.State.Terminated, "%s: main container never ran", tc.job)
				require.Zero(t, cs.RestartCount)
			}
			out := outcomeLine(t, tc.env.logs(pod, "preflight"))
			require.Equal(t, "not-ready", out["outcome"])
			require.Equal(t, tc.apiOK, out["api"].(map[string]any)["ok"], "%s: %v", tc.job, out)
			require.Equal(t, tc.canaryReach, out["canary"].(map[string]any)["reachable"], "%s: %v", tc.job, out)
			require.Greater(t, out["checks"], float64(1), "%s: the gate kept checking until its deadline", tc.job)
		}
		st, err := store.Open(t.Context(), ne.journal.OwnerURL)
		require.NoError(t, err)
		defer st.Close()
		_, err = st.Load(t.Context(), "", mutation)
		require.True(t, errors.Is(err, store.ErrNotFound), "nothing journaled: %v", err)
		require.Equal(t, s.ResourceVersion, ne.getSecret(s.Name).ResourceVersion)
	})

	t.Run("completed-then-existing", func(t *testing.T) {
		objs := ne.retirementOverlay("run", s.Name, canary, command, true)
		const job = "keyledger-retire-run"
		want := []string{"completed", "existing"}
		var firstRV string
		for i, outcomeWord := range want {
			if i > 0 {
				ne.deleteJob(job) // the operator's rerun: same command, a new Job
			}
			ne.applyAll(objs)
			end := ne.waitJob(job, 3*time.Minute)
			require.True(t, end.Complete, "run %d failed: %s", i+1, ne.describe(end.Pod))
			log := ne.logs(end.Pod, "keyledger")
			require.Equal(t, "ready", outcomeLine(t, ne.logs(end.Pod, "preflight"))["outcome"])
			require.Equal(t, outcomeWord, outcomeLine(t, log)["outcome"], "run %d", i+1)

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
			after := ne.getSecret(s.Name)
			if i == 0 {
				firstRV = after.ResourceVersion
				requireRetired(t, after, "k-2026-07", mutation, before)
			}
			require.Equal(t, firstRV, after.ResourceVersion, "the second Job writes nothing")
		}
		require.Equal(t, 1, ne.secretWrites(s.Name, s.ResourceVersion, firstRV), "the Secret was written once")

		r := ne.keyledger([]string{"journal", "show", mutation, "-o", "json"})
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
	return nodeTenant{ns: ne.ns, roleURL: ne.journal.OperatorURL, mutations: []string{mutation}}
}
