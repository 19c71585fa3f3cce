package versioned

import (
	"context"
	"errors"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
)

// Reasons a replay of a completed versioned write is refused: the cluster,
// read in this run, does not show what the journal says the operation did.
const (
	// ReasonReplaySecretAbsent: the live Secret the operation wrote is gone.
	ReasonReplaySecretAbsent = "replay-secret-absent"
	// ReasonReplayUIDChanged: the live Secret has another UID than the one
	// the operation's write was bound to.
	ReasonReplayUIDChanged = "replay-uid-changed"
	// ReasonReplayLiveUnchanged: the live Secret is still at the
	// resourceVersion the write was to replace (or the command expects):
	// the write never happened.
	ReasonReplayLiveUnchanged = "replay-live-unchanged"
	// ReasonReplayVersionBehind: the live version counter is below the
	// version the operation wrote.
	ReasonReplayVersionBehind = "replay-version-behind"
	// ReasonReplaySnapshotMissing: the archive the operation created (its
	// UID, or its call's nonce, journaled by this operation) is not in its
	// slot, or the journal holds no settled archive for the write.
	ReasonReplaySnapshotMissing = "replay-snapshot-missing"
	// ReasonReplaySnapshotInvalid: the archive is there but no longer the
	// snapshot of the state the write replaced (its metadata was edited).
	ReasonReplaySnapshotInvalid = "replay-snapshot-invalid"
	// ReasonReplayWriteUnsettled: the journal says completed but holds no
	// settled final write, although it holds calls.
	ReasonReplayWriteUnsettled = "replay-write-unsettled"
	// ReasonReplayNotApplied: a completion without a write (the result was
	// found in place) whose result is not in place: the family would write.
	ReasonReplayNotApplied = "replay-not-applied"
	// ReasonReplayLivePresent: a delete's live object (its UID, or the
	// command's expected resourceVersion) is still there and not being
	// deleted.
	ReasonReplayLivePresent = "replay-live-present"
	// ReasonReplaySnapshotPresent: a delete without history completed, but
	// a snapshot keyledger provably made of the deleted UID is still there.
	ReasonReplaySnapshotPresent = "replay-snapshot-present"
)

func contradiction(reason, detail string) (*workflow.Contradiction, error) {
	return &workflow.Contradiction{Reason: reason, Detail: detail}, nil
}

// ConfirmReplay implements workflow.Family: a completed versioned write is
// a replay only when the cluster, read now with the rights of Rules (get
// and list on Secrets), shows its effect. It only reads.
//
//   - An update or restore that wrote version N+1 (replace-live settled):
//     the live Secret has the UID the write was bound to, is no longer at
//     the resourceVersion the write replaced (nor at the command's
//     expectedResourceVersion), its counter is at or past N+1, and the
//     archive of version N is in its slot and is the object this
//     operation created: its UID, or its call's nonce, is journaled by this
//     operation (the nonce before the create was sent), never proven by a
//     name or a label; its metadata still names the state the write
//     replaced.
//   - A create (create-live settled): the live Secret exists with the UID
//     the create answered.
//   - A completion without a write (the result was found in place): the
//     same reads as the first decision find it in place again.
//   - A delete: see confirmDelete.
func (f *family) ConfirmReplay(ctx context.Context, run *workflow.Run) (*workflow.Contradiction, error) {
	if f.cmd.Kind == command.KindSecretDelete {
		return f.confirmDelete(ctx, run)
	}
	live, err := getLive(ctx, f.api)
	if err != nil {
		return nil, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	if done, ok := run.Settled(StepCreateLive, f.liveTarget()); ok {
		switch {
		case live == nil:
			return contradiction(ReasonReplaySecretAbsent, "the live Secret does not exist; the journal says this operation created it")
		case done.By.UID != "" && string(live.UID) != done.By.UID:
			return contradiction(ReasonReplayUIDChanged, "the live Secret has UID "+string(live.UID)+", the one this operation created had "+done.By.UID)
		}
		return nil, nil
	}
	if done, ok := run.Settled(StepReplaceLive, f.liveTarget()); ok {
		return f.confirmWrite(ctx, run, live, done)
	}
	if _, called := run.LastCall(); called {
		return contradiction(ReasonReplayWriteUnsettled, "the journal says this operation completed, but it holds no settled live write")
	}
	return f.confirmInPlace(ctx, run, live)
}

// confirmWrite checks an update's or a restore's live write, settled by done.
func (f *family) confirmWrite(ctx context.Context, run *workflow.Run, live *corev1.Secret, done workflow.Settlement) (*workflow.Contradiction, error) {
	call := done.Call
	next, err := callVersion(call)
	if err != nil {
		return nil, err
	}
	switch {
	case live == nil:
		return contradiction(ReasonReplaySecretAbsent, "the live Secret does not exist; the journal says this operation wrote version "+strconv.FormatInt(next, 10))
	case string(live.UID) != call.UID || done.By.UID != "" && string(live.UID) != done.By.UID:
		return contradiction(ReasonReplayUIDChanged, "the live Secret has UID "+string(live.UID)+", the journal's write was bound to "+call.UID)
	case live.ResourceVersion == call.ResourceVersion || f.cmd.ExpectedResourceVersion != "" && live.ResourceVersion == f.cmd.ExpectedResourceVersion:
		return contradiction(ReasonReplayLiveUnchanged, "the live Secret is still at resourceVersion "+live.ResourceVersion+", the one the journal says this operation replaced")
	}
	n, err := CurrentVersion(live.Annotations[AnnotationVersion], hasKey(live.Annotations, AnnotationVersion))
	if err != nil {
		return contradiction(workflow.ReplayPrefix+err.Error(), "the live Secret's version counter cannot be read")
	}
	if n < next {
		return contradiction(ReasonReplayVersionBehind, "the live Secret is at version "+strconv.FormatInt(n, 10)+
			", the journal says this operation wrote version "+strconv.FormatInt(next, 10))
	}
	return f.confirmArchive(ctx, run, live, call.ResourceVersion, next-1)
}

// confirmArchive checks that the archive of version n, taken from the live
// state at resourceVersion rv, is in its slot and is this operation's.
func (f *family) confirmArchive(ctx context.Context, run *workflow.Run, live *corev1.Secret, rv string, n int64) (*workflow.Contradiction, error) {
	name := SnapshotName(live.UID, n)
	archived, ok := run.Settled(StepCreateSnapshot, f.secretTarget(name))
	if !ok || archived.Call.UID != string(live.UID) || archived.Call.ResourceVersion != rv {
		return contradiction(ReasonReplaySnapshotMissing, "the journal holds no settled archive of version "+strconv.FormatInt(n, 10)+
			" taken by this operation from the state its write replaced")
	}
	s, err := f.api.GetSnapshot(ctx, name)
	switch {
	case errors.Is(err, kube.ReasonNotFound):
		return contradiction(ReasonReplaySnapshotMissing, "the archive "+name+" this operation created does not exist")
	case err != nil:
		return nil, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	// Only this operation's records prove which object it created: the
	// UID its create answered (or its resolution found), and, only when no
	// UID was journaled, the nonce its call carried (journaled before the
	// create was sent). A copy of the archive under another UID carries
	// the nonce too, so a journaled UID decides.
	p := newProvenance()
	if err := p.add(run.Records, live.UID); err != nil {
		return nil, err
	}
	owned := p.owns(&s.ObjectMeta)
	if archived.By.UID != "" {
		owned = string(s.UID) == archived.By.UID
	}
	if !owned {
		return contradiction(ReasonReplaySnapshotMissing, "the slot "+name+" holds an object this operation did not create")
	}
	meta, ok := checkSnapshot(s, live.UID, live.Name)
	if !ok || meta.Version != n || meta.SourceResourceVersion != rv {
		return contradiction(ReasonReplaySnapshotInvalid, "the archive "+name+" is no longer the snapshot of the state this operation replaced")
	}
	return nil, nil
}

// confirmInPlace checks a completion without a write (the first decision
// found the command's result in place: existing): the same reads find it
// in place again. The run holds no call, so the decision is the first
// decision's, and it only reads.
func (f *family) confirmInPlace(ctx context.Context, run *workflow.Run, live *corev1.Secret) (*workflow.Contradiction, error) {
	d, err := (&write{reads: f.reads(run), live: live, read: true}).decide(ctx)
	switch {
	case err != nil:
		return nil, err
	case d.Complete != nil:
		return nil, nil
	case d.Refuse != nil:
		return contradiction(workflow.ReplayPrefix+d.Refuse.Reason, "the journal says this command's result was in place, but the cluster now refuses it ("+d.Refuse.Reason+")")
	}
	return contradiction(ReasonReplayNotApplied, "the journal says this command's result was in place, but the live Secret does not hold it")
}

// confirmDelete checks a completed SecretDelete. Its effect is an absence,
// which a journal entry cannot fake while the object is still there: the
// cluster must show no live object of the UID the delete was bound to,
// unless it is being deleted (pending: finalizers hold it), and the live
// Secret must not be at the command's expectedResourceVersion (a delete
// that happened moved it, or removed it). A live Secret of the same name
// with another UID is a later lifetime (someone created it after the
// delete, as the delete's own confirmation reports with recreatedUID), so
// it does not contradict. Without history (keepHistory: false), no
// snapshot the journal proves keyledger made of the deleted UID may be left
// (the delete completed only once a fresh list showed none, terminating
// ones included, and no snapshot of a deleted UID can be made after it).
// With history, the snapshots are what they were: the delete claimed
// nothing about them.
func (f *family) confirmDelete(ctx context.Context, run *workflow.Run) (*workflow.Contradiction, error) {
	done, ok := run.Settled(StepDeleteLive, f.liveTarget())
	if !ok {
		return contradiction(ReasonReplayWriteUnsettled, "the journal says this delete completed, but it holds no settled delete of the live Secret")
	}
	uid := done.Call.UID
	live, err := getLive(ctx, f.api)
	if err != nil {
		return nil, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	if live != nil {
		switch {
		case live.ResourceVersion == done.Call.ResourceVersion || f.cmd.ExpectedResourceVersion != "" && live.ResourceVersion == f.cmd.ExpectedResourceVersion:
			return contradiction(ReasonReplayLivePresent, "the live Secret is still at resourceVersion "+live.ResourceVersion+", the one this delete was bound to")
		case string(live.UID) == uid && live.DeletionTimestamp == nil:
			return contradiction(ReasonReplayLivePresent, "the live Secret of UID "+uid+" is still there and not being deleted")
		}
	}
	if f.cmd.KeepHistory || uid == "" {
		return nil, nil
	}
	metas, err := f.api.ListClaims(ctx, claimant(types.UID(uid)), MaxHistoryClaims)
	if tooMany := (*kube.TooManyClaimsError)(nil); errors.As(err, &tooMany) {
		// More Secrets claim the deleted UID than a run reads: whatever
		// they are, the journal's "history removed" is not confirmed.
		return contradiction(ReasonReplaySnapshotPresent, (&historyTooLarge{count: tooMany.Count, max: tooMany.Max}).Error())
	}
	if err != nil {
		return nil, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	p, err := f.provenance(ctx, run, types.UID(uid), listedNames(metas))
	if err != nil {
		return nil, err
	}
	gone := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.cmd.Namespace, Name: f.cmd.Name, UID: types.UID(uid)}}
	if inv := classify(metas, gone, p); len(inv.genuine) > 0 {
		return contradiction(ReasonReplaySnapshotPresent, "the snapshot "+inv.genuine[0].Name+" of the deleted UID is still there; the journal says this delete removed its history")
	}
	return nil, nil
}
