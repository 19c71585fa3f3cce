package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// mutatingSecretRequests is how many POST, PUT, PATCH and DELETE requests on
// Secrets a run's clients sent, retries included (the request counter wraps
// the transport, under client-go's retry loop).
func mutatingSecretRequests(t *testing.T, r suite.Result) int {
	t.Helper()
	n := 0
	for key, v := range suite.APIRequests(t, r) {
		method, resource, _ := strings.Cut(key, " ")
		if resource == "secrets" && method != "GET" && method != "LIST" && method != "WATCH" {
			n += v
		}
	}
	return n
}

// One journaled call is one request: a write answered with 429 or 503 and
// Retry-After is not re-sent by client-go. The answer is the call's result
// and the operation settles from the durable facts: a throttled request was
// never applied, so resolution sends the same compare-and-set once more as a
// new, journaled call; an applied one answered 503 is recognised as ours.
// Before the clients forbade retries, client-go re-sent both after a second
// and the journal held one call for two requests.
func TestIntegrationOneCallOneRequest(t *testing.T) {
	t.Parallel()
	e := setup(t)
	t.Run("retirement", func(t *testing.T) {
		cases := []struct {
			fault, outcome string
			calls          int
		}{
			{"throttle:PUT:/secrets/#1", "completed", 2},
			{"unavailable-retry-after:PUT:/secrets/#1", "converged", 1},
		}
		for i, tc := range cases {
			r := e.RetireUnderFault(t, fmt.Sprintf("retry-keyring-%d", i), fmt.Sprintf("mut-retry-%d", i), tc.fault, tc.outcome, tc.calls)
			require.Equal(t, tc.calls, mutatingSecretRequests(t, r), "%s: one request per journaled call", tc.fault)
		}
	})
	t.Run("versioned", func(t *testing.T) {
		cases := []struct {
			name, fault, outcome string
			calls                int
		}{
			{"snapshot-throttled", "throttle:POST:/secrets#1", "completed", 3},
			{"replace-unavailable", "unavailable-retry-after:PUT:/secrets/#1", "converged", 2},
		}
		names := make([]string, len(cases))
		for i, tc := range cases {
			names[i] = "retry-" + tc.name
		}
		as := e.AsWriter(names...)
		for _, tc := range cases {
			name := "retry-" + tc.name
			mutation := "mut-" + name
			s := e.CreateSecret(suite.PlainSecret(name, map[string][]byte{"k": suite.VCanary("0")}))
			r := e.RunCmd(suite.UpdateCommand(e.NS, name, s.ResourceVersion, mutation, map[string][]byte{"k": suite.VCanary("1")}), as,
				suite.WithEnv("KEYLEDGER_FAULT="+tc.fault))
			suite.RequireOK(t, r, tc.outcome)
			after := e.GetSecret(name)
			require.Equal(t, suite.VCanary("1"), after.Data["k"])
			require.Equal(t, 1, e.SecretWrites(name, s.ResourceVersion, after.ResourceVersion), "%s: one live write", tc.name)
			_, records := e.JournalOf(mutation)
			require.Equal(t, tc.calls, suite.Count(records, store.RecordAuthorityCall), "%s: %v", tc.name, suite.Kinds(records))
			require.Equal(t, tc.calls, mutatingSecretRequests(t, r), "%s: one request per journaled call", tc.name)
			require.GreaterOrEqual(t, suite.Count(records, store.RecordResolution), 1, "%s: settled by re-reading", tc.name)
		}
	})
	t.Run("credentials", func(t *testing.T) {
		// A batch of creates: one is throttled (not applied) or answered
		// 503 after it applied; each Secret is created once, and every
		// request is a journaled call.
		for i, tc := range []struct {
			fault string
			calls int // two creates, and a second one for the throttled create, which never applied
		}{{"throttle:POST:/secrets#1", 3}, {"unavailable-retry-after:POST:/secrets#2", 2}} {
			fault := tc.fault
			names := []string{fmt.Sprintf("retry-creds-%d-a", i), fmt.Sprintf("retry-creds-%d-b", i)}
			plan := suite.CredentialPlan(e.NS, fmt.Sprintf("mut-retry-creds-%d", i), []suite.PlanSecret{suite.StandardSecret(names[0]), suite.StandardSecret(names[1])})
			path := e.WriteCommand(fmt.Sprintf("retry-creds-%d.json", i), plan)
			from := e.SecretsRV()
			r := e.Keyledger([]string{"run", path}, e.AsCredentialRunner(plan), suite.WithEnv("KEYLEDGER_FAULT="+fault))
			require.Equal(t, 0, r.Code, "%s: %s %s", fault, r.Stdout, r.Stderr)
			for _, n := range names {
				s := e.GetSecret(n)
				require.Equal(t, 1, e.SecretWrites(n, from, s.ResourceVersion), "%s: %s created once", fault, n)
			}
			run, ok := suite.Outcome(t, r)["run"].(string)
			require.True(t, ok, "%s: the outcome names the run: %s", fault, r.Stdout)
			_, records := e.JournalOf(run)
			require.Equal(t, tc.calls, suite.Count(records, store.RecordAuthorityCall), "%s: %v", fault, suite.Kinds(records))
			require.Equal(t, tc.calls, mutatingSecretRequests(t, r), "%s: one request per journaled call", fault)
			require.GreaterOrEqual(t, suite.Count(records, store.RecordResolution), 1, "%s: settled by re-reading", fault)
		}
	})
}
