package credentials

import (
	"context"

	"github.com/keyledger/keyledger/workflow"
)

// ReasonReplayRunEnded: the journal handed a credential plan's run that
// had already ended (an operation journaled out of the run series, such as
// one under the command's own mutation ID after its runs, makes
// store.PrepareRun find an ended run instead of numbering the next one).
// A run of desired state is never replayed: the run refuses instead of
// reporting existing, and `keyledger journal show` names the operation.
const ReasonReplayRunEnded = "replay-run-ended"

// ConfirmReplay implements workflow.Family. A plan is desired state
// (workflow.Plan.Runs): after a terminal run the next run starts and reads
// the cluster afresh, so the engine never asks to replay one, and a forged
// completed run cannot stop the next run from converging. Should the
// journal still hand back an ended run, nothing of it is believed: the run
// refuses (replay-run-ended), with no read and no write.
func (f *family) ConfirmReplay(context.Context, *workflow.Run) (*workflow.Contradiction, error) {
	return &workflow.Contradiction{Reason: ReasonReplayRunEnded,
		Detail: "a credential plan's run is never replayed, but the journal returned a run that already ended"}, nil
}
