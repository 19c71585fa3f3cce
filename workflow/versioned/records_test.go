package versioned

import (
	"testing"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// recordType is the record type of a journaled record of a versioned
// write (by kind and step), nil for none.
func recordType(r workflowtest.FixtureRecord) workflowtest.DetailType {
	via := func(t workflowtest.DetailType) workflowtest.DetailType { return t }
	summary := workflowtest.Both(workflowtest.Via[purgedIfAny](), workflowtest.Via[summaryDetail]())
	deletion := workflowtest.Via[deletionIfAny]()
	switch r.Kind {
	case store.RecordPreparation:
		return workflowtest.Via[preparationDetail]()
	case store.RecordCompletion:
		return summary
	case store.RecordRefusal:
		return workflowtest.Refusal(summary)
	case store.RecordObservation:
		if r.Step == StepReadLive {
			return workflowtest.Via[liveReadDetail]()
		}
	case store.RecordAuthorityCall:
		switch r.Step {
		case StepCreateLive, StepReplaceLive:
			return workflowtest.Via[liveWriteDetail]()
		case StepCreateSnapshot:
			return workflowtest.Via[snapshotDetail]()
		case StepPruneSnapshot, StepDeleteSnapshot:
			return workflowtest.Via[deleteSnapshotDetail]()
		case StepDeleteLive:
			return workflowtest.Via[deleteLiveDetail]()
		}
	case store.RecordAuthorityResult:
		return workflowtest.Both(workflowtest.Via[workflow.AnswerCode](), deletion)
	case store.RecordResolution:
		if r.Step == StepCreateSnapshot {
			return via(workflowtest.Via[reusedIfAny]())
		}
		return deletion
	}
	return nil
}

// deletionIfAny, reusedIfAny and purgedIfAny are deletionDetail,
// reusedDetail and purgedDetail where they are written (a delete's answer
// or resolution; a create-snapshot's ours resolution; a delete without
// history's summaries).
type (
	deletionIfAny struct {
		Deletion *string `json:"deletion,omitempty"`
	}
	reusedIfAny struct {
		Reused *bool `json:"reused,omitempty"`
	}
	purgedIfAny struct {
		PurgedVersions *[]int64 `json:"purgedVersions,omitempty"`
	}
)

// TestRecordsReadTodaysJournal: every detail a versioned write journaled
// before its records were typed (testdata/journal-details.jsonl, captured
// from the unit tests at that commit) decodes into the record type of its
// kind and step and encodes back byte for byte.
func TestRecordsReadTodaysJournal(t *testing.T) {
	t.Parallel()
	workflowtest.RequireDetailsRoundTrip(t, "testdata/journal-details.jsonl", recordType)
}

// TestRecordTypesAreTyped: no record type of a versioned write holds an
// untyped payload.
func TestRecordTypesAreTyped(t *testing.T) {
	t.Parallel()
	if got := workflowtest.Untyped(preparationDetail{}, liveReadDetail{}, liveWriteDetail{}, snapshotDetail{}, versionDetail{},
		deleteSnapshotDetail{}, deleteLiveDetail{}, deletionDetail{}, reusedDetail{}, summaryDetail{}, purgedDetail{}); len(got) > 0 {
		t.Errorf("untyped: %v", got)
	}
}
