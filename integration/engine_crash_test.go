package integration

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/kube/fault"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/failpoint"
)

// toyChild runs one toy operation in a child process, with a failpoint armed
// when name is not empty.
func toyChild(e *env, cmName, mutation, failpointName string) (code int, stdout string) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(e.T.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		childEnv+"=1", "KUBECONFIG="+e.Kube.KubeconfigFile(), "KEYLEDGER_DATABASE_URL="+e.Journal.OperatorURL,
		"TOY_NAMESPACE="+e.NS, "TOY_NAME="+cmName, "TOY_MUTATION="+mutation, failpoint.Env+"="+failpointName)
	var out strings.Builder
	cmd.Stdout = &out
	err := cmd.Run()
	if exitErr, ok := err.(*exec.ExitError); ok {
		if !exitErr.Exited() {
			return 137, out.String() // killed by the failpoint
		}
		return exitErr.ExitCode(), out.String()
	}
	require.NoError(e.T, err)
	return 0, out.String()
}

// A toy operation crashed after each transition (and after each pair of
// transitions a resumed run goes through) resumes to exactly one completion
// and exactly one write.
func TestIntegrationEngineCrashAtEveryTransition(t *testing.T) {
	if !failpoint.Enabled {
		t.Skip("needs a test binary built with -tags failpoints (make test does)")
	}
	t.Parallel()
	e := setup(t)
	cases := []struct {
		name    string
		crashes []string // one crashed run per entry, then a clean run
		calls   int      // authority_call records at the end
	}{
		{"after-prepare", []string{"after-prepare"}, 1},
		{"after-call", []string{"after-call"}, 2},         // recorded, never sent: resolution finds it not applied and re-sends
		{"after-send", []string{"after-send"}, 1},         // sent, answer never recorded: resolution finds it ours
		{"after-complete", []string{"after-complete"}, 1}, // done: the rerun is a replay
		{"after-send-then-resolve", []string{"after-send", "after-resolve"}, 1},
		{"after-call-then-resolve-then-call", []string{"after-call", "after-resolve", "after-call"}, 3},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "toy-" + string(rune('a'+i))
			mutation := "mut-crash-" + tc.name
			created := e.NewConfigMap(name)
			for _, fp := range tc.crashes {
				code, _ := toyChild(e, name, mutation, fp)
				require.Equal(t, 137, code, "the run must die at failpoint %s", fp)
			}
			code, out := toyChild(e, name, mutation, "")
			require.Equal(t, 0, code, "the clean rerun must finish: %s", out)

			cm, err := e.Kube.Client().CoreV1().ConfigMaps(e.NS).Get(t.Context(), name, metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, mutation, cm.Annotations[suite.ToyAnnotation])
			require.Equal(t, 1, suite.WritesBetween(t, e.Kube.Client().CoreV1().ConfigMaps(e.NS).Watch, name, created.ResourceVersion, cm.ResourceVersion),
				"exactly one write, whatever crashed")

			op, records := e.JournalOf(mutation)
			require.Equal(t, store.StateCompleted, op.State)
			require.NotNil(t, op.FinalizedAt)
			require.Equal(t, 1, suite.Count(records, store.RecordPreparation))
			require.Equal(t, 1, suite.Count(records, store.RecordCompletion))
			require.Equal(t, 0, suite.Count(records, store.RecordRefusal))
			require.Equal(t, tc.calls, suite.Count(records, store.RecordAuthorityCall), "records: %v", suite.Kinds(records))
		})
	}
}

// A response dropped after the API server applied the write is settled by
// resolution (ours: converged), and a reset before sending by resolution
// (not applied: sent again); either way one write.
func TestIntegrationEngineFaultTransport(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cases := []struct {
		name        string
		rule        fault.Rule
		outcome     workflow.Outcome
		calls       int
		resultState string
	}{
		{"drop-response", fault.Rule{Mode: fault.DropResponse, Method: http.MethodPut, PathContains: "/configmaps/", Nth: 1}, workflow.OutcomeConverged, 1, "unknown"},
		{"reset", fault.Rule{Mode: fault.Reset, Method: http.MethodPut, PathContains: "/configmaps/", Nth: 1}, workflow.OutcomeCompleted, 2, "unknown"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "fault-" + tc.name
			created := e.NewConfigMap(name)
			var transport *fault.Transport
			cfg := e.Kube.Config()
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
				transport = fault.New(tc.rule, rt)
				return transport
			})
			client, err := kube.NewClient(cfg)
			require.NoError(t, err)

			mutation := "mut-fault-" + tc.name
			res, err := suite.RunToy(t.Context(), client, e.Journal.OperatorURL, e.NS, name, mutation)
			require.NoError(t, err)
			require.Equal(t, 1, transport.Faulted(), "the fault must have fired")
			require.Equal(t, tc.outcome, res.Outcome)

			cm, err := e.Kube.Client().CoreV1().ConfigMaps(e.NS).Get(t.Context(), name, metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, mutation, cm.Annotations[suite.ToyAnnotation])
			require.Equal(t, 1, suite.WritesBetween(t, e.Kube.Client().CoreV1().ConfigMaps(e.NS).Watch, name, created.ResourceVersion, cm.ResourceVersion))

			_, records := e.JournalOf(mutation)
			require.Equal(t, tc.calls, suite.Count(records, store.RecordAuthorityCall))
			require.Equal(t, 1, suite.Count(records, store.RecordResolution), "records: %v", suite.Kinds(records))
			for _, r := range records {
				if r.Kind == store.RecordAuthorityResult {
					require.Equal(t, store.Status(tc.resultState), r.Status, "the first answer is unknown")
					break
				}
			}
		})
	}
}
