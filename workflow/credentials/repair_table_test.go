package credentials

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/kubetest"
)

// staleServer starts the Valkey pod with a password no plan generates; the
// NATS pod does not run (its probe is skipped).
func staleServer(e *env) { e.k.putPod(podApp, "stale") }

func (e *env) pod(name string) string {
	if p := e.k.pod(name); p != nil {
		return string(p.UID)
	}
	return ""
}

// TestDeletePodTable: the probes, and the delete-pod call that repairs a
// server refusing the password its Secret holds (UID precondition), then
// the bounded wait for the replacement and the probe again.
func TestDeletePodTable(t *testing.T) {
	t.Parallel()
	pod := "pod/" + podApp
	// repaired: the pod that refused (named by the first probe) is gone,
	// its replacement accepted.
	repairedAsked := func(t *testing.T, e *env, r result, asked bool) {
		t.Helper()
		before := firstRecordOf(r, store.RecordProbe, stepProbe, pod).UID
		require.NotEmpty(t, before)
		require.Equal(t, "completed", r.Ending())
		require.Equal(t, map[string]any{"accepted": 1.0, "skipped": 1.0, "repaired": 1.0}, r.summary()["servers"])
		require.NotEqual(t, before, e.pod(podApp), "a new pod")
		trail := []string{"probe-server pod/shop-app-0 refused/wrongpass", "probe-server pod/shop-app-0 accepted/ok",
			"probe-server pod/shop-bus-0 skipped/pod-absent"}
		if asked {
			// The delete found not applied is sent again only after a
			// probe made now still finds the pod refusing (workflow.Asker).
			trail = append([]string{"probe-server pod/shop-app-0 refused/wrongpass"}, trail...)
		}
		require.Equal(t, trail, r.trail(store.RecordProbe, ""))
	}
	repaired := func(t *testing.T, e *env, r result) { t.Helper(); repairedAsked(t, e, r, false) }
	start := staleServer
	runTable(t, []row{
		{Name: "applied", Setup: respec(withServers, start), Check: func(t *testing.T, e *env, r result) {
			repaired(t, e, r)
			require.Equal(t, 1, e.k.written(pod))
			require.Equal(t, firstRecordOf(r, store.RecordProbe, stepProbe, pod).UID, callOf(r, stepDeletePod, pod).UID, "the delete names the refusing pod")
			require.Equal(t, e.pod(podApp), recordOf(r, store.RecordProbe, stepProbe, pod).UID, "the probe after the delete names the replacement")
		}},
		{Name: "lost-after-apply", Setup: respec(withServers, func(e *env) {
			start(e)
			e.k.script(on(opDeletePod, podApp, kubetest.AppliedLost()))
		}), Check: func(t *testing.T, e *env, r result) {
			repaired(t, e, r)
			require.Equal(t, []string{"delete-pod pod/shop-app-0 ours/replaced"}, r.trail(store.RecordResolution, ""))
			require.Equal(t, 1, e.k.count(opDeletePod, podApp))
		}},
		{Name: "lost-before-apply", Setup: respec(withServers, func(e *env) {
			start(e)
			e.k.script(on(opDeletePod, podApp, kubetest.LostBefore()))
		}), Check: func(t *testing.T, e *env, r result) {
			repairedAsked(t, e, r, true)
			require.Equal(t, []string{"delete-pod pod/shop-app-0 not-applied/still-running"}, r.trail(store.RecordResolution, ""))
			require.Equal(t, 2, e.k.count(opDeletePod, podApp))
			require.Equal(t, 1, e.k.written(pod))
		}},
		{Name: "409 someone else restarted it first", Setup: respec(withServers, func(e *env) {
			start(e)
			e.k.script(on(opDeletePod, podApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.Remove(kubetest.Pods, podApp)
				k.replace(podApp)
			}))))
		}), Check: func(t *testing.T, e *env, r result) {
			repaired(t, e, r)
			require.Equal(t, "unknown/precondition-failed", func() string {
				res := recordOf(r, store.RecordAuthorityResult, stepDeletePod, pod)
				return string(res.Status) + "/" + string(res.Reason)
			}())
			require.Equal(t, []string{"delete-pod pod/shop-app-0 ours/replaced"}, r.trail(store.RecordResolution, ""))
			require.Zero(t, e.k.written(pod), "their restart, not ours")
		}},
		{Name: "404 someone deleted it first", Setup: respec(withServers, func(e *env) {
			start(e)
			e.k.script(on(opDeletePod, podApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.Remove(kubetest.Pods, podApp)
				k.replace(podApp)
			}))))
			e.k.script(on(opDeletePod, podApp, kubetest.Status(kubetest.NotFound(kubetest.Pods, podApp))))
		}), Check: func(t *testing.T, e *env, r result) {
			repaired(t, e, r)
		}},
		{Name: "500 not applied", Setup: respec(withServers, func(e *env) {
			start(e)
			e.k.script(on(opDeletePod, podApp, kubetest.Status(kubetest.ServerError())))
		}), Check: func(t *testing.T, e *env, r result) {
			repairedAsked(t, e, r, true)
			require.Equal(t, 2, e.k.count(opDeletePod, podApp))
		}},
		{Name: "the replacement still refuses", Setup: respec(withServers, func(e *env) {
			start(e)
			e.k.probes[podApp] = []ProbeResult{{Status: ProbeRefused, Reason: "wrongpass"}, {Status: ProbeRefused, Reason: "wrongpass"}}
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonServerStillRefuses, r.Ending())
			require.Equal(t, podApp, r.summary()["pod"])
			require.Equal(t, 1, e.k.count(opDeletePod, podApp), "deleted once, never twice")
		}},
		{Name: "the replacement is not ready within the bound", Setup: respec(withServers, func(e *env) {
			start(e)
			e.k.noReplacement[podApp] = true
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "uncertain/"+ReasonReplacementNotReady, r.Ending())
			require.Equal(t, []string{"wait-replacement pod/shop-app-0 not-ready/" + ReasonReplacementNotReady}, r.trail(store.RecordObservation, "wait-replacement"),
				"journaled before the run ends")
			e.k.noReplacement[podApp] = false
			e.k.replace(podApp)
			again := e.run()
			require.Equal(t, "completed", again.Ending())
			require.Equal(t, r.op.MutationID, again.op.MutationID)
			require.Equal(t, 1, e.k.count(opDeletePod, podApp), "the rerun does not delete again")
			require.Equal(t, map[string]any{"accepted": 1.0, "skipped": 1.0, "repaired": 1.0}, again.summary()["servers"])
		}},
		{Name: "an unknown probe answer restarts nothing", Setup: respec(withServers, func(e *env) {
			start(e)
			e.k.probes[podApp] = []ProbeResult{{Status: ProbeUnknown, Reason: "unexpected-reply"}}
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "uncertain/"+ReasonProbeUnknown, r.Ending())
			require.Equal(t, []string{"probe-server pod/shop-app-0 unknown/unexpected-reply", "probe-server pod/shop-bus-0 skipped/pod-absent"},
				r.trail(store.RecordProbe, ""), "every probe journaled before the run ends")
			require.Zero(t, e.k.count(opDeletePod, podApp))
			again := e.run()
			require.Equal(t, r.op.MutationID, again.op.MutationID)
			require.Equal(t, 3, e.k.probed[podApp], "the rerun probes again (refused), then the replacement")
			require.Equal(t, "completed", again.Ending())
			require.Equal(t, []string{"probe-server pod/shop-app-0 unknown/unexpected-reply", "probe-server pod/shop-bus-0 skipped/pod-absent",
				"probe-server pod/shop-app-0 refused/wrongpass", "probe-server pod/shop-app-0 accepted/ok"},
				again.trail(store.RecordProbe, ""), "the skipped server's probe is in the journal: not probed again")
			require.Equal(t, map[string]any{"accepted": 1.0, "skipped": 1.0, "repaired": 1.0}, again.summary()["servers"],
				"the summary counts each server's newest probe")
			require.Equal(t, 1, e.k.written(pod))
		}},
		{Name: "the replacement is not reachable at first: probed again until it answers", Setup: respec(withServers, func(e *env) {
			start(e)
			// A restarted server is Ready before the node's policy agent
			// lets the hook reach its new address: refused connections,
			// then the server's own answer.
			unreachable := ProbeResult{Status: ProbeUnknown, Reason: "connection-refused"}
			e.k.probes[podApp] = []ProbeResult{{Status: ProbeRefused, Reason: "wrongpass"}, unreachable, unreachable, {Status: ProbeRefused, Reason: "wrongpass"}}
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonServerStillRefuses, r.Ending())
			require.Equal(t, 1, e.k.count(opDeletePod, podApp), "deleted once, never twice")
			require.Equal(t, 4, e.k.probed[podApp], "the first pod once, its replacement until it answered")
			require.Equal(t, []string{"probe-server pod/shop-app-0 refused/wrongpass", "probe-server pod/shop-app-0 refused/wrongpass"},
				r.trail(store.RecordProbe, ""), "one probe record per probe of a server: its last answer")
		}},
		{Name: "a server never reachable within the bound: unknown, nothing restarted", Setup: respec(withServers, func(e *env) {
			start(e)
			unreachable := ProbeResult{Status: ProbeUnknown, Reason: "timeout"}
			e.k.probes[podApp] = []ProbeResult{unreachable, unreachable, unreachable, unreachable}
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "uncertain/"+ReasonProbeUnknown, r.Ending())
			require.Equal(t, 4, e.k.probed[podApp], "probed once, then again as often as the bound lets it")
			require.Equal(t, []string{"probe-server pod/shop-app-0 unknown/timeout", "probe-server pod/shop-bus-0 skipped/pod-absent"},
				r.trail(store.RecordProbe, ""))
			require.Zero(t, e.k.count(opDeletePod, podApp))
		}},
		{Name: "a pod replaced while it could not be reached: its successor gets no password", Setup: respec(withServers, func(e *env) {
			start(e)
			e.k.probes[podApp] = []ProbeResult{{Status: ProbeUnknown, Reason: "connection-refused"}}
			// The pod is replaced (new UID and address) before the probe
			// is sent again: the re-read of the pod sees it.
			e.k.script(on(opGetPod, podApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.Remove(kubetest.Pods, podApp)
				k.replace(podApp)
			})).After(1)))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "uncertain/"+ReasonProbeUnknown, r.Ending())
			require.Equal(t, []string{`valkey shop-app-0 6379 user=""`}, e.k.probeLog, "one probe, to the pod that was read")
			require.Equal(t, []string{"probe-server pod/shop-app-0 unknown/connection-refused", "probe-server pod/shop-bus-0 skipped/pod-absent"},
				r.trail(store.RecordProbe, ""))
			require.Zero(t, e.k.count(opDeletePod, podApp))
		}},
		{Name: "unknown, then another server's repair: probed again by the next decision", Setup: respec(withServers, func(e *env) {
			e.k.putSecret(theirSecret(secretApp, map[string]string{"password": "in-place"}, func(s *corev1.Secret) {
				s.Labels = map[string]string{"app.kubernetes.io/part-of": "shop"}
			}))
			e.k.putPod(podApp, "in-place")
			e.k.putPod(podBus, "stale")
			e.k.probes[podApp] = []ProbeResult{{Status: ProbeUnknown, Reason: "unexpected-reply"}}
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"probe-server pod/shop-app-0 unknown/unexpected-reply", "probe-server pod/shop-bus-0 refused/wrongpass",
				"probe-server pod/shop-app-0 accepted/ok", "probe-server pod/shop-bus-0 accepted/ok"}, r.trail(store.RecordProbe, ""))
			require.Equal(t, map[string]any{"accepted": 2.0, "skipped": 0.0, "repaired": 1.0}, r.summary()["servers"])
			require.Zero(t, e.k.count(opDeletePod, podApp), "an unknown answer deletes nothing")
			require.Equal(t, 1, e.k.count(opDeletePod, podBus))
		}},
		{Name: "a server accepting the password is left alone", Setup: respec(withServers, func(e *env) {
			e.k.putSecret(theirSecret(secretApp, map[string]string{"password": "in-place"}, func(s *corev1.Secret) {
				s.Labels = map[string]string{"app.kubernetes.io/part-of": "shop"}
			}))
			e.k.putSecret(theirSecret(secretBus, map[string]string{"user": "bus", "password": "bus-in-place"}))
			e.k.putPod(podApp, "in-place")
			e.k.putPod(podBus, "bus-in-place")
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "existing", r.Ending(), "nothing written")
			require.Equal(t, map[string]any{"accepted": 2.0, "skipped": 0.0, "repaired": 0.0}, r.summary()["servers"])
			require.Zero(t, e.k.count(opDeletePod, podApp))
			require.Equal(t, []string{`valkey shop-app-0 6379 user=""`, `nats shop-bus-0 4222 user="bus"`}, e.k.probeLog,
				"each server probed at its pod's IP and port, NATS with the user key's value")
		}},
		{Name: "no pod IP is an unknown answer", Setup: respec(withServers, func(e *env) {
			p := e.k.putPod(podApp, "stale")
			e.k.editPod(p.Name, func(p *corev1.Pod) { p.Status.PodIP = "" })
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "uncertain/"+ReasonProbeUnknown, r.Ending())
			require.Contains(t, r.trail(store.RecordProbe, ""), "probe-server pod/shop-app-0 unknown/no-pod-ip")
		}},
	})
}
