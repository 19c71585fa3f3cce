package versioned

import (
	"context"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
)

func (f *family) createCall() *workflow.Call {
	desired := f.created()
	return &workflow.Call{
		Step: StepCreateLive, Verb: workflow.VerbCreate, Target: f.liveTarget(),
		Digest: intentDigest(f.cmd, "", "", 1), Detail: store.DetailOf(liveWriteDetail{Version: 1, Keys: len(desired.Data)}),
		Final: true, Summary: f.summary(desired, summaryDetail{Version: new(int64(1))}),
		Send: func(ctx context.Context) workflow.Answer {
			got, err := f.api.CreateLive(ctx, desired.DeepCopy())
			if err != nil {
				return workflow.KubeAnswer(workflow.KubeWrite, err)
			}
			if !f.isCreated(got) {
				return workflow.Answer{Status: workflow.Unknown, Code: 201, Reason: ReasonResultMismatch, UID: string(got.UID), ResourceVersion: got.ResourceVersion}
			}
			return workflow.Answer{Status: workflow.Applied, Code: 201, UID: string(got.UID), ResourceVersion: got.ResourceVersion,
				Summary: f.summary(got, summaryDetail{Version: new(int64(1))})}
		},
	}
}

// snapshotCall creates snap with a fresh nonce whose digest is journaled
// in the call's record before the create is sent: if the answer is lost,
// the occupant carrying it is provably this call's. The journal holds only
// the digest, so nobody who reads it can plant an occupant that passes.
func (f *family) snapshotCall(live, snap *corev1.Secret) *workflow.Call {
	version, _ := strconv.ParseInt(snap.Annotations[AnnotationVersion], 10, 64)
	nonce := newNonce()
	snap = snap.DeepCopy()
	snap.Annotations[AnnotationNonce] = nonce
	return &workflow.Call{
		Step: StepCreateSnapshot, Verb: workflow.VerbCreate, Target: f.secretTarget(snap.Name), UID: string(live.UID), ResourceVersion: live.ResourceVersion,
		Digest:  intentDigest(f.cmd, string(live.UID), live.ResourceVersion, version),
		Detail:  store.DetailOf(snapshotDetail{Version: version, Keys: len(snap.Data), NonceDigest: nonceDigest(nonce)}),
		Summary: f.summary(live, summaryDetail{Snapshot: &snap.Name, SnapshotVersion: &version}),
		Send: func(ctx context.Context) workflow.Answer {
			got, err := f.api.CreateSnapshot(ctx, snap.DeepCopy())
			if err != nil {
				// 409 (slot occupied) is Unknown: resolution reads the
				// occupant and verifies it.
				return workflow.KubeAnswer(workflow.KubeWrite, err)
			}
			if !sameSource(got, snap) {
				return workflow.Answer{Status: workflow.Unknown, Code: 201, Reason: ReasonResultMismatch, UID: string(got.UID), ResourceVersion: got.ResourceVersion}
			}
			f.seen.answered(StepCreateSnapshot, f.secretTarget(snap.Name).String(), &got.ObjectMeta)
			return workflow.Answer{Status: workflow.Applied, Code: 201, UID: string(got.UID), ResourceVersion: got.ResourceVersion,
				Summary: f.summary(got, summaryDetail{Version: new(int64(1))})}
		},
	}
}

// deleteSnapshotCall deletes one snapshot of the live Secret liveUID with
// the snapshot's UID and resourceVersion as preconditions.
func (f *family) deleteSnapshotCall(step string, liveUID types.UID, s Snapshot) *workflow.Call {
	return &workflow.Call{
		Step: step, Verb: workflow.VerbDelete, Target: f.secretTarget(s.Name), UID: string(s.UID), ResourceVersion: s.ResourceVersion,
		Detail:  store.DetailOf(deleteSnapshotDetail{Version: s.Version, HistoryLimit: f.limit}),
		Summary: f.summaryOf(liveUID, summaryDetail{Snapshot: &s.Name, SnapshotVersion: &s.Version}),
		Send: func(ctx context.Context) workflow.Answer {
			gone, err := f.api.DeleteSnapshot(ctx, s.Name, s.UID, s.ResourceVersion)
			if err != nil {
				a := workflow.KubeAnswer(workflow.KubeWrite, err)
				if a.Status == workflow.Rejected {
					// A definite refusal (403, 422: an admission policy)
					// leaves the snapshot in place: counted failed, the
					// cleanup goes on with the next snapshot and ends the
					// run uncertain with its counts (exit 75, the live
					// write blocked); a rerun sends it again. Never ending
					// the operation.
					if f.refused == nil {
						f.refused = map[string]bool{}
					}
					f.refused[f.secretTarget(s.Name).String()] = true
					return workflow.Answer{Status: workflow.Applied, Code: a.Code, Reason: a.Reason, UID: string(s.UID),
						Detail: store.DetailOf(deletionDetail{Deletion: deletionFailed})}
				}
				// Lost, 5xx, 409 (a precondition failed): resolution
				// re-reads the snapshot's metadata.
				a.Status = workflow.Unknown
				return a
			}
			return workflow.Answer{Status: workflow.Applied, Code: 200, UID: string(s.UID), Detail: store.DetailOf(deletionDetail{Deletion: gone})}
		},
	}
}

func (f *family) replaceCall(live *corev1.Secret, base map[string][]byte, n int64, snapshot string) *workflow.Call {
	desired := f.replacement(live, base, n)
	extra := summaryDetail{Version: new(n + 1), Snapshot: &snapshot, SnapshotVersion: &n}
	if f.cmd.Kind == command.KindSecretRestore {
		extra.RestoredVersion = &f.cmd.Version
	}
	if hasKey(live.Annotations, AnnotationLastApplied) {
		extra.DroppedAnnotations = []string{AnnotationLastApplied}
	}
	return &workflow.Call{
		Step: StepReplaceLive, Verb: workflow.VerbUpdate, Target: f.liveTarget(), UID: string(live.UID), ResourceVersion: live.ResourceVersion,
		Digest: intentDigest(f.cmd, string(live.UID), live.ResourceVersion, n+1),
		Detail: store.DetailOf(liveWriteDetail{Version: n + 1, Keys: len(desired.Data)}),
		Final:  true, Summary: f.summary(desired, extra),
		Send: func(ctx context.Context) workflow.Answer {
			got, err := f.api.ReplaceLive(ctx, desired.DeepCopy())
			if err != nil {
				return workflow.KubeAnswer(workflow.KubeWrite, err)
			}
			if got.UID != live.UID || got.ResourceVersion == live.ResourceVersion ||
				got.Annotations[AnnotationVersion] != desired.Annotations[AnnotationVersion] || !sameData(got.Data, desired.Data) {
				return workflow.Answer{Status: workflow.Unknown, Code: 200, Reason: ReasonResultMismatch, UID: string(got.UID), ResourceVersion: got.ResourceVersion}
			}
			return workflow.Answer{Status: workflow.Applied, Code: 200, UID: string(got.UID), ResourceVersion: got.ResourceVersion}
		},
	}
}

func (f *family) deleteLiveCall(live *corev1.Secret) *workflow.Call {
	return &workflow.Call{
		Step: StepDeleteLive, Verb: workflow.VerbDelete, Target: f.liveTarget(), UID: string(live.UID), ResourceVersion: live.ResourceVersion,
		Detail:  store.DetailOf(deleteLiveDetail{KeepHistory: f.cmd.KeepHistory}),
		Summary: f.summary(live, summaryDetail{}),
		Send: func(ctx context.Context) workflow.Answer {
			gone, err := f.api.DeleteLive(ctx, live.UID, live.ResourceVersion)
			if err != nil {
				return workflow.KubeAnswer(workflow.KubeWrite, err)
			}
			return workflow.Answer{Status: workflow.Applied, Code: 200, UID: string(live.UID), Detail: store.DetailOf(deletionDetail{Deletion: gone})}
		},
	}
}

// confirmDeleted re-reads the live Secret after its delete was applied:
// gone (or replaced by a new UID) is deleted, still there being deleted is
// pending. Never a guess.
func (f *family) confirmDeleted(ctx context.Context, run *workflow.Run) (workflow.Decision, error) {
	// A read of the delete's effect: gone is what the delete intends.
	s, err := workflow.Verify(ctx, (*corev1.Secret)(nil), func(ctx context.Context) (*corev1.Secret, error) { return getLive(ctx, f.api) })
	switch {
	case err != nil:
		return workflow.Decision{}, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	case s == nil:
		return f.complete(OutcomeDeleted, nil, summaryDetail{History: f.historyWord()}), nil
	}
	obs := observation(s)
	call, _ := run.LastCall()
	switch {
	case string(s.UID) != call.UID:
		d := f.complete(OutcomeDeleted, nil, summaryDetail{History: f.historyWord(), RecreatedUID: string(s.UID)})
		d.Notes = []store.Record{obs}
		return d, nil
	case s.DeletionTimestamp != nil:
		d := f.complete(OutcomePending, s, summaryDetail{History: f.historyWord(), Finalizers: new(len(s.Finalizers))})
		d.Notes = []store.Record{obs}
		return d, nil
	default:
		d := f.refuse(ReasonResultMismatch, s)
		d.Notes = []store.Record{obs}
		return d, nil
	}
}

func (f *family) historyWord() string {
	if f.cmd.KeepHistory {
		return "kept"
	}
	return "deleted"
}
