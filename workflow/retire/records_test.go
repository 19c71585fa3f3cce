package retire

import (
	"testing"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// TestRecordsReadTodaysJournal: every detail a retirement journaled before
// its records were typed (testdata/journal-details.jsonl, captured from
// the unit tests at that commit) decodes into the record type of its kind
// and step and encodes back byte for byte.
func TestRecordsReadTodaysJournal(t *testing.T) {
	workflowtest.RequireDetailsRoundTrip(t, "testdata/journal-details.jsonl", func(r workflowtest.FixtureRecord) workflowtest.DetailType {
		switch {
		case r.Kind == store.RecordPreparation:
			return workflowtest.Via[preparationDetail]()
		case r.Kind == store.RecordObservation && r.Step == "read-keyring":
			return workflowtest.Via[readDetail]()
		case r.Kind == store.RecordAuthorityCall && r.Step == stepReplace:
			return workflowtest.Via[replaceDetail]()
		case r.Kind == store.RecordCompletion, r.Kind == store.RecordRefusal:
			return workflowtest.Via[summaryDetail]()
		case r.Kind == store.RecordAuthorityResult:
			return workflowtest.Via[workflow.AnswerCode]() // the engine's: a retirement's answer has no detail
		case r.Kind == store.RecordResolution:
			return workflowtest.Via[struct{}]()
		}
		return nil
	})
}

// TestRecordTypesAreTyped: no record type of a retirement holds an
// untyped payload.
func TestRecordTypesAreTyped(t *testing.T) {
	if got := workflowtest.Untyped(preparationDetail{}, readDetail{}, replaceDetail{}, summaryDetail{}); len(got) > 0 {
		t.Errorf("untyped: %v", got)
	}
}
