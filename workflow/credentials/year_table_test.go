package credentials

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/kubetest"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// replan makes the env's plan spec, under the same mutationId (the plan's
// next version).
func (e *env) replan(spec Spec) {
	e.t.Helper()
	raw, err := json.Marshal(spec)
	require.NoError(e.t, err)
	cmd, err := decode(e.t, `{"apiVersion":"keyledger.dev/v1","kind":"CredentialPlan","metadata":{"requestId":"r-1","mutationId":"m-1"},"spec":`+string(raw)+`}`)
	require.NoError(e.t, err)
	e.cmd = cmd
}

// prepDigest is the command digest run's preparation record holds.
func (e *env) prepDigest(run string) string {
	e.t.Helper()
	_, records, err := e.j.Snapshot(context.Background(), "", run)
	require.NoError(e.t, err)
	return records[0].Digest
}

// unknownServer scripts the Valkey pod's probe to answer unknown forever.
func unknownServer(e *env) {
	e.k.putPod(podApp, "stale")
	script := make([]ProbeResult, 50)
	for i := range script {
		script[i] = ProbeResult{Status: ProbeUnknown, Reason: "tls-required"}
	}
	e.k.probes[podApp] = script
}

// TestConvergenceTable: runs that cannot finish never pin the plan.
func TestConvergenceTable(t *testing.T) {
	t.Parallel()
	runTable(t, []row{
		{Name: "one server unknown: the Secrets and the other server still converge", Setup: respec(withServers, unknownServer), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "uncertain/"+ReasonProbeUnknown, r.Ending())
			e.requirePlanned(secretApp, true)
			e.requirePlanned(secretBus, true)
			require.Contains(t, r.trail(store.RecordProbe, ""), "probe-server pod/shop-bus-0 skipped/pod-absent", "the other server was looked at")
			require.Zero(t, e.k.count(opDeletePod, podApp), "an unknown answer restarts nothing")
		}},
		{Name: "resumed: a Secret settled before the resume and deleted since is created again", Setup: respec(withServers, unknownServer), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "uncertain/"+ReasonProbeUnknown, r.Ending())
			first := e.secret(secretBus).UID
			e.k.Remove(kubetest.Secrets, secretBus)
			mark := e.k.Mark()
			again := e.run()
			require.Equal(t, r.op.MutationID, again.op.MutationID, "the same run, resumed")
			require.Equal(t, "uncertain/"+ReasonProbeUnknown, again.Ending())
			require.NotEqual(t, first, e.secret(secretBus).UID, "recreated")
			e.requirePlanned(secretBus, true)
			require.Equal(t, 2, e.k.countSince(mark, opGetSecret, secretApp),
				"the other settled Secret is read again, then by the probe")
			require.Zero(t, e.k.countSince(mark, opCreateSecret, secretApp), "and not POSTed")
		}},
		{Name: "resumed past the bound: the stuck run is closed and a fresh run replaces it", Setup: respec(withServers, unknownServer), Check: func(t *testing.T, e *env, r result) {
			bound := e.plan().Prepare.Bound
			require.Equal(t, DefaultRunBound, bound)
			for range bound.MaxResumes {
				require.Equal(t, r.op.MutationID, e.run().op.MutationID)
			}
			fresh := e.run()
			require.Equal(t, store.RunID("m-1", 2), fresh.op.MutationID, "a fresh run")
			require.Equal(t, "m-1:run-1", workflowtest.Fields(fresh.records[0].Detail)["replaces"])
			require.Equal(t, store.ReasonRunResumeLimit, workflowtest.Fields(fresh.records[0].Detail)["replacedBecause"])
			closed, records, err := e.j.Snapshot(context.Background(), "", "m-1:run-1")
			require.NoError(t, err)
			require.Equal(t, store.StateRefused, closed.State)
			require.Equal(t, store.ReasonRunResumeLimit, closed.Reason)
			require.Equal(t, store.StepCloseRun, records[len(records)-1].Step)
		}},
	})
}

// TestRestartOncePerCauseTable: a pod that still refuses after keyledger
// restarted it is not restarted again by any later run until its Secret,
// its spec or its controller's revision changes.
func TestRestartOncePerCauseTable(t *testing.T) {
	t.Parallel()
	// refusesForever: every incarnation of the Valkey pod keeps a password
	// no Secret holds.
	refusesForever := func(e *env) {
		e.k.putPod(podApp, "stale")
		e.k.serverSecret = func(string) (string, string) { return "", "" }
	}
	runTable(t, []row{
		{Name: "run 1 restarts once; runs 2 and 3 refuse naming the pod and restart nothing", Setup: respec(withServers, refusesForever), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonServerStillRefuses, r.Ending())
			require.Equal(t, 1, e.k.count(opDeletePod, podApp))
			for run := 2; run <= 3; run++ {
				r = e.run()
				require.Equal(t, "refused/"+ReasonServerStillRefuses, r.Ending(), "run %d", run)
				require.Equal(t, podApp, r.summary()["pod"])
				require.Equal(t, "m-1:run-1", r.summary()["restartedBy"])
				require.Equal(t, secretApp, r.summary()["secret"])
				require.Equal(t, "proven", r.summary()["authorship"], "a declined restart names the Secret's authorship")
				require.Equal(t, 1, e.k.count(opDeletePod, podApp), "run %d restarts nothing", run)
			}
		}},
		{Name: "the Secret changed since the restart: one more restart", Setup: respec(withServers, refusesForever), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, 1, e.k.count(opDeletePod, podApp))
			e.k.Touch(kubetest.Secrets, secretApp) // a new resourceVersion
			require.Equal(t, "refused/"+ReasonServerStillRefuses, e.run().Ending())
			require.Equal(t, 2, e.k.count(opDeletePod, podApp), "a new cause")
		}},
		{Name: "the controller's revision changed since the restart: one more restart", Setup: respec(withServers, refusesForever), Check: func(t *testing.T, e *env, r result) {
			e.k.editPod(podApp, func(p *corev1.Pod) { p.Labels["controller-revision-hash"] = "shop-app-2" })
			require.Equal(t, "refused/"+ReasonServerStillRefuses, e.run().Ending())
			require.Equal(t, 2, e.k.count(opDeletePod, podApp), "a new cause")
		}},
		{Name: "the pod's spec changed since the restart: one more restart", Setup: respec(withServers, refusesForever), Check: func(t *testing.T, e *env, r result) {
			// A rollout: the StatefulSet's template and its pod alike.
			e.k.editSet("shop-app", func(s *appsv1.StatefulSet) *appsv1.StatefulSet {
				s.Spec.Template.Spec.Containers[0].Image = "server:2"
				return s
			})
			e.k.editPod(podApp, func(p *corev1.Pod) { p.Spec.Containers[0].Image = "server:2" })
			require.Equal(t, "refused/"+ReasonServerStillRefuses, e.run().Ending())
			require.Equal(t, 2, e.k.count(opDeletePod, podApp), "a new cause")
		}},
		{Name: "the delete names its cause", Setup: respec(withServers, refusesForever), Check: func(t *testing.T, e *env, r result) {
			call := callOf(r, stepDeletePod, "pod/"+podApp)
			require.NotEmpty(t, call.Digest)
			cause := workflowtest.Fields(call.Detail)["cause"].(map[string]any)
			require.Equal(t, e.secret(secretApp).ResourceVersion, cause["secretResourceVersion"])
			require.Equal(t, "shop-app-1", cause["revision"])
		}},
	})
}

// TestProbeEligibilityTable: the password goes only to a Running, Ready,
// not terminating, not host-network pod whose IP is listed and whose
// controller is the one the plan expects; any other is unknown, probed not.
func TestProbeEligibilityTable(t *testing.T) {
	t.Parallel()
	pod := func(mod func(p *corev1.Pod)) func(e *env) {
		return func(e *env) {
			e.k.putPod(podApp, "stale")
			e.k.editPod(podApp, mod)
		}
	}
	now := metav1.NewTime(time.Now())
	cases := map[string]func(p *corev1.Pod){
		"pod-not-running":  func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed },
		"pod-terminating":  func(p *corev1.Pod) { p.DeletionTimestamp = &now },
		"pod-not-ready":    func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse },
		"pod-host-network": func(p *corev1.Pod) { p.Spec.HostNetwork = true },
		"pod-ip-not-listed": func(p *corev1.Pod) {
			p.Status.PodIPs = []corev1.PodIP{{IP: "10.9.9.9"}}
		},
		"no-pod-ip":               func(p *corev1.Pod) { p.Status.PodIP, p.Status.PodIPs = "", nil },
		"pod-controller-mismatch": func(p *corev1.Pod) { p.OwnerReferences[0].Name = "someone-else" },
	}
	var rows []row
	for reason, mod := range cases {
		rows = append(rows, row{Name: reason, Setup: respec(withServers, pod(mod)), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "uncertain/"+ReasonProbeUnknown, r.Ending())
			require.Zero(t, e.k.probed[podApp], "nothing is sent to it")
			require.Contains(t, r.trail(store.RecordProbe, ""), "probe-server pod/shop-app-0 unknown/"+reason)
			require.Zero(t, e.k.count(opDeletePod, podApp))
		}})
	}
	rows = append(rows, row{Name: "a named controller is the one expected", Setup: respec(func(s Spec) Spec {
		s = withServers(s)
		s.Servers[0].Controller = &Controller{Kind: "StatefulSet", Name: "other"}
		return s
	}, pod(func(p *corev1.Pod) {
		p.OwnerReferences[0].Name, p.OwnerReferences[0].UID, p.Labels["app"] = "other", "uid-sts-other", "other"
	})), Check: func(t *testing.T, e *env, r result) {
		require.Equal(t, 1, e.k.probed[podApp], "probed")
	}})
	runTable(t, rows)
}

// TestServerOwnershipTable: a pod named like the planned server, with a
// controller owner reference of the planned kind and name, gets the
// password only when it is tied to the live StatefulSet: the owner
// reference's group is apps and its UID the live StatefulSet's, the
// StatefulSet's selector matches it, and its containers are the
// template's. Any other is not probed (not one connection), nothing is
// restarted, and the run refuses server-not-owned naming the pod and the
// check it failed.
func TestServerOwnershipTable(t *testing.T) {
	t.Parallel()
	planted := func(mod func(e *env, p *corev1.Pod)) func(e *env) {
		return func(e *env) {
			e.k.putPod(podApp, "stale")
			e.k.editPod(podApp, func(p *corev1.Pod) { mod(e, p) })
		}
	}
	template := func(change func(s *appsv1.StatefulSet)) func(e *env, p *corev1.Pod) {
		return func(e *env, _ *corev1.Pod) {
			e.k.editSet("shop-app", func(s *appsv1.StatefulSet) *appsv1.StatefulSet { change(s); return s })
		}
	}
	cases := map[string]struct {
		check string
		mod   func(e *env, p *corev1.Pod)
	}{
		"the owner reference names the StatefulSet in another group": {checkOwnerGroup, func(_ *env, p *corev1.Pod) {
			p.OwnerReferences[0].APIVersion = "example.com/v1"
		}},
		"the owner reference names the StatefulSet in the core group": {checkOwnerGroup, func(_ *env, p *corev1.Pod) {
			p.OwnerReferences[0].APIVersion = "v1"
		}},
		"the owner reference carries another UID": {checkOwnerUID, func(_ *env, p *corev1.Pod) {
			p.OwnerReferences[0].UID = "uid-planted"
		}},
		"no such StatefulSet": {checkControllerAbsent, func(e *env, _ *corev1.Pod) {
			e.k.editSet("shop-app", func(*appsv1.StatefulSet) *appsv1.StatefulSet { return nil })
		}},
		"the StatefulSet's selector does not match the pod": {checkSelector, func(_ *env, p *corev1.Pod) { p.Labels["app"] = "planted" }},
		"the real UID but another image": {checkContainers, func(_ *env, p *corev1.Pod) {
			p.Spec.Containers[0].Image = "listener:1"
		}},
		"the real UID but another command": {checkContainers, func(_ *env, p *corev1.Pod) {
			p.Spec.Containers[0].Command = []string{"nc", "-l", "6379"}
		}},
		"the real UID but other args": {checkContainers, func(_ *env, p *corev1.Pod) {
			p.Spec.Containers[0].Args = []string{"--port", "6379"}
		}},
		"the real UID but other env": {checkContainers, func(_ *env, p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "listen"}}
		}},
		"the real UID and a container more": {checkContainers, func(_ *env, p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "listener", Image: "listener:1"})
		}},
		"the real UID and a sidecar init container": {checkContainers, func(_ *env, p *corev1.Pod) {
			always := corev1.ContainerRestartPolicyAlways
			p.Spec.InitContainers = []corev1.Container{{Name: "listener", Image: "listener:1", RestartPolicy: &always}}
		}},
		"a pod of an older template": {checkContainers, template(func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.Containers[0].Image = "server:2"
		})},
	}
	var rows []row
	for name, c := range cases {
		rows = append(rows, row{Name: name, Setup: respec(withServers, planted(c.mod)), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonServerNotOwned, r.Ending())
			require.Zero(t, e.k.probed[podApp], "nothing is sent to it")
			require.Contains(t, r.trail(store.RecordProbe, ""), "probe-server pod/shop-app-0 unknown/"+ReasonServerNotOwned)
			require.Zero(t, e.k.count(opDeletePod, podApp), "nothing is restarted")
			require.Equal(t, []any{map[string]any{"pod": podApp, "check": c.check}}, r.summary()["notOwned"])
		}})
	}
	rows = append(rows,
		row{Name: "the StatefulSet's own pod, env and all, is probed", Setup: respec(withServers, planted(func(e *env, p *corev1.Pod) {
			env := []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: secretApp}, Key: "password"}}}}
			e.k.editSet("shop-app", func(s *appsv1.StatefulSet) *appsv1.StatefulSet {
				s.Spec.Template.Spec.Containers[0].Env = env
				return s
			})
			p.Spec.Containers[0].Env = env
		})), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, 2, e.k.probed[podApp], "probed, restarted, probed again")
		}},
		row{Name: "the StatefulSet cannot be read: unavailable, nothing sent", Setup: respec(withServers, func(e *env) {
			e.k.putPod(podApp, "stale")
			e.k.setErr = kube.Wrap(kubetest.ServerError())
		}), Check: func(t *testing.T, e *env, r result) {
			require.NotEqual(t, "completed", r.Ending())
			require.Zero(t, e.k.probed[podApp], "nothing is sent to it")
			require.Zero(t, e.k.count(opDeletePod, podApp))
		}},
	)
	runTable(t, rows)
}

// TestPlanVersionsTable: a changed plan under the same mutationId is the
// plan's next version.
func TestPlanVersionsTable(t *testing.T) {
	t.Parallel()
	runTable(t, []row{
		{Name: "a Secret and a key more: created and patched in, no value touched; a dropped Secret is left", Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			app, bus := e.secret(secretApp), e.secret(secretBus)
			v2 := basePlan()
			v2.Secrets[0].Keys = append(v2.Secrets[0].Keys, Key{Name: "username", Value: new("app")})
			v2.Secrets = append(v2.Secrets[:1], Secret{Name: "shop-new", Keys: []Key{{Name: "password", Generate: &Generate{Length: 24, Alphabet: AlphabetHex}}}})
			e.replan(v2)
			r = e.run()
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, store.RunID("m-1", 2), r.op.MutationID)
			require.NotEqual(t, r.records[0].Digest, e.prepDigest("m-1:run-1"), "journaled with its own digest")
			require.Equal(t, e.prepDigest("m-1:run-1"), workflowtest.Fields(r.records[0].Detail)["supersedes"])
			now := e.secret(secretApp)
			require.Equal(t, app.Data["password"], now.Data["password"], "an existing value is byte-identical")
			require.Equal(t, "app", string(now.Data["username"]), "the missing key added")
			e.requirePlanned("shop-new", true)
			require.Equal(t, bus.ResourceVersion, e.secret(secretBus).ResourceVersion, "the dropped Secret is left in place, untouched")
			require.Equal(t, []string{"patch-secret secret/shop-app applied/patched", "create-secret secret/shop-new applied/created"},
				r.trail(store.RecordAuthorityResult, ""), "nothing else is written")
		}},
		{Name: "another owner under the same mutationId is refused", Check: func(t *testing.T, e *env, r result) {
			other := basePlan()
			other.Owner = "someone-else"
			e.replan(other)
			_, err := workflow.Operate(context.Background(), e.j, e.plan(), nil)
			var refused *workflow.Refused
			require.ErrorAs(t, err, &refused)
			require.Equal(t, "mutation-id-reused", refused.Reason)
			runs, err := e.j.Runs(context.Background(), "m-1")
			require.NoError(t, err)
			require.Len(t, runs, 1, "nothing journaled")
		}},
	})
}

// TestRunBoundSettings: the settings' defaults and validation.
func TestRunBoundSettings(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1], true
				}
			}
			return "", false
		}
	}
	b, err := RunBoundFromEnv(env())
	require.NoError(t, err)
	require.Equal(t, DefaultRunBound, b)
	b, err = RunBoundFromEnv(env(EnvRunMaxResumes, "3", EnvRunMaxAge, "90m"))
	require.NoError(t, err)
	require.Equal(t, store.RunBound{MaxResumes: 3, MaxAge: 90 * time.Minute}, b)
	for _, bad := range [][]string{
		{EnvRunMaxResumes, "0"}, {EnvRunMaxResumes, "1001"}, {EnvRunMaxResumes, "03"}, {EnvRunMaxResumes, " 3"}, {EnvRunMaxResumes, "x"},
		{EnvRunMaxAge, "30s"}, {EnvRunMaxAge, "721h"}, {EnvRunMaxAge, "6"}, {EnvRunMaxAge, ""},
	} {
		_, err := RunBoundFromEnv(env(bad...))
		require.ErrorContains(t, err, bad[0], "%v", bad)
		require.NotContains(t, err.Error(), "\""+bad[1]+"\"", "the value is not repeated")
	}
}

// TestProbeRepliesAreBounded: a server that answers with an endless line
// is unknown (reply-too-large) after a bounded read, for both protocols.
func TestProbeRepliesAreBounded(t *testing.T) {
	t.Parallel()
	for _, protocol := range []string{ProtocolValkey, ProtocolNATS} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
		sent := make(chan int, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			chunk := bytes.Repeat([]byte("x"), 4096)
			n := 0
			for n < 8<<20 {
				w, err := c.Write(chunk)
				n += w
				if err != nil {
					break
				}
			}
			sent <- n
		}()
		res := Probe(t.Context(), protocol, ln.Addr().String(), []byte("u"), []byte("p"))
		require.Equal(t, ProbeResult{Status: ProbeUnknown, Reason: "reply-too-large"}, res, protocol)
	}
}
