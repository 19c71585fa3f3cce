package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/keyledger/keyledger/store"
)

// secretWritesSince counts, per name, every write the API server made to
// the namespace's Secrets after resourceVersion from (creates, updates,
// patches and deletes: the events of its watch history), up to now: it
// writes a marker Secret and replays the history until the marker's
// creation.
func (e *env) secretWritesSince(from string) map[string]int {
	e.t.Helper()
	marker := e.createSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "zz-writes-marker-" + randomSuffix(e.t)}})
	ctx, cancel := context.WithTimeout(e.t.Context(), 30*time.Second)
	defer cancel()
	w, err := e.kube.Client().CoreV1().Secrets(e.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: from})
	require.NoError(e.t, err, "opening watch")
	defer w.Stop()
	writes := map[string]int{}
	for {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(e.t, ok, "watch closed before the marker was seen")
			require.NotEqual(e.t, watch.Error, ev.Type, "watch error: %v", ev.Object)
			if ev.Type == watch.Bookmark {
				continue
			}
			m, err := meta.Accessor(ev.Object)
			require.NoError(e.t, err)
			if m.GetName() == marker.Name {
				return writes
			}
			writes[m.GetName()]++
		case <-ctx.Done():
			e.t.Fatalf("the marker Secret never appeared in the watch history after %s", from)
		}
	}
}

// concurrentPlanOutcome is the outcome of one of many concurrent runs of
// one plan, which must exit 0: the runs that arrive while another drives
// the run join it (its live lock), so none is refused run-resume-limit or
// ends attempts-exhausted.
func concurrentPlanOutcome(t *testing.T, i int, r result) string {
	t.Helper()
	require.Equal(t, 0, r.Code, "run %d: stdout %s stderr %s", i, r.Stdout, r.Stderr)
	return fmt.Sprint(outcome(t, r)["outcome"])
}

// 32 runs of one credential plan at once, from nothing: the API server
// records exactly one write (its create) to each planned Secret and none
// to anything else, and the Secrets hold what the plan says. Every run
// exits 0 and none counted as a resume (a resume-run record): each joined
// the live run.
func TestIntegrationCredentialsOneWritePerSecretUnder32Runs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	secrets, names := concurrentPlanSecrets(8)
	plan := credentialPlan(e.ns, "mut-thirty-two", secrets)
	path := e.writeCommand("plan.json", plan)
	as := e.asCredentialRunner(plan)
	from := e.secretsRV()
	const n = 32
	results := e.runTogether(n, []string{"run", path}, as)
	outcomes := map[string]int{}
	for i, r := range results {
		outcomes[concurrentPlanOutcome(t, i, r)]++
	}
	t.Logf("outcomes of %d concurrent runs: %v", n, outcomes)
	for _, run := range e.runsOf("mut-thirty-two") {
		_, records := e.journalOf(run.MutationID)
		for _, r := range records {
			require.NotEqual(t, store.StepResumeRun, r.Step, "%s: a run arriving while another drove it counted as a resume", run.MutationID)
		}
	}
	writes := e.secretWritesSince(from)
	want := map[string]int{}
	for _, name := range names {
		want[name] = 1
	}
	require.Equal(t, want, writes, "one write (the create) per planned Secret, nothing else written")
	for _, name := range names {
		s := e.getSecret(name)
		require.Len(t, s.Data["password"], 32, name)
		require.Equal(t, "app", string(s.Data["username"]), name)
	}
}
