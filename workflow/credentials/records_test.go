package credentials

import (
	"github.com/stretchr/testify/require"

	"testing"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// runNumberIfAny is store.RunNumber where it is written (a preparation of
// an operation prepared as a run).
type runNumberIfAny struct {
	Command string `json:"command,omitempty"`
	Run     int64  `json:"run,omitempty"`
}

// recordType is the record type of a journaled record of a credential plan
// (by kind, step and status), nil for none.
func recordType(r workflowtest.FixtureRecord) workflowtest.DetailType {
	none := workflowtest.Via[struct{}]()
	result := func(t workflowtest.DetailType) workflowtest.DetailType {
		return workflowtest.Both(workflowtest.Via[workflow.AnswerCode](), t)
	}
	switch r.Kind {
	case store.RecordPreparation:
		return workflowtest.Both(workflowtest.Via[runNumberIfAny](),
			workflowtest.Both(workflowtest.Via[store.RunLineage](), workflowtest.Via[preparationDetail]()))
	case store.RecordCompletion:
		return workflowtest.Via[completionSummary]()
	case store.RecordRefusal:
		switch r.Reason {
		case ReasonServerStillRefuses:
			return workflowtest.Refusal(workflowtest.Both(workflowtest.Via[runSummary](), workflowtest.Via[podSummary]()))
		case ReasonNotGeneratorBacked, ReasonTargetMismatch, ReasonExternalReplaced:
			return workflowtest.Refusal(workflowtest.Both(workflowtest.Via[runSummary](), workflowtest.Via[externalSummary]()))
		}
		return workflowtest.Refusal(workflowtest.Both(workflowtest.Via[runSummary](), workflowtest.Via[secretSummary]()))
	case store.RecordProbe:
		return workflowtest.Via[probeDetail]()
	case store.RecordObservation:
		switch {
		case r.Step == stepReadSecret:
			return workflowtest.Via[secretDetail]()
		case r.Step == stepReadSecrets:
			return workflowtest.Via[chunkDetail]()
		case r.Step == stepReadExternalSecrets:
			return workflowtest.Via[externalSecretsDetail]()
		case r.Step == stepReadExternalSecret && r.Status == statusPresent:
			return workflowtest.Via[externalSecretDetail]()
		case r.Step == stepReadGenerator && r.Status == statusPresent:
			return workflowtest.Via[generatorDetail]()
		case r.Step == store.StepResumeRun:
			return workflowtest.Via[store.ResumeDetail]()
		}
		return none // absent, gone, a replacement's wait: no detail
	case store.RecordAuthorityCall:
		switch r.Step {
		case stepCreateSecret:
			return workflowtest.Via[createDetail]()
		case stepPatchSecret:
			return workflowtest.Via[changeDetail]()
		case stepOrphanExternalSecret:
			return workflowtest.Via[orphanDetail]()
		case stepDeletePod:
			return workflowtest.Via[deletePodDetail]()
		case stepDeleteGenerator:
			return none
		}
	case store.RecordAuthorityResult:
		if r.Step == stepCreateSecret {
			return result(workflowtest.Via[secretDetail]())
		}
		return result(none)
	case store.RecordResolution:
		switch {
		case r.Step == stepCreateSecret:
			return workflowtest.Both(workflowtest.Via[workflow.KeptResolution](), workflowtest.Via[secretDetail]())
		case r.Step == stepPatchSecret:
			return workflowtest.Via[changeDetail]()
		case r.Step == stepOrphanExternalSecret:
			return workflowtest.Via[externalSecretDetail]()
		case r.Step == stepDeleteGenerator && r.Reason == reasonReplacedNotDeleted:
			return workflowtest.Via[replacedGeneratorDetail]()
		}
		return none
	}
	return nil
}

// TestRecordsReadTodaysJournal: every detail a credential plan journaled
// before its records were typed (testdata/journal-details.jsonl, captured
// from the unit tests at that commit) decodes into the record type of its
// kind and step and encodes back byte for byte.
func TestRecordsReadTodaysJournal(t *testing.T) {
	t.Parallel()
	workflowtest.RequireDetailsRoundTrip(t, "testdata/journal-details.jsonl", recordType)
}

// TestRecordTypesAreTyped: no record type of a credential plan holds an
// untyped payload.
func TestRecordTypesAreTyped(t *testing.T) {
	t.Parallel()
	if got := workflowtest.Untyped(preparationDetail{}, changeDetail{}, secretDetail{}, createDetail{}, chunkDetail{},
		deletePodDetail{}, probeDetail{}, externalSecretsDetail{}, externalSecretDetail{}, orphanDetail{}, generatorDetail{},
		replacedGeneratorDetail{}, runSummary{}, secretSummary{}, externalSummary{}, podSummary{}, completionSummary{}); len(got) > 0 {
		t.Errorf("untyped: %v", got)
	}
}

// TestUndecodableDetailIsAnError: a journaled detail that does not decode
// into its record type (a delete-pod call naming its Secret with a number)
// stops the decision and the resolution with an error naming the record,
// never a zero value decided on.
func TestUndecodableDetailIsAnError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basePlan())
	f := e.family()
	bad := store.Record{Kind: store.RecordAuthorityCall, Step: stepDeletePod, Target: store.Target{Kind: store.TargetPod, Namespace: nsShop, Name: "shop-app-0"}, Attempt: 1,
		Detail: store.DetailOf(map[string]any{"secret": 5})}
	run := &workflow.Run{Op: &store.Operation{MutationID: "m-1:run-1", Namespace: nsShop}, Records: []store.Record{bad}}
	_, err := f.Decide(t.Context(), run)
	require.ErrorContains(t, err, "reading the authority_call record of delete-pod pod/shop-app-0")
	_, err = f.Resolve(t.Context(), run, bad)
	require.ErrorContains(t, err, "reading the authority_call record of delete-pod pod/shop-app-0")
}
