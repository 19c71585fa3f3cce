package versioned

import (
	"context"
	"slices"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
)

// Asks implements workflow.Asker: before a call that resolution found not
// applied is sent again, the decision made now says whether it would make
// that call. Every call of this family but a retention delete is rebuilt
// by its resolution from the command (a create, the live write, a purge's
// delete after the live Secret was read again), so the command asks for
// it; a prune-snapshot names a snapshot the journal chose, and whoever
// holds the namespace's journal role can append one naming any snapshot.
// It is sent again only while retention, computed now from the live
// Secret and its snapshots, would delete that snapshot: the snapshot just
// taken and a restore's target are never among them, nor anything within
// the history limit.
func (f *family) Asks(ctx context.Context, run *workflow.Run, call *workflow.Call) (string, []store.Record, error) {
	if call.Step != StepPruneSnapshot {
		return "", nil, nil
	}
	live, err := getLive(ctx, f.api)
	switch {
	case err != nil:
		return "", nil, &workflow.Uncertain{Reason: "read-failed", Err: err}
	case live == nil:
		return "the live Secret is gone, so retention deletes nothing", nil, nil
	}
	if uid, _ := boundUID(run); string(live.UID) != uid {
		return "the live Secret is another incarnation than the one the operation archives", nil, nil
	}
	n, err := CurrentVersion(live.Annotations[AnnotationVersion], hasKey(live.Annotations, AnnotationVersion))
	if err != nil {
		return "the live Secret's version counter is not valid (" + err.Error() + ")", nil, nil
	}
	inv, err := f.reads(run).inventory(ctx, live)
	if err != nil {
		return "", nil, &workflow.Uncertain{Reason: "read-failed", Err: err}
	}
	protected := []int64{n}
	if f.cmd.Kind == command.KindSecretRestore {
		protected = append(protected, f.cmd.Version)
	}
	if !slices.ContainsFunc(f.victims(inv, protected), func(s Snapshot) bool { return s.Name == call.Target.Name }) {
		return "retention keeps this snapshot: it is not beyond the history limit, or it is protected", nil, nil
	}
	return "", nil, nil
}
