package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// auditMark is where the API server's audit log ends now: requests after
// it are counted by secretRequests.
func auditMark(e *env) int64 {
	e.T.Helper()
	fi, err := os.Stat(e.Kube.AuditLog())
	require.NoError(e.T, err)
	return fi.Size()
}

// secretRequests counts the requests on Secrets of the test's namespace
// that the API server audited after mark, by "verb name" (a list has no
// name): it sends a marker request and reads the log until the marker's
// event, so every earlier request is in.
func secretRequests(e *env, mark int64) map[string]int {
	e.T.Helper()
	marker := "zz-audit-marker-" + suite.RandomSuffix(e.T)
	_, err := e.Kube.Client().CoreV1().Secrets(e.NS).Get(e.T.Context(), marker, metav1.GetOptions{})
	require.True(e.T, apierrors.IsNotFound(err), "marker read: %v", err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		counts, seen := readAudit(e, mark, marker)
		if seen {
			return counts
		}
		require.True(e.T, time.Now().Before(deadline), "the audit marker never appeared")
		time.Sleep(100 * time.Millisecond)
	}
}

func readAudit(e *env, mark int64, marker string) (map[string]int, bool) {
	f, err := os.Open(e.Kube.AuditLog())
	require.NoError(e.T, err)
	defer f.Close()
	_, err = f.Seek(mark, 0)
	require.NoError(e.T, err)
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Stage     string `json:"stage"`
			Verb      string `json:"verb"`
			ObjectRef struct {
				Namespace, Name, Resource string
			} `json:"objectRef"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" || ev.ObjectRef.Namespace != e.NS {
			continue
		}
		if ev.ObjectRef.Name == marker {
			return counts, true
		}
		counts[ev.Verb+" "+ev.ObjectRef.Name]++
	}
	return counts, false
}

// A rerun of a complete 64-Secret plan sends no password anywhere: the API
// server audited no create, update or patch of a Secret and at most one
// GET of each, its watch history shows no write, and the run journals five
// records (preparation, the ExternalSecret check, two read-secrets records
// of 32 Secrets each, completion).
func TestIntegrationCredentialsRerunSendsNoPassword(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var secrets []suite.PlanSecret
	var names []string
	for i := range 64 {
		n := fmt.Sprintf("rerun-%02d", i)
		names = append(names, n)
		secrets = append(secrets, suite.StandardSecret(n))
	}
	plan := suite.CredentialPlan(e.NS, "mut-rerun", secrets)
	path := e.WriteCommand("plan.json", plan)
	as := e.AsCredentialRunner(plan)
	r := e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "run 1: %s %s", r.Stdout, r.Stderr)
	from, mark := e.SecretsRV(), auditMark(e)

	r = e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "run 2: %s %s", r.Stdout, r.Stderr)
	require.Equal(t, "existing", suite.Outcome(t, r)["outcome"])
	requests := secretRequests(e, mark)
	for _, n := range names {
		for _, verb := range []string{"create", "update", "patch", "delete"} {
			require.Zero(t, requests[verb+" "+n], "%s %s: the API server audited it", verb, n)
		}
		require.LessOrEqual(t, requests["get "+n], 1, "at most one GET of %s", n)
		require.Equal(t, 1, requests["get "+n], "each Secret is read: %v", requests)
	}
	require.Zero(t, requests["create "], "no POST on the collection: %v", requests)
	require.Empty(t, e.SecretEvents(from), "the watch history shows no write")
	_, records := e.JournalOf("mut-rerun:run-2")
	var kinds []string
	for _, rec := range records {
		kinds = append(kinds, string(rec.Kind)+" "+rec.Step+" "+rec.Target.String())
	}
	require.Equal(t, []string{"preparation preparation ", "observation read-external-secrets ", "observation read-secrets secrets/1",
		"observation read-secrets secrets/2", "completion complete "}, kinds)
	suite.RequireNoValues(t, r.Stdout+r.Stderr+e.JournalText("mut-rerun:run-2"), e.SecretValues(names...))
}

// A plan whose one server answers unknown (its pod's IP has no listener):
// run 1 ends 75 with every Secret created; a planned Secret deleted then is
// recreated by the resumed run (watch history: two creations); after the
// configured bound of resumes the stuck run is closed (run-resume-limit)
// and a fresh run replaces it. A bad bound is exit 64.
func TestIntegrationCredentialsUnknownServerDoesNotWedge(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pod := e.StatefulSet("wedge-cache")
	_, err := e.Kube.PlayKubelet(ctx, e.NS, pod, "127.0.0.9") // nothing listens there
	require.NoError(t, err)
	names := []string{"wedge-cache-app", "wedge-other"}
	plan := suite.CredentialPlan(e.NS, "mut-wedge", []suite.PlanSecret{suite.StandardSecret(names[0]), suite.StandardSecret(names[1])}, func(spec map[string]any) {
		spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": pod, "port": 6390, "secret": names[0], "passwordKey": "password"}}
	})
	path := e.WriteCommand("plan.json", plan)
	as := e.AsCredentialRunner(plan)
	bound := suite.WithEnv("KEYLEDGER_RUN_MAX_RESUMES=2")
	from := e.SecretsRV()

	bad := e.Keyledger([]string{"run", path}, as, suite.WithEnv("KEYLEDGER_RUN_MAX_RESUMES=0"))
	require.Equal(t, 64, bad.Code, bad.Stderr)
	require.Contains(t, bad.Stderr, "KEYLEDGER_RUN_MAX_RESUMES")

	r := e.Keyledger([]string{"run", path}, as, bound)
	require.Equal(t, 75, r.Code, "run 1: %s %s", r.Stdout, r.Stderr)
	other := e.GetSecret(names[1])
	require.NoError(t, e.Kube.Client().CoreV1().Secrets(e.NS).Delete(ctx, names[1], metav1.DeleteOptions{}))

	r = e.Keyledger([]string{"run", path}, as, bound)
	require.Equal(t, 75, r.Code, "resume 1: %s %s", r.Stdout, r.Stderr)
	again := e.GetSecret(names[1])
	require.NotEqual(t, other.UID, again.UID, "the resumed run recreated the deleted Secret")
	require.Equal(t, []string{"ADDED secret/" + names[0], "ADDED secret/" + names[1], "ADDED secret/" + names[1], "DELETED secret/" + names[1]},
		e.SecretEvents(from), "the deleted Secret created again (watch history), the other once")

	r = e.Keyledger([]string{"run", path}, as, bound)
	require.Equal(t, 75, r.Code, "resume 2: %s %s", r.Stdout, r.Stderr)
	op, _ := e.JournalOf("mut-wedge:run-1")
	require.False(t, op.State.Terminal(), "still the first run")

	r = e.Keyledger([]string{"run", path}, as, bound)
	require.Equal(t, 75, r.Code, "after the bound: %s %s", r.Stdout, r.Stderr)
	runs := e.RunsOf("mut-wedge")
	require.Len(t, runs, 2, "a fresh run")
	require.Equal(t, "mut-wedge:run-2", runs[1].MutationID)
	op, records := e.JournalOf("mut-wedge:run-1")
	require.Equal(t, store.StateRefused, op.State)
	require.Equal(t, store.ReasonRunResumeLimit, op.Reason)
	require.Equal(t, store.StepCloseRun, records[len(records)-1].Step)
	_, records = e.JournalOf("mut-wedge:run-2")
	require.Equal(t, "mut-wedge:run-1", workflowtest.Fields(records[0].Detail)["replaces"])
}

// A pod in phase Failed that still carries an IP is never probed: a
// listener on that address counts no connection, and the run ends 75
// (probe unknown, pod-not-running) with its Secrets converged.
func TestIntegrationCredentialsFailedPodNeverProbed(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	ln, err := net.Listen("tcp", "127.0.0.10:0")
	require.NoError(t, err)
	defer ln.Close()
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	pod := "lonely-cache" // a bare pod: the plan expects no controller
	_, err = e.Kube.Client().CoreV1().Pods(e.NS).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "server:test"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	played, err := e.Kube.PlayKubelet(ctx, e.NS, pod, "127.0.0.10")
	require.NoError(t, err)
	played.Status.Phase = corev1.PodFailed // the IP stays in status
	_, err = e.Kube.Client().CoreV1().Pods(e.NS).UpdateStatus(ctx, played, metav1.UpdateOptions{})
	require.NoError(t, err)
	plan := suite.CredentialPlan(e.NS, "mut-failed-pod", []suite.PlanSecret{suite.StandardSecret("lonely-cache-app")}, func(spec map[string]any) {
		spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": pod, "port": port, "secret": "lonely-cache-app", "passwordKey": "password"}}
	})
	r := e.Keyledger([]string{"run", e.WriteCommand("plan.json", plan)}, e.AsCredentialRunner(plan))
	require.Equal(t, 75, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	_, records := e.JournalOf("mut-failed-pod:run-1")
	probes := suite.RecordsOf(records, store.RecordProbe, "probe-server")
	require.Len(t, probes, 1)
	require.Equal(t, "unknown/pod-not-running", string(probes[0].Status)+"/"+string(probes[0].Reason))
	require.Zero(t, conns.Load(), "nothing connected to the Failed pod's address")
	e.GetSecret("lonely-cache-app") // the Secret converged anyway
	suite.RequireNoValues(t, r.Stdout+r.Stderr, e.SecretValues("lonely-cache-app"))
}

// A plan that gains a Secret and a key under its mutationId converges on
// the next run: the new Secret created, the key added, every existing value
// byte-identical, the Secret dropped from the plan left in place (watch
// history: exactly one ADDED and one MODIFIED); journal show lists both
// versions with their digests. Another owner under the same mutationId is
// refused (exit 2) and journals nothing.
func TestIntegrationCredentialsPlanEvolves(t *testing.T) {
	t.Parallel()
	e := setup(t)
	v1 := suite.CredentialPlan(e.NS, "mut-evolve", []suite.PlanSecret{suite.StandardSecret("evolve-app"), suite.StandardSecret("evolve-dropped")})
	r := e.Keyledger([]string{"run", e.WriteCommand("v1.json", v1)}, e.AsCredentialRunner(v1))
	require.Equal(t, 0, r.Code, "v1: %s %s", r.Stdout, r.Stderr)
	app, dropped := e.GetSecret("evolve-app"), e.GetSecret("evolve-dropped")
	from := e.SecretsRV()

	grown := suite.StandardSecret("evolve-app")
	grown.Keys = append(grown.Keys, suite.Literal("database", "orders"))
	v2 := suite.CredentialPlan(e.NS, "mut-evolve", []suite.PlanSecret{grown, suite.StandardSecret("evolve-new")})
	r = e.Keyledger([]string{"run", e.WriteCommand("v2.json", v2)}, e.AsCredentialRunner(v2))
	require.Equal(t, 0, r.Code, "v2: %s %s", r.Stdout, r.Stderr)
	out := suite.Outcome(t, r)
	require.Equal(t, "mut-evolve:run-2", out["run"])
	require.Equal(t, "completed", out["outcome"])

	now := e.GetSecret("evolve-app")
	for k, v := range app.Data {
		require.Equal(t, v, now.Data[k], "%s is byte-identical", k)
	}
	require.Equal(t, "orders", string(now.Data["database"]), "the key was added")
	e.GetSecret("evolve-new")
	left := e.GetSecret("evolve-dropped")
	require.Equal(t, dropped.ResourceVersion, left.ResourceVersion, "the dropped Secret is left in place, untouched")
	require.Equal(t, []string{"ADDED secret/evolve-new", "MODIFIED secret/evolve-app"}, e.SecretEvents(from), "nothing else written")

	show := e.Keyledger([]string{"journal", "show", "mut-evolve", "-o", "json"})
	require.Equal(t, 0, show.Code, show.Stderr)
	var shown []map[string]any
	require.NoError(t, json.Unmarshal([]byte(show.Stdout), &shown))
	require.Len(t, shown, 2)
	require.NotEqual(t, shown[0]["commandDigest"], shown[1]["commandDigest"], "both versions, each with its digest")
	prep := shown[0]["records"].([]any)[0].(map[string]any)
	require.Equal(t, shown[1]["commandDigest"], prep["detail"].(map[string]any)["supersedes"])

	other := suite.CredentialPlan(e.NS, "mut-evolve", []suite.PlanSecret{suite.StandardSecret("evolve-app")}, func(spec map[string]any) { spec["owner"] = "someone-else" })
	r = e.Keyledger([]string{"run", e.WriteCommand("other.json", other)}, e.AsCredentialRunner(other))
	require.Equal(t, 2, r.Code, "another owner: %s %s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stdout, "mutation-id-reused")
	require.Len(t, e.RunsOf("mut-evolve"), 2, "nothing journaled for the other owner")
}

// A completed operation inserted, as the namespace's own role, under the
// plan's bare mutationId after its run 1 (the highest row id) does not
// become the plan's newest run: the next run is run 2 and converges, never
// replay-run-ended; so does a run number inserted below the newest.
func TestIntegrationPrepareRunIgnoresForgedRows(t *testing.T) {
	t.Parallel()
	e := setup(t)
	plan := suite.CredentialPlan(e.NS, "mut-forged-bare", []suite.PlanSecret{suite.StandardSecret("forged-app")})
	path := e.WriteCommand("plan.json", plan)
	as := e.AsCredentialRunner(plan)
	r := e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, r.Stderr)
	run1, _ := e.JournalOf("mut-forged-bare:run-1")

	role, err := store.Open(t.Context(), e.Journal.OperatorURL) // the namespace's own role
	require.NoError(t, err)
	defer role.Close()
	forge := func(mutation string) {
		t.Helper()
		op, created, err := role.Prepare(t.Context(), store.PrepareParams{Kind: run1.Kind, MutationID: mutation, RequestID: "forged",
			CommandDigest: run1.CommandDigest, Namespace: run1.Namespace, Name: run1.Name})
		require.NoError(t, err)
		require.True(t, created)
		_, err = role.Transition(t.Context(), store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCompleted,
			Revision: op.Revision, Outcome: "existing", Records: []store.Record{{Kind: store.RecordCompletion, Step: "complete"}}})
		require.NoError(t, err)
	}
	forge("mut-forged-bare")
	r = e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "after the bare-id row: %s %s", r.Stdout, r.Stderr)
	require.Equal(t, "mut-forged-bare:run-2", suite.Outcome(t, r)["run"])

	r = e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, "mut-forged-bare:run-3", suite.Outcome(t, r)["run"])
	forge("mut-forged-bare:run-10") // run 10, then a lower one after it
	forge("mut-forged-bare:run-4")
	r = e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "after a lower run number: %s %s", r.Stdout, r.Stderr)
	require.Equal(t, "mut-forged-bare:run-11", suite.Outcome(t, r)["run"], "the newest is the highest number")
}

// readOf is what a run journaled of the Secret name it found in place
// (never POSTed): its entry in a read-secrets record (found complete) or
// its read-secret observation (lacking something).
func readOf(t *testing.T, records []store.Record, name string) map[string]any {
	t.Helper()
	var d map[string]any
	for _, r := range records {
		switch {
		case r.Kind == store.RecordObservation && r.Step == "read-secrets":
			if e, ok := workflowtest.Fields(r.Detail)["complete"].(map[string]any)[name].(map[string]any); ok {
				d = e
			}
		case r.Kind == store.RecordObservation && r.Step == "read-secret" && r.Target.String() == "secret/"+name:
			d = workflowtest.Fields(r.Detail)
		}
	}
	require.NotNil(t, d, "no read of %s journaled", name)
	require.Empty(t, suite.RecordsOf(records, store.RecordAuthorityCall, "create-secret"), "nothing POSTed")
	return d
}
