package versioned

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
)

// The steps of a versioned write, as the journal names them. Every write
// is one engine call whose target is "secret/<name>".
const (
	StepReadLive       = "read-live"       // observation: what the read of the live Secret showed
	StepCreateLive     = "create-live"     // SecretUpdate with expectedResourceVersion "": create at version 1
	StepCreateSnapshot = "create-snapshot" // archive the live state at version N
	StepPruneSnapshot  = "prune-snapshot"  // retention: delete the oldest snapshot beyond the limit
	StepDeleteSnapshot = "delete-snapshot" // SecretDelete without history: delete every snapshot of the UID
	StepReplaceLive    = "replace-live"    // write version N+1 (update or restore)
	StepDeleteLive     = "delete-live"     // SecretDelete: delete the live Secret
)

// Reasons a versioned write is refused (besides the counter's).
const (
	ReasonSecretAbsent        = "secret-absent"
	ReasonAlreadyExists       = "already-exists"
	ReasonStale               = "stale-resource-version"
	ReasonChangedConcurrent   = "changed-concurrently"
	ReasonUIDChanged          = "uid-changed"
	ReasonTerminating         = "terminating"
	ReasonServiceAccountToken = "service-account-token"
	ReasonImmutable           = "immutable"
	ReasonKeyAbsent           = "key-absent"
	ReasonVersionAbsent       = "version-absent"
	ReasonSnapshotInvalid     = "snapshot-invalid"
	ReasonSourceConflict      = "source-conflict"
	ReasonResultMismatch      = "result-mismatch"

	// ReasonSlotOccupied: a snapshot slot at or above the live counter holds
	// an object keyledger did not make. Review it; raise the live counter
	// above it by hand (keyledger.dev/version) and rerun.
	ReasonSlotOccupied = "slot-occupied"
	// ReasonCounterBehind: keyledger's own history holds a version above
	// the live counter (the counter was moved back): the write would
	// overwrite that history's order.
	ReasonCounterBehind = "counter-behind"
	// ReasonForeignSnapshot: a restore's target slot holds an object
	// keyledger did not make.
	ReasonForeignSnapshot = "foreign-snapshot"
	// ReasonVersionAhead: a restore's target is not below the live counter.
	ReasonVersionAhead = "version-ahead"
	// ReasonArchiveMissing: the archive this operation made is gone (or
	// another object holds its slot) before the live write.
	ReasonArchiveMissing = "archive-missing"
	// ReasonSnapshotTerminating and ReasonSnapshotFinalizers: the archive
	// of the state being replaced is being deleted, or carries finalizers
	// (keyledger sets none): it cannot stand behind the live write.
	ReasonSnapshotTerminating = "snapshot-terminating"
	ReasonSnapshotFinalizers  = "snapshot-finalizers"
	// ReasonTooLarge: a restore's data is over the API server's limit.
	ReasonTooLarge = "too-large"
	// ReasonSnapshotChanged: a snapshot changed between the read a
	// cleanup delete was decided from and the delete (its resourceVersion
	// precondition failed: 409): the versioning contract answers a
	// snapshot precondition conflict with a refusal, never a retry with
	// new preconditions.
	ReasonSnapshotChanged = "snapshot-changed"
)

// Reasons a run ends uncertain (exit 75): the same command rerun retries.
const (
	// ReasonPrunePending: a snapshot beyond the limit is still being
	// deleted, or its delete failed; the live write waits. The message
	// counts the prune's snapshots confirmed absent, pending and failed.
	ReasonPrunePending = "prune-pending"
	// ReasonHistoryPending: a delete without history still sees
	// snapshots of the UID (still being deleted, or their delete failed);
	// the live delete waits. The message counts the purge's snapshots
	// confirmed absent, pending and failed.
	ReasonHistoryPending = "history-pending"
)

// Outcomes of a SecretDelete, confirmed by re-reading the live Secret.
const (
	// OutcomeDeleted: the live object is confirmed gone.
	OutcomeDeleted workflow.Outcome = "deleted"
	// OutcomePending: the live object still exists, being deleted
	// (finalizers hold it).
	OutcomePending workflow.Outcome = "pending"
)

// Plan builds the engine's plan for one versioned write. limit is the
// retention limit (ParseHistoryLimit).
func Plan(cmd *Command, client kube.Interface, limit int) workflow.Plan {
	return plan(cmd, kube.NewVersionedSecrets(client, cmd.Namespace, cmd.Name), limit)
}

// plan builds the plan over any implementation of the family's verbs (the
// real adapter, or a unit test's double).
func plan(cmd *Command, api secrets, limit int) workflow.Plan {
	f := &family{cmd: cmd, limit: limit, api: api}
	return workflow.Plan{
		Prepare: store.PrepareParams{
			Kind: cmd.Kind, MutationID: cmd.Metadata.MutationID, RequestID: cmd.Metadata.RequestID,
			CommandDigest: cmd.Digest, Namespace: cmd.Namespace, Name: cmd.Name, Detail: prepareDetail(cmd),
		},
		Access: AccessMatrix(cmd.Namespace, cmd.Name),
		// A rules review proves that the identity holds exactly Rules: update
		// reaches no other Secret, whatever its name, and nothing else
		// (patch, watch, another resource, a ClusterRole grant) is held.
		Rights:   &kube.Rights{Namespace: cmd.Namespace, Rules: Rules(cmd.Name)},
		Precheck: f.precheck,
		Prefetch: f.prefetch,
		Family:   f,
		Digest:   f.digest,
	}
}

// prepareDetail is the preparation record's detail: key names and
// versions, never values (MaxUpdateKeys keeps it within the journal's
// limit).
func prepareDetail(cmd *Command) store.Detail {
	detail := preparationDetail{ExpectedResourceVersion: cmd.ExpectedResourceVersion}
	switch cmd.Kind {
	case command.KindSecretUpdate:
		detail.UpdateKeys = &UpdateKeys{Keys: sortedKeys(cmd.Data), RemoveKeys: cmd.RemoveKeys}
	case command.KindSecretRestore:
		detail.Version = &cmd.Version
	case command.KindSecretDelete:
		detail.KeepHistory = &cmd.KeepHistory
	}
	return store.DetailOf(detail)
}

// AccessMatrix is what an identity running versioned writes must and must
// not be allowed in the namespace: the rights of Rules (allowed), and
// patch, watch, deletecollection and update on another Secret (denied).
func AccessMatrix(namespace, name string) []kube.AccessCheck {
	other := kube.OtherSecretName(name)
	secret := func(verb, n string, allowed bool) kube.AccessCheck {
		return kube.SecretCheck(verb, namespace, n, allowed)
	}
	return []kube.AccessCheck{
		secret("get", name, true),
		secret("update", name, true),
		secret("delete", name, true),
		secret("get", "", true),
		secret("list", "", true),
		secret("create", "", true),
		secret("delete", "", true),
		secret("update", other, false),
		secret("patch", name, false),
		secret("watch", "", false),
		secret("deletecollection", "", false),
		{Verb: "get", Resource: "configmaps", Namespace: namespace, Allowed: false},
		{Verb: "get", Resource: "pods", Namespace: namespace, Allowed: false},
	}
}

// secrets is the family's whole view of the API server: exactly the verbs
// it calls. kube.VersionedSecrets is the real one (bound to one namespace
// and live name, refusing any other name); unit tests drive the family
// through a scripted double.
type secrets interface {
	GetLive(ctx context.Context) (*corev1.Secret, error)
	CreateLive(ctx context.Context, s *corev1.Secret) (*corev1.Secret, error)
	ReplaceLive(ctx context.Context, s *corev1.Secret) (*corev1.Secret, error)
	DeleteLive(ctx context.Context, uid types.UID, resourceVersion string) (kube.Deletion, error)
	CreateSnapshot(ctx context.Context, s *corev1.Secret) (*corev1.Secret, error)
	GetSnapshot(ctx context.Context, name string) (*corev1.Secret, error)
	GetSnapshotMeta(ctx context.Context, name string) (*metav1.PartialObjectMetadata, error)
	DeleteSnapshot(ctx context.Context, name string, uid types.UID, resourceVersion string) (kube.Deletion, error)
	ListClaims(ctx context.Context, keep func(*metav1.ObjectMeta) bool, max int) ([]metav1.PartialObjectMetadata, error)
}

var _ secrets = (*kube.VersionedSecrets)(nil)

// family implements workflow.Family for one versioned write. What it
// remembers of the API server between decisions is one run's reads
// (runReads), brought up to date from the journal before each decision and
// dropped when the journal shows anything but this run's own applied
// answers; the preconditions of every write, not that memory, catch
// another writer (see runReads). Resolve always reads afresh.
type family struct {
	cmd     *Command
	limit   int
	api     secrets
	journal workflow.JournalReader
	seen    *runReads  // what this run has read (runReads)
	ahead   *listAhead // the history listing the prefetch started, until digest takes it
	// refused are the targets of the cleanup deletes the API server
	// refused in this process (deletionFailed): counted failed here, sent
	// again by a rerun.
	refused map[string]bool
}

// BindJournal implements workflow.JournalBound: provenance is proven from
// the create-snapshot records, of every operation on this Secret, on the
// snapshot names a listing returned (or the one slot a decision looks at).
func (f *family) BindJournal(j workflow.JournalReader) { f.journal = j }

// liveTarget is the live Secret; secretTarget a Secret of the history.
func (f *family) liveTarget() store.Target { return f.secretTarget(f.cmd.Name) }

func (f *family) secretTarget(name string) store.Target {
	return store.SecretTarget(f.cmd.Namespace, name)
}

// reads is what one Decide or one Resolve call reads with. A decision
// reuses what its run has read already (seen: one read of the live Secret
// and one history listing per run, see runReads); a resolution reads
// everything afresh (seen is nil), once per call: the history listed in it
// serves every check of the call.
type reads struct {
	f    *family
	run  *workflow.Run
	seen *runReads  // the run's reads (decisions only)
	inv  *inventory // the history of the live UID, as this call classified it
}

func (f *family) reads(run *workflow.Run) *reads { return &reads{f: f, run: run} }

// getLive reads the live Secret: nil when it is absent.
func getLive(ctx context.Context, api secrets) (*corev1.Secret, error) {
	s, err := api.GetLive(ctx)
	if errors.Is(err, kube.ReasonNotFound) {
		return nil, nil
	}
	return s, err
}

// precheck runs before the journal is opened: the size guard refuses an
// update whose live Secret would exceed MaxSecretBytes (exit 64), so
// nothing is journaled or written for it. New data is measured by the
// contract's estimate (EstimateSize: UTF-8 bytes x 1.4); an update that
// brings no new bytes (it only removes keys or sets values the live Secret
// already holds) by the bytes the API server counts (DataSize). A restore
// writes data the API server accepted before: Decide checks it against
// DataSize once the target is proven ours (nothing is read from a
// snapshot before that).
func (f *family) precheck(ctx context.Context) error {
	if f.cmd.Kind != command.KindSecretUpdate {
		return nil
	}
	// The precheck's read is the run's first: the first decision reuses it
	// (runReads), and the live write's resourceVersion precondition catches
	// any write since.
	live, err := getLive(ctx, f.api)
	if err != nil {
		return &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	f.seen = &runReads{liveRead: true, live: live}
	var desired *corev1.Secret
	switch {
	case live == nil && f.cmd.Create():
		desired = f.created()
	case live == nil, live.ResourceVersion != f.cmd.ExpectedResourceVersion:
		return nil // refused, journaled, by Decide
	default:
		desired = f.replacement(live, live.Data, 1)
		if live != nil && preservesData(live.Data, desired.Data) {
			if size := DataSize(desired.Data); size > MaxSecretBytes {
				return command.Invalid("spec", fmt.Sprintf("the Secret's data would be %d bytes (keys and values as stored), over the %d-byte limit", size, MaxSecretBytes))
			}
			return nil
		}
	}
	if size := EstimateSize(desired); size > MaxSecretBytes {
		return command.Invalid("spec.data", fmt.Sprintf("the Secret would be about %d bytes (values' UTF-8 bytes x 1.4 plus metadata), over the %d-byte guard", size, MaxSecretBytes))
	}
	return nil
}

// Decide reads the durable facts and says what to do next. Everything it
// reads is read within this call (see reads).
func (f *family) Decide(ctx context.Context, run *workflow.Run) (workflow.Decision, error) {
	d, err := f.decideSteps(ctx, run)
	if err == nil && f.purges() {
		// A delete without history purges first: whatever then stops the
		// live delete, its refusal says which versions are already gone.
		switch {
		case d.Refuse != nil:
			d.Refuse.Summary, err = withPurged(d.Refuse.Summary, run)
		case d.Call != nil && d.Call.Step == StepDeleteLive:
			d.Call.Summary, err = withPurged(d.Call.Summary, run)
		}
	}
	return d, err
}

// purges: the command is a delete without history, which deletes every
// snapshot keyledger made for the live UID before the live delete.
func (f *family) purges() bool { return f.cmd.Kind == command.KindSecretDelete && !f.cmd.KeepHistory }

// withPurged adds to summary the versions whose snapshots this operation's
// purge deleted ("purgedVersions", oldest first; empty when none).
func withPurged(summary store.Detail, run *workflow.Run) (store.Detail, error) {
	purged, err := purgedVersions(run)
	if err != nil {
		return store.Detail{}, err
	}
	return store.Merge(store.DetailOf(purgedDetail{PurgedVersions: purged}), summary), nil
}

// purgedVersions lists the versions of the snapshots whose delete-snapshot
// call the journal settled as done (deleted or pending; never one the API
// server refused).
func purgedVersions(run *workflow.Run) ([]int64, error) {
	out := []int64{}
	seen := map[store.Target]bool{}
	for _, r := range run.Records {
		if r.Kind != store.RecordAuthorityCall || r.Step != StepDeleteSnapshot || seen[r.Target] {
			continue
		}
		seen[r.Target] = true
		if done, ok := run.Settled(r.Step, r.Target); ok {
			by, err := detailOf[deletionDetail](done.By)
			if err != nil {
				return nil, err
			}
			if by.Deletion == deletionFailed {
				continue // refused: the snapshot stays
			}
			v, err := callVersion(done.Call)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// checkSlots refuses a write while a slot at or above the live counter n is
// occupied by anything keyledger cannot prove it made (slot-occupied: the
// operator reviews it, raises the live counter above it by hand and reruns),
// or while keyledger's own history is newer than the counter
// (counter-behind: the counter was moved back). An occupant of slot n that
// carries a journaled nonce is a keyledger create whose answer was lost:
// the create is sent and its 409 settles it.
func (f *family) checkSlots(live *corev1.Secret, inv inventory, n int64) (workflow.Decision, bool) {
	var names []string
	count, highest := 0, int64(0)
	for _, o := range inv.foreign {
		if o.Version < n || o.Version == 0 || (o.Reason == ForeignUnsettled && o.Version == n) {
			continue
		}
		if o.Reason == ForeignUnsettled {
			return f.refuseWith(ReasonCounterBehind, live, summaryDetail{LiveVersion: &n, NewestVersion: &o.Version}), true
		}
		count++
		if len(names) < maxListed {
			names = append(names, o.Name)
		}
		highest = max(highest, o.Version)
	}
	if count > 0 {
		return f.refuseWith(ReasonSlotOccupied, live, summaryDetail{
			LiveVersion: &n, Occupied: &names, OccupiedCount: &count, HighestOccupied: &highest,
		}), true
	}
	if last := len(inv.genuine); last > 0 && inv.genuine[last-1].Version > n {
		return f.refuseWith(ReasonCounterBehind, live, summaryDetail{LiveVersion: &n, NewestVersion: &inv.genuine[last-1].Version}), true
	}
	return workflow.Decision{}, false
}

// maxListed bounds the names a refusal lists (journal records are bounded).
const maxListed = 20

// archiveProblem says why the archive of version n, settled by rec, cannot
// stand behind the live write: missing (or another object in its slot),
// terminating, or held by finalizers. "" when it can.
func archiveProblem(inv inventory, n int64, rec store.Record) string {
	s, ok := inv.byVersion(n)
	switch {
	case !ok || (rec.UID != "" && string(s.UID) != rec.UID):
		return ReasonArchiveMissing
	case s.Terminating:
		return ReasonSnapshotTerminating
	case s.Finalizers > 0:
		return ReasonSnapshotFinalizers
	}
	return ""
}

// prune deletes, oldest first and one at a time, the snapshots beyond the
// limit, never one in protected (the snapshot just taken, a restore's
// target). done is true when every one is confirmed absent. A snapshot
// still present (finalizers hold it, or the API server refused its
// delete: an admission policy) blocks the live write: the decision ends
// the run with *workflow.Uncertain (Decision.End, exit 75) once the read
// that saw it is journaled, saying how many of the prune's snapshots are
// confirmed absent, pending and failed; rerunning the same command checks
// again (and sends a refused delete again) and completes once they are
// gone.
func (f *family) prune(run *workflow.Run, live *corev1.Secret, inv inventory, protected []int64) (workflow.Decision, bool) {
	c, err := f.nextDelete(run, StepPruneSnapshot, live.UID, f.victims(inv, protected))
	if err != nil {
		return workflow.Decision{End: err}, false
	}
	if c.next != nil {
		return workflow.Decision{Call: c.next}, false
	}
	if c.pending+c.failed > 0 {
		return workflow.Decision{End: &workflow.Uncertain{Reason: ReasonPrunePending, Err: c.unfinished("the snapshots beyond the history limit", "the live write")}}, false
	}
	return workflow.Decision{}, true
}

// victims are the snapshots beyond the limit, oldest first, never one in
// protected.
func (f *family) victims(inv inventory, protected []int64) []Snapshot {
	excess := len(inv.genuine) - f.limit
	var out []Snapshot
	for _, s := range inv.genuine {
		if excess <= 0 {
			break
		}
		if slices.Contains(protected, s.Version) {
			continue
		}
		excess--
		out = append(out, s)
	}
	return out
}

// cleanup is where a prune or purge stands after one decision's walk of
// its snapshots (nextDelete): the next delete to send, or none, and what
// its deletes came to: snapshots confirmed absent (every delete of the
// step the journal settled as deleted), pending (still there, being
// deleted: finalizers hold them) and failed (the API server refused the
// delete in this process: an admission policy, RBAC).
type cleanup struct {
	next                    *workflow.Call
	absent, pending, failed int
}

// unfinished says what a cleanup that does not finish came to: what its
// snapshots are (what), the write that waits (blocked).
func (c cleanup) unfinished(what, blocked string) error {
	return fmt.Errorf("%s: absent %d, pending %d, failed %d (pending: still being deleted, finalizers hold them; failed: the API server refused the delete, an admission policy or RBAC); %s waits: rerun the same command once they are resolved",
		what, c.absent, c.pending, c.failed, blocked)
}

// nextDelete walks snapshots to delete under step (as listed in this
// decision): each whose delete the journal settled as pending, and each
// terminating one, is pending; each whose delete the API server refused
// in this process is failed (a refusal an earlier run journaled is sent
// again); one settled as deleted yet listed is a dry run's planned delete;
// the first of the rest is the next delete call. The walk stops at the
// next call; without one, the counts cover every snapshot.
func (f *family) nextDelete(run *workflow.Run, step string, liveUID types.UID, snapshots []Snapshot) (cleanup, error) {
	absent, err := settledAbsent(run, step)
	if err != nil {
		return cleanup{}, err
	}
	c := cleanup{absent: absent}
	for _, s := range snapshots {
		target := f.secretTarget(s.Name)
		done, ok := run.Settled(step, target)
		var by deletionDetail
		if ok {
			if by, err = detailOf[deletionDetail](done.By); err != nil {
				return cleanup{}, err
			}
		}
		switch {
		case ok && by.Deletion == deletionFailed && f.refused[target.String()]:
			c.failed++
		case ok && by.Deletion == deletionFailed:
			c.next = f.deleteSnapshotCall(step, liveUID, s)
			return c, nil
		case ok && by.Deletion != kube.DeletionPending:
		case ok, s.Terminating:
			c.pending++
		default:
			c.next = f.deleteSnapshotCall(step, liveUID, s)
			return c, nil
		}
	}
	return c, nil
}

// settledAbsent counts the snapshots whose delete under step the journal
// settled as deleted (gone, or its name now held by another object).
func settledAbsent(run *workflow.Run, step string) (int, error) {
	n := 0
	seen := map[store.Target]bool{}
	for _, r := range run.Records {
		if r.Kind != store.RecordAuthorityCall || r.Step != step || seen[r.Target] {
			continue
		}
		seen[r.Target] = true
		done, ok := run.Settled(r.Step, r.Target)
		if !ok {
			continue
		}
		by, err := detailOf[deletionDetail](done.By)
		if err != nil {
			return 0, err
		}
		if by.Deletion == kube.Deleted {
			n++
		}
	}
	return n, nil
}

// purge deletes every snapshot keyledger made for the live UID, then
// confirms that none is left: the history inv shows is the run's listing
// with every delete this run's answers settled folded in (a deleted
// snapshot removed, a pending one terminating, a refused one unchanged),
// and the decision that sends the live delete lists afresh
// (runReads.refresh), so a genuine snapshot it still shows is one whose
// delete is pending or was refused, or one made since. One still present
// blocks the live delete: the decision ends the run with
// *workflow.Uncertain (Decision.End, exit 75), saying how many of the
// purge's snapshots are confirmed absent, pending and failed; rerunning
// the same command checks again.
func (f *family) purge(run *workflow.Run, live *corev1.Secret, inv inventory) (workflow.Decision, bool) {
	c, err := f.nextDelete(run, StepDeleteSnapshot, live.UID, inv.genuine)
	if err != nil {
		return workflow.Decision{End: err}, false
	}
	if c.next != nil {
		return workflow.Decision{Call: c.next}, false
	}
	if left := len(inv.genuine); left > 0 {
		c.pending = left - c.failed // whatever is still there and not refused
		return workflow.Decision{End: &workflow.Uncertain{Reason: ReasonHistoryPending, Err: c.unfinished("the snapshots of this Secret", "the live delete")}}, false
	}
	return workflow.Decision{}, true
}

// inventory is the history of live's UID, classified by what the journal
// proves (see provenance): listed once per run for a decision (runReads),
// once per call for a resolution.
func (r *reads) inventory(ctx context.Context, live *corev1.Secret) (inventory, error) {
	if r.inv != nil {
		return *r.inv, nil
	}
	var inv inventory
	if r.seen != nil {
		metas, journal, err := r.seen.listing(ctx, r.f, live)
		if err != nil {
			return inventory{}, err
		}
		prov, err := provenanceOf(journal, r.run, live.UID)
		if err != nil {
			return inventory{}, err
		}
		inv = classify(metas, live, prov)
	} else {
		var err error
		if inv, err = readInventory(ctx, r.f, r.run, live); err != nil {
			return inventory{}, err
		}
	}
	r.inv = &inv
	return inv, nil
}

// loadTarget reads and validates a restore's target snapshot: only a
// genuine snapshot (its UID journaled by keyledger's create) of the live
// UID, found in the metadata list first, is ever read. A nil target with a
// reason is a refusal; an error is a failed read.
func (r *reads) loadTarget(ctx context.Context, live *corev1.Secret) (*corev1.Secret, string, error) {
	f := r.f
	inv, err := r.inventory(ctx, live)
	if err != nil {
		return nil, "", err
	}
	want, ok := inv.byVersion(f.cmd.Version)
	if !ok {
		if _, planted := inv.foreignAt(f.cmd.Version); planted {
			return nil, ReasonForeignSnapshot, nil
		}
		return nil, ReasonVersionAbsent, nil
	}
	if want.SourceType != string(live.Type) || want.Terminating {
		return nil, ReasonSnapshotInvalid, nil
	}
	s, err := f.api.GetSnapshot(ctx, want.Name)
	if err != nil {
		if errors.Is(err, kube.ReasonNotFound) {
			return nil, ReasonVersionAbsent, nil
		}
		return nil, "", &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	meta, ok := checkSnapshot(s, live.UID, live.Name)
	if !ok || s.UID != want.UID || meta.Version != f.cmd.Version || meta.SourceType != string(live.Type) || meta.Terminating {
		return nil, ReasonSnapshotInvalid, nil
	}
	return s, "", nil
}

// alreadyApplied reports whether live, found at another resourceVersion
// than the command expects, already holds this command's result: version
// M, the snapshot of M-1 taken from the expected resourceVersion, and the
// data the command writes over it. It settles a command whose own
// operation was journaled under another mutation ID (only the live bytes
// decide, and nothing is written). The predecessor snapshot is history only
// when the journal proves it: the journal is read first, and no snapshot is
// read unless its slot holds a UID a keyledger create answered with, so a
// look-alike planted in that slot (its source-resource-version copied from
// what anyone can read) leaves the stale command refused. A restore's
// target must be proven ours too (loadTarget).
func (r *reads) alreadyApplied(ctx context.Context, live *corev1.Secret) (bool, error) {
	f := r.f
	if f.cmd.Kind == command.KindSecretDelete {
		return false, nil
	}
	m, err := CurrentVersion(live.Annotations[AnnotationVersion], hasKey(live.Annotations, AnnotationVersion))
	if err != nil || m < 2 {
		return false, nil
	}
	name := SnapshotName(live.UID, m-1)
	prov, err := f.provenance(ctx, r.run, live.UID, []string{name})
	if err != nil {
		return false, err
	}
	if !prov.provenSlot(name) {
		return false, nil
	}
	prev, err := f.api.GetSnapshot(ctx, name)
	if err != nil {
		return false, nil
	}
	meta, ok := checkSnapshot(prev, live.UID, live.Name)
	if !ok || !prov.journaled(&prev.ObjectMeta) || meta.SourceResourceVersion != f.cmd.ExpectedResourceVersion {
		return false, nil
	}
	base := prev.Data
	if f.cmd.Kind == command.KindSecretRestore {
		target, _, err := r.loadTarget(ctx, live)
		if err != nil || target == nil {
			return false, err
		}
		base = target.Data
	}
	return sameData(live.Data, f.replacement(live, base, m-1).Data), nil
}

func (f *family) actor() string { return f.cmd.Metadata.RequestID + "/" + f.cmd.Metadata.MutationID }

// created is the Secret a create writes.
func (f *family) created() *corev1.Secret {
	data := make(map[string][]byte, len(f.cmd.Data))
	for k, v := range f.cmd.Data {
		data[k] = v
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.cmd.Namespace, Name: f.cmd.Name, Annotations: map[string]string{AnnotationVersion: "1"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
}

func (f *family) isCreated(s *corev1.Secret) bool {
	return s.Annotations[AnnotationVersion] == "1" && s.Type == corev1.SecretTypeOpaque && sameData(s.Data, f.created().Data)
}

// replacement is live carrying version n+1 and the data the command
// writes over base: for an update base with the command's values set and
// removeKeys removed; for a restore base itself (the target's data, bytes
// as stored: never decoded to text). Type, UID, resourceVersion,
// ownerReferences, finalizers, labels and other annotations are kept, but
// kubectl.kubernetes.io/last-applied-configuration is dropped.
func (f *family) replacement(live *corev1.Secret, base map[string][]byte, n int64) *corev1.Secret {
	out := live.DeepCopy()
	out.ManagedFields = nil
	data := make(map[string][]byte, len(base)+len(f.cmd.Data))
	for k, v := range base {
		data[k] = v
	}
	if f.cmd.Kind == command.KindSecretUpdate {
		for k, v := range f.cmd.Data {
			data[k] = v
		}
		for _, k := range f.cmd.RemoveKeys {
			delete(data, k)
		}
	}
	out.Data = data
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	// kubectl's last-applied copy holds the values being replaced in plain
	// text: never kept past a keyledger write.
	delete(out.Annotations, AnnotationLastApplied)
	out.Annotations[AnnotationVersion] = strconv.FormatInt(n+1, 10)
	return out
}

func (f *family) refuse(reason string, s *corev1.Secret) workflow.Decision {
	return workflow.Decision{Refuse: &workflow.Refusal{Reason: reason, Summary: f.summary(s, summaryDetail{})}}
}

func (f *family) refuseWith(reason string, s *corev1.Secret, extra summaryDetail) workflow.Decision {
	return workflow.Decision{Refuse: &workflow.Refusal{Reason: reason, Summary: f.summary(s, extra)}}
}

func (f *family) complete(outcome workflow.Outcome, s *corev1.Secret, extra summaryDetail) workflow.Decision {
	return workflow.Decision{Complete: &workflow.Completion{Outcome: outcome, Summary: f.summary(s, extra)}}
}

// summary is the content-free description printed on stdout and stored in
// the completion or refusal record: identity, versions, names and counts
// (extra, with the live Secret named here).
func (f *family) summary(s *corev1.Secret, extra summaryDetail) store.Detail {
	var uid types.UID
	if s != nil {
		uid = s.UID
	}
	return f.summaryOf(uid, extra)
}

// summaryOf is summary for the live Secret of uid ("" when there is none).
func (f *family) summaryOf(uid types.UID, extra summaryDetail) store.Detail {
	extra.Secret = secretRef{Namespace: f.cmd.Namespace, Name: f.cmd.Name, UID: string(uid)}
	return store.DetailOf(extra)
}

// observation records what a read of the live Secret showed: identity,
// version counter, type and how many keys; never values.
func observation(s *corev1.Secret) store.Record {
	detail := liveReadDetail{Keys: len(s.Data), Type: string(s.Type), Terminating: s.DeletionTimestamp != nil}
	if n, err := CurrentVersion(s.Annotations[AnnotationVersion], hasKey(s.Annotations, AnnotationVersion)); err == nil {
		detail.Version = &n
	}
	return store.Record{Kind: store.RecordObservation, Step: StepReadLive, UID: string(s.UID), ResourceVersion: s.ResourceVersion,
		Detail: store.DetailOf(detail)}
}

// observed reports whether the newest read-live observation journaled for
// this operation shows live's UID and resourceVersion.
func observed(run *workflow.Run, live *corev1.Secret) bool {
	for i := len(run.Records) - 1; i >= 0; i-- {
		if r := run.Records[i]; r.Kind == store.RecordObservation && r.Step == StepReadLive {
			return r.UID == string(live.UID) && r.ResourceVersion == live.ResourceVersion
		}
	}
	return false
}

// boundUID is the live UID this operation first observed: history is bound
// to it, and a recreated Secret of the same name is another lifetime.
func boundUID(run *workflow.Run) (string, bool) {
	for _, r := range run.Records {
		if r.Kind == store.RecordObservation && r.Step == StepReadLive && r.UID != "" {
			return r.UID, true
		}
	}
	return "", false
}

// intentDigest names what a call intends without any value: the command,
// the object and resourceVersion it starts from and the version it writes.
// The journal never holds a digest of values: a plain or stored-salt digest
// would let anyone who reads the journal confirm a guessed value, and a
// rerun needs none, since it compares the live bytes with the command's.
func intentDigest(cmd *Command, uid, rv string, version int64) string {
	b, _ := json.Marshal([]any{cmd.Digest, uid, rv, version})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// callVersion is the version a call's detail names.
func callVersion(call store.Record) (int64, error) {
	d, err := detailOf[versionDetail](call)
	return d.Version, err
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

func sortedKeys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
