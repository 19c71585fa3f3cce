package integration

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/credentials"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

type timeoutError struct{}

func (timeoutError) Error() string   { return "response dropped by the test" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// A batch of creates in which the API server rejects one and the answer of
// another is lost after it was applied: the lost one is settled (re-read:
// this call's Secret) before the operation is refused, and the refusal
// names what the batch applied.
func TestIntegrationCredentialsBatchSettledBeforeRefusal(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	const lost, rejected = "batch-lost", "batch-rejected"
	e.DenySecretCreate(rejected)
	plan := suite.CredentialPlan(e.NS, "mut-batch", []suite.PlanSecret{suite.StandardSecret(lost), suite.StandardSecret(rejected)})
	path := e.WriteCommand("plan.json", plan)

	// The plan's identity, through a transport that drops the answer to the
	// create of one Secret after the API server applied it.
	name := "credentials-" + suite.RandomSuffix(t)
	e.ServiceAccountKubeconfig(name, credentials.Rules(suite.SpecOf(t, plan)))
	cfg, err := e.Kube.ServiceAccountConfig(ctx, e.NS, name, 600)
	require.NoError(t, err)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodPost || req.Body == nil || !strings.HasSuffix(req.URL.Path, "/secrets") {
				return next.RoundTrip(req)
			}
			body, err := io.ReadAll(req.Body)
			if err != nil {
				return nil, err
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			resp, err := next.RoundTrip(req)
			// JSON or protobuf: the name is in the body as is.
			if err == nil && bytes.Contains(body, []byte(lost)) {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return nil, timeoutError{}
			}
			return resp, err
		})
	})
	client, err := kube.NewClient(cfg)
	require.NoError(t, err)
	f, err := command.Read(path, command.ReadOptions{})
	require.NoError(t, err)
	cmd, err := credentials.Decode(f)
	require.NoError(t, err)
	wp, err := credentials.Plan(cmd, cfg)
	require.NoError(t, err)
	_, err = workflow.Execute(ctx, workflow.Deps{Kube: client,
		OpenStore: workflow.PostgresStore(e.Journal.OperatorURL)}, wp)
	var refused *workflow.Refused
	require.True(t, errors.As(err, &refused), "refused: %v", err)

	s := e.GetSecret(lost)
	require.Len(t, s.Data["password"], 32)
	op, records := e.JournalOf("mut-batch:run-1")
	require.Equal(t, store.StateRefused, op.State)
	results := map[string]store.Record{}
	for _, r := range suite.RecordsOf(records, store.RecordAuthorityResult, "create-secret") {
		results[r.Target.String()] = r
	}
	require.Equal(t, store.Status("unknown"), results["secret/"+lost].Status)
	require.Equal(t, store.Status("rejected"), results["secret/"+rejected].Status)
	res := suite.RecordsOf(records, store.RecordResolution, "create-secret")
	require.Len(t, res, 1, "the lost sibling is settled before the refusal")
	require.Equal(t, "secret/"+lost, res[0].Target.String())
	require.Equal(t, store.Status("ours"), res[0].Status)
	require.Equal(t, store.Reason("created-by-this-mutation"), res[0].Reason)
	require.Equal(t, string(s.UID), res[0].UID)
	refusal := suite.RecordsOf(records, store.RecordRefusal, "")
	require.Len(t, refusal, 1)
	require.Equal(t, []any{"secret/" + lost}, workflowtest.Fields(refusal[0].Detail)["applied"], "the refusal names what was applied")
	require.Equal(t, []any{"secret/" + rejected}, workflowtest.Fields(refusal[0].Detail)["notApplied"])
	require.Equal(t, []any{}, workflowtest.Fields(refusal[0].Detail)["kept"], "nothing was found in place")
	require.Equal(t, "secret/"+rejected, workflowtest.Fields(refusal[0].Detail)["rejected"])
	suite.RequireNoValues(t, e.JournalText("mut-batch:run-1"), e.SecretValues(lost))
}
