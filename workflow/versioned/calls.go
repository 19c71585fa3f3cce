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
		Step: StepCreateLive, Target: f.liveTarget(),
		Digest: intentDigest(f.cmd, "", "", 1), Detail: map[string]any{"version": int64(1), "keys": len(desired.Data)},
		Final: true, Summary: f.summary(desired, map[string]any{"version": int64(1)}),
		Send: func(ctx context.Context) workflow.Answer {
			got, err := f.api.CreateLive(ctx, desired.DeepCopy())
			if err != nil {
				return workflow.KubeAnswer(workflow.KubeWrite, err)
			}
			if !f.isCreated(got) {
				return workflow.Answer{Status: workflow.Unknown, Code: 201, Reason: ReasonResultMismatch, UID: string(got.UID), ResourceVersion: got.ResourceVersion}
			}
			return workflow.Answer{Status: workflow.Applied, Code: 201, UID: string(got.UID), ResourceVersion: got.ResourceVersion,
				Summary: f.summary(got, map[string]any{"version": int64(1)})}
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
		Step: StepCreateSnapshot, Target: "secret/" + snap.Name, UID: string(live.UID), ResourceVersion: live.ResourceVersion,
		Digest:  intentDigest(f.cmd, string(live.UID), live.ResourceVersion, version),
		Detail:  map[string]any{"version": version, "keys": len(snap.Data), "nonceDigest": nonceDigest(nonce)},
		Summary: f.summary(live, map[string]any{"snapshot": snap.Name, "snapshotVersion": version}),
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
			f.seen.answered(StepCreateSnapshot, "secret/"+snap.Name, &got.ObjectMeta)
			return workflow.Answer{Status: workflow.Applied, Code: 201, UID: string(got.UID), ResourceVersion: got.ResourceVersion,
				Summary: f.summary(got, map[string]any{"version": int64(1)})}
		},
	}
}

// deleteSnapshotCall deletes one snapshot of the live Secret liveUID with
// the snapshot's UID and resourceVersion as preconditions.
func (f *family) deleteSnapshotCall(step string, liveUID types.UID, s Snapshot) *workflow.Call {
	return &workflow.Call{
		Step: step, Target: "secret/" + s.Name, UID: string(s.UID), ResourceVersion: s.ResourceVersion,
		Detail:  map[string]any{"version": s.Version, "historyLimit": f.limit},
		Summary: f.summaryOf(liveUID, map[string]any{"snapshot": s.Name, "snapshotVersion": s.Version}),
		Send: func(ctx context.Context) workflow.Answer {
			gone, err := f.api.DeleteSnapshot(ctx, s.Name, s.UID, s.ResourceVersion)
			if err != nil {
				// Even a definite refusal (403, 422: an admission policy)
				// leaves the snapshot in place: resolution re-reads it and
				// the delete is retried, this run or the next (exit 75),
				// never ending the operation.
				a := workflow.KubeAnswer(workflow.KubeWrite, err)
				a.Status = workflow.Unknown
				return a
			}
			return workflow.Answer{Status: workflow.Applied, Code: 200, UID: string(s.UID), Detail: map[string]any{"deletion": string(gone)}}
		},
	}
}

func (f *family) replaceCall(live *corev1.Secret, base map[string][]byte, n int64, snapshot string) *workflow.Call {
	desired := f.replacement(live, base, n)
	extra := map[string]any{"version": n + 1, "snapshot": snapshot, "snapshotVersion": n}
	if f.cmd.Kind == command.KindSecretRestore {
		extra["restoredVersion"] = f.cmd.Version
	}
	if hasKey(live.Annotations, AnnotationLastApplied) {
		extra["droppedAnnotations"] = []string{AnnotationLastApplied}
	}
	return &workflow.Call{
		Step: StepReplaceLive, Target: f.liveTarget(), UID: string(live.UID), ResourceVersion: live.ResourceVersion,
		Digest: intentDigest(f.cmd, string(live.UID), live.ResourceVersion, n+1),
		Detail: map[string]any{"version": n + 1, "keys": len(desired.Data)},
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
		Step: StepDeleteLive, Target: f.liveTarget(), UID: string(live.UID), ResourceVersion: live.ResourceVersion,
		Detail:  map[string]any{"keepHistory": f.cmd.KeepHistory},
		Summary: f.summary(live, nil),
		Send: func(ctx context.Context) workflow.Answer {
			gone, err := f.api.DeleteLive(ctx, live.UID, live.ResourceVersion)
			if err != nil {
				return workflow.KubeAnswer(workflow.KubeWrite, err)
			}
			return workflow.Answer{Status: workflow.Applied, Code: 200, UID: string(live.UID), Detail: map[string]any{"deletion": string(gone)}}
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
		return f.complete(OutcomeDeleted, nil, map[string]any{"history": f.historyWord()}), nil
	}
	obs := observation(s)
	call, _ := run.LastCall()
	switch {
	case string(s.UID) != call.UID:
		d := f.complete(OutcomeDeleted, nil, map[string]any{"history": f.historyWord(), "recreatedUID": string(s.UID)})
		d.Complete.Records = []store.Record{obs}
		return d, nil
	case s.DeletionTimestamp != nil:
		d := f.complete(OutcomePending, s, map[string]any{"history": f.historyWord(), "finalizers": len(s.Finalizers)})
		d.Complete.Records = []store.Record{obs}
		return d, nil
	default:
		d := f.refuse(ReasonResultMismatch, s)
		d.Refuse.Records = []store.Record{obs}
		return d, nil
	}
}

func (f *family) historyWord() string {
	if f.cmd.KeepHistory {
		return "kept"
	}
	return "deleted"
}
