package versioned

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
)

// step is one phase of a versioned write's decision (workflow.Step), named
// with the journal's word for what it reads or writes, or check..., need...,
// expect..., bind..., confirm... for one that judges what the steps before
// it found in w.
type step = workflow.Step[*write]

// The steps of each kind of versioned write, in order. Every write is one
// engine call whose target is "secret/<name>"; a decision runs the list
// from the top and returns the first step's decision, so a write already
// made (the journal settled it) is passed over and the next one decided.
var (
	// createSteps: an update with expectedResourceVersion "" creates the
	// Secret at version 1, or finds it created.
	createSteps = []step{
		readLive,     // GET the live Secret (read-live)
		createLive,   // absent: create it at version 1 (create-live)
		bindLive,     // the UID this operation first observed, or uid-changed
		checkCreated, // present: exactly what the create writes (existing), or already-exists
	}
	// updateSteps: archive version N, prune beyond the limit, write N+1.
	updateSteps = []step{
		readLive,       // GET the live Secret (read-live)
		needLive,       // absent: secret-absent
		bindLive,       // the UID this operation first observed, or uid-changed
		expectLive,     // at expectedResourceVersion, or already this command's result (existing), or stale
		checkWritable,  // not terminating, not a service-account token
		checkCounter,   // the live version counter N (keyledger.dev/version)
		checkUpdate,    // not immutable, every removed key present
		checkSlots,     // list the history: the slots from N up hold nothing keyledger did not make
		createSnapshot, // archive the live state at version N (create-snapshot)
		checkArchive,   // that archive is there, keyledger's, not terminating, without finalizers
		pruneSnapshot,  // delete the oldest snapshots beyond the limit, one at a time (prune-snapshot)
		replaceLive,    // write version N+1 with UID and resourceVersion preconditions (replace-live)
	}
	// restoreSteps: as an update, writing a genuine snapshot's data.
	restoreSteps = []step{
		readLive,
		needLive,
		bindLive,
		expectLive,
		checkWritable,
		checkCounter,
		checkTarget, // the target version: below N, genuine, readable, within the size limit
		checkSlots,
		createSnapshot,
		checkArchive,
		pruneSnapshot,
		replaceLive,
	}
	// deleteSteps: a delete without history deletes every snapshot
	// keyledger made for the live UID, then the live Secret.
	deleteSteps = []step{
		confirmDelete,  // the live delete is settled: re-read, deleted or pending
		readLive,       // GET the live Secret (read-live)
		needLive,       // absent: secret-absent
		bindLive,       // the UID this operation first observed, or uid-changed
		expectLive,     // at expectedResourceVersion, or stale
		checkWritable,  // not terminating, not a service-account token
		checkCounter,   // the live version counter
		deleteSnapshot, // delete every genuine snapshot, then confirm none is left (delete-snapshot)
		deleteLive,     // delete the live Secret with UID and resourceVersion preconditions (delete-live)
	}
	// keepHistorySteps: a delete with keepHistory touches no snapshot:
	// history stays exactly as it is, nothing of it is read.
	keepHistorySteps = []step{
		confirmDelete,
		readLive,
		needLive,
		bindLive,
		expectLive,
		checkWritable,
		deleteLive,
	}
)

// steps is the list of this command's kind.
func (f *family) steps() []step {
	switch {
	case f.cmd.Kind == command.KindSecretDelete && f.cmd.KeepHistory:
		return keepHistorySteps
	case f.cmd.Kind == command.KindSecretDelete:
		return deleteSteps
	case f.cmd.Kind == command.KindSecretRestore:
		return restoreSteps
	case f.cmd.Create():
		return createSteps
	}
	return updateSteps
}

// write is what one decision has found so far, step by step.
type write struct {
	*reads
	live      *corev1.Secret    // the live Secret (readLive); nil when absent
	read      bool              // live was read before the steps ran (ConfirmReplay)
	liveFresh bool              // live was read by this decision
	n         int64             // its version counter (checkCounter)
	base      map[string][]byte // the data the live write starts from (checkUpdate, checkTarget)
	snap      *corev1.Secret    // the archive of version n (createSnapshot)
	inv       inventory         // the history of the live UID (checkSlots)
}

// decideSteps runs the command's steps in order, with what the run has
// read already (runReads). A decision that writes the live Secret is made
// from a fresh read of it and of what the write relies on (the archive
// before a replace, a fresh list of the history before a delete without
// history), and a purge's snapshot delete from a fresh read of the live
// Secret: when the steps decided it from an earlier decision's reads,
// those are read again and the steps run again.
func (f *family) decideSteps(ctx context.Context, run *workflow.Run) (workflow.Decision, error) {
	seen := f.runReads(run)
	w, d, err := f.decideWith(ctx, run, seen)
	switch {
	case err != nil, w.liveFresh:
	case writesLive(d):
		seen.refresh(f.purges())
		w, d, err = f.decideWith(ctx, run, seen)
	case purgesSnapshot(d):
		// The contract rechecks the live object before each cleanup
		// mutation: a purge's snapshot delete is sent only from a fresh
		// read of the live Secret, so a change to it since the purge began
		// stops the purge (changed-concurrently, uid-changed,
		// secret-absent, terminating) before one more snapshot goes.
		seen.rereadLive()
		w, d, err = f.decideWith(ctx, run, seen)
	}
	if tooLarge := (*historyTooLarge)(nil); errors.As(err, &tooLarge) {
		return w.withObservation(f.refuseTooLarge(tooLarge, w.live)), nil
	}
	if err != nil {
		return workflow.Decision{}, err // *workflow.Unavailable
	}
	var intends *metav1.ObjectMeta
	if d.Call != nil && d.Call.Step == StepCreateSnapshot {
		intends = &w.snap.ObjectMeta
	}
	seen.calling(d.Call, intends)
	return w.withObservation(d), nil
}

func (f *family) decideWith(ctx context.Context, run *workflow.Run, seen *runReads) (*write, workflow.Decision, error) {
	w := &write{reads: &reads{f: f, run: run, seen: seen}}
	d, err := w.decide(ctx)
	return w, d, err
}

// purgesSnapshot: d sends a purge's snapshot delete.
func purgesSnapshot(d workflow.Decision) bool {
	return d.Call != nil && d.Call.Step == StepDeleteSnapshot
}

// writesLive: d sends a write of the live Secret over an existing one.
func writesLive(d workflow.Decision) bool {
	return d.Call != nil && (d.Call.Step == StepReplaceLive || d.Call.Step == StepDeleteLive)
}

// decide returns the first decision of the command's steps (the last
// always decides).
func (w *write) decide(ctx context.Context) (workflow.Decision, error) {
	d, err := workflow.RunSteps(ctx, w, w.f.steps())
	switch {
	case err != nil:
		return workflow.Decision{}, err
	case d == nil:
		return workflow.Decision{}, fmt.Errorf("versioned %s: no step decided", w.f.cmd.Kind)
	}
	return *d, nil
}

// withObservation journals, with d, what the read of the live Secret that
// led to it showed, when it differs from the newest observation (a first
// read, or a change).
func (w *write) withObservation(d workflow.Decision) workflow.Decision {
	if w.live == nil || observed(w.run, w.live) {
		return d
	}
	obs := observation(w.live)
	switch {
	case d.Call != nil, d.End != nil:
		d.Notes = append(d.Notes, obs) // journaled last, just before the call
	case d.Complete != nil, d.Refuse != nil:
		d.Notes = append([]store.Record{obs}, d.Notes...) // first, before the re-read a decision holds (confirmDeleted)
	}
	return d
}

func decided(d workflow.Decision) (*workflow.Decision, error) { return &d, nil }

// readLive reads the live Secret (nil when absent), once per run
// (runReads).
func readLive(ctx context.Context, w *write) (*workflow.Decision, error) {
	if w.read {
		return nil, nil
	}
	live, fresh, err := w.seen.getLive(ctx, w.f.api)
	if err != nil {
		return nil, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	w.live, w.liveFresh = live, fresh
	return nil, nil
}

// createLive creates the Secret at version 1 when none is live.
func createLive(_ context.Context, w *write) (*workflow.Decision, error) {
	if w.live != nil {
		return nil, nil
	}
	return decided(workflow.Decision{Call: w.f.createCall()})
}

// needLive refuses a write to an absent Secret.
func needLive(_ context.Context, w *write) (*workflow.Decision, error) {
	if w.live != nil {
		return nil, nil
	}
	return decided(w.f.refuse(ReasonSecretAbsent, nil))
}

// bindLive refuses when the live UID is not the one this operation first
// observed: history is bound to it, and a recreated Secret of the same name
// is another lifetime.
func bindLive(_ context.Context, w *write) (*workflow.Decision, error) {
	if uid, ok := boundUID(w.run); ok && uid != string(w.live.UID) {
		return decided(w.f.refuse(ReasonUIDChanged, w.live))
	}
	return nil, nil
}

// checkCreated completes a create that finds exactly what it writes, and
// refuses one that finds anything else.
func checkCreated(_ context.Context, w *write) (*workflow.Decision, error) {
	if w.f.isCreated(w.live) {
		return decided(w.f.complete(workflow.OutcomeExisting, w.live, summaryDetail{Version: new(int64(1))}))
	}
	return decided(w.f.refuse(ReasonAlreadyExists, w.live))
}

// expectLive refuses a live Secret that is not at the expected
// resourceVersion (stale-resource-version, or changed-concurrently once
// this operation made a call), unless it already holds this command's
// result (existing): a command whose operation was journaled under another
// mutation ID.
func expectLive(ctx context.Context, w *write) (*workflow.Decision, error) {
	f := w.f
	if w.live.ResourceVersion == f.cmd.ExpectedResourceVersion {
		return nil, nil
	}
	if _, called := w.run.LastCall(); called {
		return decided(f.refuse(ReasonChangedConcurrent, w.live))
	}
	applied, err := w.alreadyApplied(ctx, w.live)
	if err != nil {
		return nil, err // *workflow.Unavailable
	}
	if applied {
		return decided(f.complete(workflow.OutcomeExisting, w.live, summaryDetail{}))
	}
	return decided(f.refuse(ReasonStale, w.live))
}

// checkWritable refuses a Secret being deleted and a service-account token.
func checkWritable(_ context.Context, w *write) (*workflow.Decision, error) {
	switch {
	case w.live.DeletionTimestamp != nil:
		return decided(w.f.refuse(ReasonTerminating, w.live))
	case w.live.Type == corev1.SecretTypeServiceAccountToken:
		return decided(w.f.refuse(ReasonServiceAccountToken, w.live))
	}
	return nil, nil
}

// checkCounter reads the live version counter; an invalid one refuses with
// its own reason.
func checkCounter(_ context.Context, w *write) (*workflow.Decision, error) {
	n, err := CurrentVersion(w.live.Annotations[AnnotationVersion], hasKey(w.live.Annotations, AnnotationVersion))
	if err != nil {
		return decided(w.f.refuse(err.Error(), w.live))
	}
	w.n = n
	return nil, nil
}

// checkUpdate refuses an update of an immutable Secret or one that removes
// a key the Secret lacks; the write starts from the live data.
func checkUpdate(_ context.Context, w *write) (*workflow.Decision, error) {
	f, live := w.f, w.live
	if live.Immutable != nil && *live.Immutable {
		return decided(f.refuse(ReasonImmutable, live))
	}
	for _, k := range f.cmd.RemoveKeys {
		if _, ok := live.Data[k]; !ok {
			return decided(f.refuse(ReasonKeyAbsent, live))
		}
	}
	w.base = live.Data
	return nil, nil
}

// checkTarget reads a restore's target: only versions below the live
// counter are archived history (version-ahead), and only a genuine
// snapshot is read (loadTarget). An immutable Secret that already holds the
// target's data is restored (existing); otherwise immutable refuses, and so
// does data over the API server's limit (too-large).
func checkTarget(ctx context.Context, w *write) (*workflow.Decision, error) {
	f, live := w.f, w.live
	if f.cmd.Version >= w.n {
		return decided(f.refuse(ReasonVersionAhead, live))
	}
	target, reason, err := w.loadTarget(ctx, live)
	if err != nil {
		return nil, err
	}
	if target == nil {
		return decided(f.refuse(reason, live))
	}
	if live.Immutable != nil && *live.Immutable {
		if sameData(live.Data, target.Data) {
			return decided(f.complete(workflow.OutcomeExisting, live, summaryDetail{RestoredVersion: &f.cmd.Version}))
		}
		return decided(f.refuse(ReasonImmutable, live))
	}
	if DataSize(target.Data) > MaxSecretBytes {
		return decided(f.refuse(ReasonTooLarge, live))
	}
	w.base = target.Data
	return nil, nil
}

// checkSlots lists the history of the live UID and refuses while a slot
// this write or the next ones use holds anything keyledger did not make, or
// while keyledger's own history is newer than the counter.
func checkSlots(ctx context.Context, w *write) (*workflow.Decision, error) {
	inv, err := w.inventory(ctx, w.live)
	if err != nil {
		return nil, err
	}
	w.inv = inv
	if d, blocked := w.f.checkSlots(w.live, inv, w.n); blocked {
		return &d, nil
	}
	return nil, nil
}

// createSnapshot archives the state being replaced, unless the journal
// settled that create already.
func createSnapshot(_ context.Context, w *write) (*workflow.Decision, error) {
	w.snap = snapshotOf(w.live, w.n, w.run.Op.CreatedAt, w.f.actor())
	if _, ok := w.run.Settled(StepCreateSnapshot, w.f.secretTarget(w.snap.Name)); ok {
		return nil, nil
	}
	return decided(workflow.Decision{Call: w.f.snapshotCall(w.live, w.snap)})
}

// checkArchive refuses the live write while the archive this operation
// made is not there, not keyledger's, terminating or held by finalizers (a
// rerun checks it again: it may have been deleted since; a missing archive
// is never re-created). The decision that sends the live write reads the
// archive again first (runReads.confirm).
func checkArchive(ctx context.Context, w *write) (*workflow.Decision, error) {
	archived, _ := w.run.Settled(StepCreateSnapshot, w.f.secretTarget(w.snap.Name))
	if w.seen != nil && w.seen.confirming {
		if err := w.seen.confirm(ctx, w.f.api, w.snap.Name); err != nil {
			return nil, err
		}
		prov, err := provenanceOf(w.seen.journal, w.run, w.live.UID)
		if err != nil {
			return nil, err
		}
		inv := classify(w.seen.metas, w.live, prov)
		w.inv, w.reads.inv = inv, &inv
	}
	if reason := archiveProblem(w.inv, w.n, archived.By); reason != "" {
		return decided(w.f.refuse(reason, w.live))
	}
	return nil, nil
}

// pruneSnapshot deletes the snapshots beyond the limit (prune).
func pruneSnapshot(_ context.Context, w *write) (*workflow.Decision, error) {
	protected := []int64{w.n}
	if w.f.cmd.Kind == command.KindSecretRestore {
		protected = append(protected, w.f.cmd.Version)
	}
	if d, done := w.f.prune(w.run, w.live, w.inv, protected); !done {
		return &d, nil
	}
	return nil, nil
}

// replaceLive writes version N+1 over the archived state.
func replaceLive(_ context.Context, w *write) (*workflow.Decision, error) {
	return decided(workflow.Decision{Call: w.f.replaceCall(w.live, w.base, w.n, w.snap.Name)})
}

// deleteSnapshot deletes every snapshot keyledger made for the live UID,
// then confirms that none is left (purge); anything else is left alone.
func deleteSnapshot(ctx context.Context, w *write) (*workflow.Decision, error) {
	inv, err := w.inventory(ctx, w.live)
	if err != nil {
		return nil, err
	}
	w.inv = inv
	if d, done := w.f.purge(w.run, w.live, inv); !done {
		return &d, nil
	}
	return nil, nil
}

// deleteLive deletes the live Secret.
func deleteLive(_ context.Context, w *write) (*workflow.Decision, error) {
	return decided(workflow.Decision{Call: w.f.deleteLiveCall(w.live)})
}

// confirmDelete decides once the live delete is settled: the live Secret is
// read again and reported deleted or pending (confirmDeleted).
func confirmDelete(ctx context.Context, w *write) (*workflow.Decision, error) {
	if _, ok := w.run.Settled(StepDeleteLive, w.f.liveTarget()); !ok {
		return nil, nil
	}
	d, err := w.f.confirmDeleted(ctx, w.run)
	if err != nil {
		return nil, err
	}
	return &d, nil
}
