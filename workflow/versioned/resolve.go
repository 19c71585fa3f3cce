package versioned

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
)

// Resolve re-reads the durable facts after a call whose outcome is
// unknown. Everything it reads is read within this call (see reads).
func (f *family) Resolve(ctx context.Context, run *workflow.Run, call store.Record) (workflow.Verdict, error) {
	v, err := f.resolveRun(ctx, run, call)
	if err == nil && v.Kind == workflow.Theirs && f.purges() {
		if v.Summary.IsZero() {
			uid, _ := boundUID(run)
			v.Summary = f.summaryOf(types.UID(uid), summaryDetail{})
		}
		v.Summary, err = withPurged(v.Summary, run)
	}
	return v, err
}

func (f *family) resolveRun(ctx context.Context, run *workflow.Run, call store.Record) (workflow.Verdict, error) {
	r := f.reads(run)
	switch call.Step {
	case StepCreateLive:
		return f.resolveCreate(ctx)
	case StepCreateSnapshot:
		return r.resolveSnapshot(ctx, call)
	case StepPruneSnapshot, StepDeleteSnapshot:
		return f.resolveSnapshotDelete(ctx, run, call)
	case StepReplaceLive:
		return r.resolveReplace(ctx, call)
	case StepDeleteLive:
		return f.resolveDeleteLive(ctx, call)
	default:
		return workflow.Verdict{}, fmt.Errorf("resolving unknown step %q", call.Step)
	}
}

// rereadBound reads the live Secret for resolving call. It settles the
// verdict itself when the read fails (undetermined), the Secret is gone or
// holds another UID than the call was bound to (someone else's).
func (r *reads) rereadBound(ctx context.Context, call store.Record) (*corev1.Secret, *workflow.Verdict) {
	live, err := getLive(ctx, r.f.api)
	var v workflow.Verdict
	switch {
	case err != nil:
		v = undetermined(err)
	case live == nil:
		v = found(workflow.Theirs, ReasonSecretAbsent, nil)
	case string(live.UID) != call.UID:
		v = found(workflow.Theirs, ReasonUIDChanged, live)
	default:
		return live, nil
	}
	return nil, &v
}

func undetermined(err error) workflow.Verdict {
	return workflow.Verdict{Kind: workflow.Undetermined, Reason: "read-failed", Err: err}
}

func found(kind workflow.VerdictKind, reason string, s *corev1.Secret) workflow.Verdict {
	v := workflow.Verdict{Kind: kind, Reason: store.Reason(reason)}
	if s != nil {
		v.UID, v.ResourceVersion = string(s.UID), s.ResourceVersion
	}
	return v
}

func (f *family) resolveCreate(ctx context.Context) (workflow.Verdict, error) {
	live, err := getLive(ctx, f.api)
	if err != nil {
		return undetermined(err), nil
	}
	if live == nil {
		v := found(workflow.NotApplied, "absent", nil)
		v.Retry = f.createCall()
		return v, nil
	}
	if f.isCreated(live) {
		v := found(workflow.Ours, "", live)
		v.Summary = f.summary(live, summaryDetail{Version: new(int64(1))})
		return v, nil
	}
	v := found(workflow.Theirs, ReasonAlreadyExists, live)
	v.Summary = f.summary(live, summaryDetail{})
	return v, nil
}

// resolveSnapshot settles a snapshot create: the slot's occupant must be
// exactly the snapshot of the live state the call was made from.
func (r *reads) resolveSnapshot(ctx context.Context, call store.Record) (workflow.Verdict, error) {
	live, settled := r.rereadBound(ctx, call)
	if settled != nil {
		return *settled, nil
	}
	t := call.Target
	occupant, settled := r.readSlot(ctx, t.Name)
	if settled != nil {
		return *settled, nil
	}
	want, n, settled := r.archiving(live, call, t.Name)
	if settled != nil {
		return *settled, nil
	}
	if occupant == nil {
		return r.retrySnapshot(ctx, live, want, n), nil
	}
	return r.occupantVerdict(ctx, live, occupant, want), nil
}

// readSlot reads the snapshot in slot name: nil when the slot is empty. A
// failed read settles the call undetermined.
func (r *reads) readSlot(ctx context.Context, name string) (*corev1.Secret, *workflow.Verdict) {
	s, err := r.f.api.GetSnapshot(ctx, name)
	switch {
	case errors.Is(err, kube.ReasonNotFound):
		return nil, nil
	case err != nil:
		v := undetermined(err)
		return nil, &v
	}
	return s, nil
}

// slotProvenance reads what the journal proves of the snapshot slot name
// of live's UID (provenance). A failed read settles the call undetermined.
func (r *reads) slotProvenance(ctx context.Context, live *corev1.Secret, name string) (provenance, *workflow.Verdict) {
	prov, err := r.f.provenance(ctx, r.run, live.UID, []string{name})
	if err != nil {
		v := undetermined(err)
		return prov, &v
	}
	return prov, nil
}

// archiving is the snapshot (of version n) a create call on slot name
// archives: that of the live state the call was made from. Once that state
// is gone from the live object, or the call's slot is not that state's,
// the change is someone else's.
func (r *reads) archiving(live *corev1.Secret, call store.Record, name string) (*corev1.Secret, int64, *workflow.Verdict) {
	if live.ResourceVersion != call.ResourceVersion {
		// The state the call archived is gone from the live object, so the
		// occupant cannot be compared byte for byte, and the live write
		// would fail its precondition anyway.
		v := found(workflow.Theirs, ReasonChangedConcurrent, live)
		return nil, 0, &v
	}
	n, err := CurrentVersion(live.Annotations[AnnotationVersion], hasKey(live.Annotations, AnnotationVersion))
	if err != nil {
		v := found(workflow.Theirs, err.Error(), live)
		return nil, 0, &v
	}
	want := snapshotOf(live, n, r.run.Op.CreatedAt, r.f.actor())
	if want.Name != name {
		v := found(workflow.Theirs, ReasonChangedConcurrent, live)
		return nil, 0, &v
	}
	return want, n, nil
}

// retrySnapshot settles a snapshot create that was not applied (its slot
// empty): before it is sent again, the slots are checked again as the
// decision checked them (a look-alike may have been planted at or above
// the live counter since).
func (r *reads) retrySnapshot(ctx context.Context, live, want *corev1.Secret, n int64) workflow.Verdict {
	inv, err := r.inventory(ctx, live)
	if err != nil {
		return undetermined(err)
	}
	if d, blocked := r.f.checkSlots(live, inv, n); blocked {
		v := found(workflow.Theirs, d.Refuse.Reason, live)
		v.Summary = d.Refuse.Summary
		return v
	}
	v := found(workflow.NotApplied, "absent", nil)
	v.Retry = r.f.snapshotCall(live, want)
	return v
}

// occupantVerdict settles a snapshot create whose slot is occupied: the
// occupant stands behind the live write only if keyledger made it (its UID
// or its call's nonce is journaled), it is exactly the state being
// archived, and nothing holds or deletes it (occupantProblem).
func (r *reads) occupantVerdict(ctx context.Context, live, occupant, want *corev1.Secret) workflow.Verdict {
	name := want.Name
	prov, settled := r.slotProvenance(ctx, live, name)
	if settled != nil {
		return *settled
	}
	if reason := occupantProblem(prov, occupant, want); reason != "" {
		v := found(workflow.Theirs, reason, occupant)
		v.Summary = r.f.summary(live, summaryDetail{Snapshot: &name})
		return v
	}
	v := found(workflow.Ours, "", occupant)
	v.Detail = store.DetailOf(reusedDetail{Reused: occupant.Annotations[AnnotationActor] != want.Annotations[AnnotationActor]})
	return v
}

// occupantProblem is why occupant does not stand behind the live write as
// the snapshot want, "" when it does.
func occupantProblem(prov provenance, occupant, want *corev1.Secret) string {
	switch {
	case !prov.owns(&occupant.ObjectMeta):
		return ReasonSlotOccupied
	case occupant.DeletionTimestamp != nil:
		return ReasonSnapshotTerminating
	case len(occupant.Finalizers) > 0:
		return ReasonSnapshotFinalizers
	case !sameSource(occupant, want):
		return ReasonSourceConflict
	}
	return ""
}

// resolveSnapshotDelete settles a prune or purge delete from the
// snapshot's metadata alone (a cleanup never reads a value): the snapshot
// gone (or its slot now held by another object) is absent, still there
// with a deletionTimestamp is pending, changed since the delete was decided
// (another resourceVersion: a precondition conflict) is refused
// (snapshot-changed), unchanged is not applied.
func (f *family) resolveSnapshotDelete(ctx context.Context, run *workflow.Run, call store.Record) (workflow.Verdict, error) {
	name := call.Target.Name
	s, err := f.api.GetSnapshotMeta(ctx, name)
	var obj metav1.Object
	if s != nil {
		obj = &s.ObjectMeta
	}
	if v, settled := deleteSettled(obj, err, call, "slot-reoccupied"); settled {
		return v, nil
	}
	uid, _ := boundUID(run)
	meta, ok := checkMeta(&s.ObjectMeta, types.UID(uid), f.cmd.Name)
	if !ok {
		v := found(workflow.Theirs, ReasonSnapshotInvalid, &corev1.Secret{ObjectMeta: s.ObjectMeta})
		v.Summary = f.summaryOf(types.UID(uid), summaryDetail{})
		return v, nil
	}
	if s.ResourceVersion != call.ResourceVersion {
		// The snapshot changed since the read the delete was decided from
		// (its precondition failed, 409, or would): a refusal, never a
		// delete sent again with new preconditions.
		v := found(workflow.Theirs, ReasonSnapshotChanged, &corev1.Secret{ObjectMeta: s.ObjectMeta})
		v.Summary = f.summaryOf(types.UID(uid), summaryDetail{Snapshot: &name})
		return v, nil
	}
	if call.Step == StepDeleteSnapshot {
		// A purge's delete is sent again only from a fresh read of the
		// live Secret, as the decision sends it (decideSteps).
		if v, changed := f.liveChanged(ctx, uid); changed {
			return v, nil
		}
	}
	v := found(workflow.NotApplied, "present", &corev1.Secret{ObjectMeta: s.ObjectMeta})
	v.Retry = f.deleteSnapshotCall(call.Step, types.UID(uid), meta)
	return v, nil
}

// liveChanged reads the live Secret before a purge's delete is sent again:
// gone, of another UID than uid (the one the operation bound), at another
// resourceVersion than the command expects, or being deleted is someone
// else's change (its reason names it). A failed read is undetermined.
func (f *family) liveChanged(ctx context.Context, uid string) (workflow.Verdict, bool) {
	live, err := getLive(ctx, f.api)
	switch {
	case err != nil:
		return undetermined(err), true
	case live == nil:
		return found(workflow.Theirs, ReasonSecretAbsent, nil), true
	case string(live.UID) != uid:
		return found(workflow.Theirs, ReasonUIDChanged, live), true
	case live.ResourceVersion != f.cmd.ExpectedResourceVersion:
		return found(workflow.Theirs, ReasonChangedConcurrent, live), true
	case live.DeletionTimestamp != nil:
		return found(workflow.Theirs, ReasonTerminating, live), true
	}
	return workflow.Verdict{}, false
}

// resolveReplace settles the live write: the live object of the same UID
// carrying version N+1 and exactly the intended data is ours; unchanged is
// not applied, and is sent again only once the checks the decision made
// before it hold again (recheck: the archive there, ours and final, the
// prunes done); anything else is someone else's.
func (r *reads) resolveReplace(ctx context.Context, call store.Record) (workflow.Verdict, error) {
	live, settled := r.rereadBound(ctx, call)
	if settled != nil {
		return *settled, nil
	}
	next, err := callVersion(call)
	if err != nil {
		return workflow.Verdict{}, err
	}
	base, settled := r.replaceBase(ctx, live, call, next-1)
	if settled != nil {
		return *settled, nil
	}
	if live.ResourceVersion == call.ResourceVersion {
		return r.retryReplace(ctx, live, base, next-1), nil
	}
	return r.f.replaceVerdict(live, base, next), nil
}

// replaceBase is the data the live write wrote over (version n's): a
// restore's target's data (restoreBase); an update's, the live data while
// the live object is unchanged since the call, the archived state n once
// it changed (archivedBase).
func (r *reads) replaceBase(ctx context.Context, live *corev1.Secret, call store.Record, n int64) (map[string][]byte, *workflow.Verdict) {
	switch {
	case r.f.cmd.Kind == command.KindSecretRestore:
		return r.restoreBase(ctx, live)
	case live.ResourceVersion == call.ResourceVersion:
		return live.Data, nil
	}
	return r.archivedBase(ctx, live, call, n)
}

// restoreBase is the data a restore writes: its target's (loadTarget). A
// target that is not there, or not genuine, is someone else's change; a
// failed read is undetermined.
func (r *reads) restoreBase(ctx context.Context, live *corev1.Secret) (map[string][]byte, *workflow.Verdict) {
	target, reason, err := r.loadTarget(ctx, live)
	switch {
	case err != nil:
		v := undetermined(err)
		return nil, &v
	case target == nil:
		v := found(workflow.Theirs, reason, live)
		return nil, &v
	}
	return target.Data, nil
}

// archivedBase is the archived state n an update wrote over, its live
// object changed since: the snapshot of slot n, of the state the call
// read, and settled before the write was sent (its UID journaled: nothing
// less proves it). Anything else is a concurrent change.
func (r *reads) archivedBase(ctx context.Context, live *corev1.Secret, call store.Record, n int64) (map[string][]byte, *workflow.Verdict) {
	name := SnapshotName(live.UID, n)
	concurrent := found(workflow.Theirs, ReasonChangedConcurrent, live)
	prev, settled := r.readSlot(ctx, name)
	switch {
	case settled != nil:
		return nil, settled
	case prev == nil:
		return nil, &concurrent
	}
	meta, ok := checkSnapshot(prev, live.UID, live.Name)
	prov, settled := r.slotProvenance(ctx, live, name)
	if settled != nil {
		return nil, settled
	}
	if !ok || meta.SourceResourceVersion != call.ResourceVersion || !prov.journaled(&prev.ObjectMeta) {
		return nil, &concurrent
	}
	return prev.Data, nil
}

// retryReplace settles a live write that was not applied (the live object
// unchanged since the call): it is sent again, over base, only once the
// checks the decision made before it hold again (recheck).
func (r *reads) retryReplace(ctx context.Context, live *corev1.Secret, base map[string][]byte, n int64) workflow.Verdict {
	if settled := r.recheck(ctx, live, n); settled != nil {
		return *settled
	}
	v := found(workflow.NotApplied, "resource-version-unchanged", live)
	v.Retry = r.f.replaceCall(live, base, n, SnapshotName(live.UID, n))
	return v
}

// replaceVerdict settles a live write whose live object changed since the
// call: ours only with version next and exactly the data this command
// writes over base (the archived state next-1); anything else is a
// concurrent change.
func (f *family) replaceVerdict(live *corev1.Secret, base map[string][]byte, next int64) workflow.Verdict {
	n := next - 1
	snapName := SnapshotName(live.UID, n)
	intended := f.replacement(live, base, n)
	if live.Annotations[AnnotationVersion] != strconv.FormatInt(next, 10) || !sameData(live.Data, intended.Data) {
		v := found(workflow.Theirs, ReasonChangedConcurrent, live)
		v.Summary = f.summary(live, summaryDetail{})
		return v
	}
	v := found(workflow.Ours, "", live)
	extra := summaryDetail{Version: &next, Snapshot: &snapName, SnapshotVersion: &n}
	if f.cmd.Kind == command.KindSecretRestore {
		extra.RestoredVersion = &f.cmd.Version
	}
	v.Summary = f.summary(live, extra)
	return v
}

// recheck runs again, before a live write is sent again, the checks the
// decision made before sending it: the archive of version n this operation
// settled is there, keyledger's and final (archiveProblem: archive-missing,
// snapshot-terminating, snapshot-finalizers refuse), and no prune is
// pending (a snapshot beyond the limit still being deleted leaves the
// outcome undetermined, prune-pending: a rerun of the same command checks
// again). A snapshot beyond the limit that nothing is deleting (a rerun
// with a lower KEYLEDGER_HISTORY_LIMIT) does not hold the write back:
// resolution sends only the call it resolves, and the next write prunes it.
// A nil verdict: the write may be sent again.
func (r *reads) recheck(ctx context.Context, live *corev1.Secret, n int64) *workflow.Verdict {
	f, run := r.f, r.run
	inv, err := r.inventory(ctx, live)
	if err != nil {
		v := undetermined(err)
		return &v
	}
	snap := SnapshotName(live.UID, n)
	archived, ok := run.Settled(StepCreateSnapshot, f.secretTarget(snap))
	reason := ReasonArchiveMissing
	if ok {
		reason = archiveProblem(inv, n, archived.By)
	}
	if reason != "" {
		v := found(workflow.Theirs, reason, live)
		v.Summary = f.summary(live, summaryDetail{Snapshot: &snap, SnapshotVersion: &n})
		return &v
	}
	protected := []int64{n}
	if f.cmd.Kind == command.KindSecretRestore {
		protected = append(protected, f.cmd.Version)
	}
	c, err := f.nextDelete(run, StepPruneSnapshot, live.UID, f.victims(inv, protected))
	if err != nil {
		v := undetermined(err)
		return &v
	}
	if c.pending+c.failed > 0 {
		v := workflow.Verdict{Kind: workflow.Undetermined, Reason: ReasonPrunePending, UID: string(live.UID), ResourceVersion: live.ResourceVersion,
			Err: c.unfinished("the snapshots beyond the history limit", "the live write (not sent again)")}
		return &v
	}
	return nil
}

func (f *family) resolveDeleteLive(ctx context.Context, call store.Record) (workflow.Verdict, error) {
	s, err := f.api.GetLive(ctx)
	if v, settled := deleteSettled(s, err, call, "recreated"); settled {
		return v, nil
	}
	switch {
	case s.ResourceVersion == call.ResourceVersion:
		v := found(workflow.NotApplied, "resource-version-unchanged", s)
		v.Retry = f.deleteLiveCall(s)
		return v, nil
	default:
		return found(workflow.Theirs, ReasonChangedConcurrent, s), nil
	}
}

// deleteSettled reads the re-read after a delete (s, err) of the object the
// call was bound to (workflow.ResolveDelete): gone, or its name now held by
// another UID (replaced says how), is deleted; a deletionTimestamp is
// pending; a failed read is undetermined. settled is false when the object
// is still there, unchanged in identity, for the caller to decide.
func deleteSettled(s metav1.Object, err error, call store.Record, replaced string) (workflow.Verdict, bool) {
	deletion := func(reason string, state kube.Deletion) workflow.Verdict {
		return workflow.Verdict{Kind: workflow.Ours, Reason: store.Reason(reason), Detail: store.DetailOf(deletionDetail{Deletion: state})}
	}
	return workflow.ResolveDelete(call, s, err, workflow.DeleteVerdicts{
		Gone:        deletion("", kube.Deleted),
		Replaced:    deletion(replaced, kube.Deleted),
		Terminating: deletion("", kube.DeletionPending),
	})
}
