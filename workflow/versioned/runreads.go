package versioned

import (
	"context"
	"errors"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// runReads is what one run has read of the API server, reused by every
// decision of the same run: the live Secret is read once (by the precheck,
// or by the first decision) and the history is listed once, with the
// journal's provenance read right after the list. Between decisions it is
// brought up to date from the journal alone: each later record must be one
// of this run's own calls and its applied answer, and the answer's effect
// is folded in (a created snapshot is added, as its answer returned it; a
// deleted one removed; a pending one marked terminating). Any other record
// (a resolution, a lost or refused answer, another process's records after
// a reload) drops them, and the next decision reads afresh. Resolve never
// uses them: it always re-reads.
//
// Why this stays correct when another writer changes the live Secret or
// its history between two decisions of the run: every write this run sends
// carries a precondition the API server checks against what is there when
// the write arrives, not against what this run read. A snapshot create is a
// create (409 AlreadyExists when anything took the slot since the list:
// the answer is unknown, resolution reads the occupant and checks the slots
// again); a prune or purge delete carries the snapshot's UID and
// resourceVersion (409 when it changed: resolution re-reads it); the live
// write carries the live UID and resourceVersion read for it (409 when
// anyone wrote the Secret since, settled by a fresh read as
// changed-concurrently, the reason a fresh read would have refused with).
// A look-alike planted after the list in a slot above the live counter is
// one this write does not use: the next write lists afresh and refuses it
// (slot-occupied). The archive this run created is checked from its own
// create's answer (there, keyledger's, not terminating, without
// finalizers); a delete of it by someone else after that answer is a race no
// list could close (it may come just after the live write as well), which
// a rerun or `history` reports.
type runReads struct {
	run  *workflow.Run // the run they belong to; nil: the precheck's read, not yet bound
	asOf int           // how many of run.Records they account for

	liveRead bool
	live     *corev1.Secret // the live Secret as read; nil when absent

	listed  types.UID                      // the live UID the history was listed for ("" when not listed)
	metas   []metav1.PartialObjectMetadata // that listing, with this run's applied answers folded in
	journal [][]store.Record               // the journal's provenance records, read right after the list

	// confirming: the next decision reads the archive again (confirm);
	// relisting: it lists the history again (see refresh).
	confirming, relisting bool

	// calls are the calls the run's decisions made since asOf, by step and
	// target, with what each intends or its answer returned (a snapshot's
	// metadata).
	calls map[string]*metav1.ObjectMeta
}

func callKey(step, target string) string { return step + " " + target }

// runReads returns the reads run may reuse: the family's, when they belong
// to run and every record since is explained by this run's own calls and
// answers (folded in); fresh ones otherwise.
func (f *family) runReads(run *workflow.Run) *runReads {
	m := f.seen
	switch {
	case m != nil && m.run == nil && preparedOnly(run):
		// The precheck's read of this run (and the listing made while the
		// digest was computed): nothing is journaled but the preparation,
		// so nothing has happened since that the reads must account for.
		m.run, m.asOf = run, len(run.Records)
	case m == nil, m.run != run, !m.fold(run.Records):
		m = &runReads{run: run, asOf: len(run.Records)}
	}
	m.calls = map[string]*metav1.ObjectMeta{}
	f.seen = m
	return m
}

// preparedOnly: run has journaled nothing but its preparation (a fresh
// operation, or one resumed before its first decision).
func preparedOnly(run *workflow.Run) bool {
	return len(run.Records) == 1 && run.Records[0].Kind == store.RecordPreparation
}

// fold brings the reads up to date with the records journaled since asOf:
// false when one of them is not this run's own call or its applied answer.
func (m *runReads) fold(records []store.Record) bool {
	if m.asOf > len(records) {
		return false
	}
	for _, r := range records[m.asOf:] {
		switch {
		case r.Kind == store.RecordObservation && r.Step == StepReadLive:
		case r.Kind == store.RecordAuthorityCall:
			if _, ok := m.calls[callKey(r.Step, r.Target.String())]; !ok {
				return false
			}
		case workflow.AppliedResult(r):
			if !m.applied(r) {
				return false
			}
		default:
			return false
		}
	}
	m.asOf = len(records)
	return true
}

// applied folds the applied answer r of one of this run's calls.
func (m *runReads) applied(r store.Record) bool {
	meta, ok := m.calls[callKey(r.Step, r.Target.String())]
	if !ok {
		return false
	}
	name := r.Target.Name
	switch r.Step {
	case StepCreateSnapshot:
		created := meta.DeepCopy()
		if created.UID == "" {
			// No object came back with the answer: the call's intent,
			// with the answer's identity.
			created.UID, created.ResourceVersion = types.UID(r.UID), r.ResourceVersion
		}
		m.metas = append(slices.Clone(m.metas), metav1.PartialObjectMetadata{ObjectMeta: *created})
	case StepPruneSnapshot, StepDeleteSnapshot:
		d, err := detailOf[deletionDetail](r)
		if err != nil {
			return false // a detail this run did not write: its reads are dropped
		}
		if d.Deletion != deletionFailed { // a refused delete leaves the snapshot as listed
			m.metas = deleted(m.metas, name, d.Deletion == kube.DeletionPending)
		}
	default: // the live Secret: read it again
		m.liveRead, m.live = false, nil
	}
	return true
}

// deleted is metas after the delete of name: gone, or terminating when the
// answer said the delete is pending.
func deleted(metas []metav1.PartialObjectMetadata, name string, pending bool) []metav1.PartialObjectMetadata {
	out := make([]metav1.PartialObjectMetadata, 0, len(metas))
	for _, o := range metas {
		if o.Name == name {
			if !pending {
				continue
			}
			o = *o.DeepCopy()
			if o.DeletionTimestamp == nil {
				now := metav1.NewTime(time.Now())
				o.DeletionTimestamp = &now
			}
		}
		out = append(out, o)
	}
	return out
}

// calling notes a call this run's decision makes; meta is what it intends
// (a snapshot's metadata), or nil.
func (m *runReads) calling(c *workflow.Call, meta *metav1.ObjectMeta) {
	if c == nil {
		return
	}
	if meta == nil {
		meta = &metav1.ObjectMeta{}
	}
	m.calls[callKey(c.Step, c.Target.String())] = meta.DeepCopy()
}

// answered notes what the applied answer of a call returned (a snapshot's
// metadata, the API server's own: finalizers an admission webhook added
// included).
func (m *runReads) answered(step, target string, got *metav1.ObjectMeta) {
	if m == nil {
		return
	}
	if _, ok := m.calls[callKey(step, target)]; ok {
		out := got.DeepCopy()
		out.ManagedFields = nil
		m.calls[callKey(step, target)] = out
	}
}

// getLive reads the live Secret once per run; fresh says whether this call
// read it.
func (m *runReads) getLive(ctx context.Context, api secrets) (live *corev1.Secret, fresh bool, err error) {
	if m.liveRead {
		return m.live, false, nil
	}
	if live, err = getLive(ctx, api); err != nil {
		return nil, false, err
	}
	m.liveRead, m.live = true, live
	return live, true, nil
}

// refresh drops what a decision that writes the live Secret must read
// afresh. A replace reads again only the archive it relies on (confirm): a
// precondition on another object cannot be had, and the archive is the one
// thing the replace stands on that the replace itself does not carry. The
// live Secret is not read again: the replace carries the live UID and the
// resourceVersion this run read (the precheck's read, or the first
// decision's), and the API server compares them with what is there when
// the write arrives, so a write by anyone since answers 409, which
// resolution settles from a fresh read (changed-concurrently, uid-changed,
// secret-absent), never overwritten. A delete without history reads the
// live Secret again and lists the whole history afresh: its live delete
// waits for a fresh list to show no snapshot left (a read of the purge's
// effect, workflow.Verify).
func (m *runReads) refresh(purge bool) {
	if purge {
		m.liveRead, m.live = false, nil
		m.relisting = true
	} else {
		m.confirming = true
	}
}

// rereadLive drops the live Secret only: the next decision reads it again
// (before a purge's next snapshot delete), and the history listing stays.
func (m *runReads) rereadLive() { m.liveRead, m.live = false, nil }

// history is one listing of the history and the journal's provenance read
// right after it.
type history struct {
	metas   []metav1.PartialObjectMetadata
	journal [][]store.Record
}

// listing lists the history of live's UID once per run, and reads the
// journal right after it (see readInventory for why in that order).
func (m *runReads) listing(ctx context.Context, f *family, live *corev1.Secret) ([]metav1.PartialObjectMetadata, [][]store.Record, error) {
	list := func(ctx context.Context) (history, error) {
		metas, err := listClaims(ctx, f, live)
		if err != nil {
			return history{}, err
		}
		journal, err := f.journalProvenance(ctx, live.UID, listedNames(metas))
		return history{metas: metas, journal: journal}, err
	}
	var (
		h   history
		err error
	)
	switch {
	case m.listed != live.UID || live.UID == "":
		h, err = list(ctx)
	case m.relisting:
		// What this run's deletes intended: the listing with them folded in.
		h, err = workflow.Verify(ctx, history{metas: m.metas, journal: m.journal}, list)
	default:
		return m.metas, m.journal, nil
	}
	if err != nil {
		return nil, nil, err
	}
	m.listed, m.metas, m.journal, m.relisting = live.UID, h.metas, h.journal, false
	return m.metas, m.journal, nil
}

// confirm reads the archive name again before the live write relies on it
// (a read of the create's effect, workflow.Verify: what its answer
// returned is what it intends), and puts what it shows in the listing: its
// metadata now, or nothing when it is gone.
func (m *runReads) confirm(ctx context.Context, api secrets, name string) error {
	var intended *metav1.ObjectMeta
	for i := range m.metas {
		if m.metas[i].Name == name {
			intended = &m.metas[i].ObjectMeta
		}
	}
	now, err := workflow.Verify(ctx, intended, func(ctx context.Context) (*metav1.ObjectMeta, error) {
		s, err := api.GetSnapshotMeta(ctx, name) // its metadata is all the check reads
		switch {
		case errors.Is(err, kube.ReasonNotFound):
			return nil, nil
		case err != nil:
			return nil, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
		}
		return &s.ObjectMeta, nil
	})
	if err != nil {
		return err
	}
	out := deleted(m.metas, name, false)
	if now != nil {
		meta := now.DeepCopy()
		meta.ManagedFields = nil
		out = append(out, metav1.PartialObjectMetadata{ObjectMeta: *meta})
	}
	m.metas, m.confirming = out, false
	return nil
}
