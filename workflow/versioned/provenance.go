package versioned

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// Why an object that claims to be history of a live UID is not history
// (Foreign.Reason).
const (
	// ForeignNotJournaled: no journaled create-snapshot call made it.
	ForeignNotJournaled = "not-journaled"
	// ForeignUnsettled: it carries the nonce of a journaled create-snapshot
	// call whose answer is not journaled yet; rerunning that operation
	// settles it (and journals its UID).
	ForeignUnsettled = "unsettled"
	// ForeignEdited: keyledger created it, but its metadata no longer has
	// the snapshot format (someone edited it).
	ForeignEdited = "edited"
)

// Foreign is an object that claims to be history of a live Secret (its name
// is a snapshot slot of the live UID, or a label or annotation names the
// UID) but that the journal does not prove keyledger created. It is never
// pruned, restored, counted or listed as a version; `history` reports it.
type Foreign struct {
	Name string `json:"name"`
	// Version is the slot the name occupies, 0 when the name is no slot.
	Version int64  `json:"version,omitempty"`
	Reason  string `json:"reason"`
}

// provenance is what the journal proves about the snapshots of one live
// UID: which snapshot UIDs keyledger's creates answered with (or its
// resolutions found), and which nonces its create-snapshot calls carried
// (by digest: the journal holds only the nonce's SHA-256, so reading it does
// not let anyone write an object that passes for a call's).
type provenance struct {
	uids   map[types.UID]string // snapshot UID -> the slot name it was created in
	nonces map[string]string    // nonce digest -> the slot name of the call that carried it
}

func newProvenance() provenance {
	return provenance{uids: map[types.UID]string{}, nonces: map[string]string{}}
}

// add folds one operation's records: a create-snapshot call bound to
// liveUID (its UID precondition) makes its target a slot of that UID and its
// nonce known; an applied result, or an ours resolution, of a call on such
// a target journals the snapshot's UID.
func (p provenance) add(records []store.Record, liveUID types.UID) error {
	bound := map[store.Target]bool{}
	for _, r := range records {
		if r.Step != StepCreateSnapshot {
			continue
		}
		slot := r.Target.Name
		switch r.Kind {
		case store.RecordAuthorityCall:
			if r.UID != string(liveUID) || liveUID == "" {
				continue
			}
			bound[r.Target] = true
			d, err := detailOf[snapshotDetail](r)
			if err != nil {
				return err
			}
			if digest := d.nonceDigest(); digest != "" {
				p.nonces[digest] = slot
			}
		case store.RecordAuthorityResult:
			if bound[r.Target] && workflow.Settles(r) && r.UID != "" {
				p.uids[types.UID(r.UID)] = slot
			}
		case store.RecordResolution:
			if bound[r.Target] && workflow.Settles(r) && r.UID != "" {
				p.uids[types.UID(r.UID)] = slot
			}
		}
	}
	return nil
}

// journaled reports whether the journal holds m's UID as created in the
// slot m occupies.
func (p provenance) journaled(m *metav1.ObjectMeta) bool {
	slot, ok := p.uids[m.UID]
	return ok && slot == m.Name && m.UID != ""
}

// carriesNonce reports whether m carries the nonce of a journaled
// create-snapshot call on the slot m occupies.
func (p provenance) carriesNonce(m *metav1.ObjectMeta) bool {
	nonce := m.Annotations[AnnotationNonce]
	if nonce == "" {
		return false
	}
	slot, ok := p.nonces[nonceDigest(nonce)]
	return ok && slot == m.Name
}

// nonceDigest is what the journal holds of a snapshot nonce.
func nonceDigest(nonce string) string {
	sum := sha256.Sum256([]byte(nonce))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// provenSlot reports whether the journal holds a snapshot UID created in
// the slot name.
func (p provenance) provenSlot(name string) bool {
	for _, slot := range p.uids {
		if slot == name {
			return true
		}
	}
	return false
}

// owns reports whether keyledger made m: its UID is journaled, or it
// carries a journaled call's nonce (the answer of that call was lost).
func (p provenance) owns(m *metav1.ObjectMeta) bool { return p.journaled(m) || p.carriesNonce(m) }

// provenance reads what the journal proves about the snapshots of
// liveUID named names (the objects a listing returned, or the one slot a
// decision looks at): the create-snapshot records on those names of every
// operation on this Secret, and this run's own records (which may be newer
// than what the query saw). What it proves of a name is what the whole
// journal proves of it: a name's records are all on its target, and the
// call that binds them to liveUID is on the same target.
func (f *family) provenance(ctx context.Context, run *workflow.Run, liveUID types.UID, names []string) (provenance, error) {
	journal, err := f.journalProvenance(ctx, liveUID, names)
	if err != nil {
		return newProvenance(), err
	}
	return provenanceOf(journal, run, liveUID)
}

// journalProvenance reads the create-snapshot records on names of every
// operation on this Secret bound to liveUID: what it reads is bounded by
// the names, never by the Secret's history.
func (f *family) journalProvenance(ctx context.Context, liveUID types.UID, names []string) ([][]store.Record, error) {
	if f.journal == nil {
		return nil, nil
	}
	targets := make([]string, 0, len(names))
	for _, n := range names {
		targets = append(targets, f.secretTarget(n).String())
	}
	groups, err := f.journal.StepRecords(ctx, store.StepRecordsParams{
		Namespace: f.cmd.Namespace, Name: f.cmd.Name, Step: StepCreateSnapshot, CallUID: string(liveUID), Targets: targets,
	})
	if err != nil {
		return nil, &workflow.Unavailable{Dependency: "postgresql", Err: err}
	}
	return groups, nil
}

// listedNames are the names of a listing's objects.
func listedNames(metas []metav1.PartialObjectMetadata) []string {
	names := make([]string, 0, len(metas))
	for i := range metas {
		names = append(names, metas[i].Name)
	}
	return names
}

// provenanceOf folds the journal's records and run's own.
func provenanceOf(journal [][]store.Record, run *workflow.Run, liveUID types.UID) (provenance, error) {
	p := newProvenance()
	for _, g := range journal {
		if err := p.add(g, liveUID); err != nil {
			return p, err
		}
	}
	if run != nil {
		if err := p.add(run.Records, liveUID); err != nil {
			return p, err
		}
	}
	return p, nil
}

// inventory is the history of one live UID as the API server and the
// journal show it together.
type inventory struct {
	// genuine are the snapshots keyledger created (UID journaled) whose
	// metadata still has the snapshot format, by version.
	genuine []Snapshot
	// foreign is everything else that claims to be history of the UID, by
	// name.
	foreign []Foreign
}

// byVersion returns the genuine snapshot of version n.
func (inv *inventory) byVersion(n int64) (Snapshot, bool) {
	for _, s := range inv.genuine {
		if s.Version == n {
			return s, true
		}
	}
	return Snapshot{}, false
}

// foreignAt returns the foreign object in the slot of version n.
func (inv *inventory) foreignAt(n int64) (Foreign, bool) {
	for _, o := range inv.foreign {
		if o.Version == n {
			return o, true
		}
	}
	return Foreign{}, false
}

// classify sorts the Secrets of a namespace (metadata only) into the
// genuine and foreign history of live.
func classify(metas []metav1.PartialObjectMetadata, live *corev1.Secret, p provenance) inventory {
	var inv inventory
	uid := live.UID
	for i := range metas {
		m := &metas[i].ObjectMeta
		version := slotVersion(m.Name, uid)
		if !claims(m, uid) {
			continue
		}
		switch {
		case p.journaled(m):
			if s, ok := checkMeta(m, uid, live.Name); ok {
				inv.genuine = append(inv.genuine, s)
				continue
			}
			inv.foreign = append(inv.foreign, Foreign{Name: m.Name, Version: version, Reason: ForeignEdited})
		case p.carriesNonce(m):
			inv.foreign = append(inv.foreign, Foreign{Name: m.Name, Version: version, Reason: ForeignUnsettled})
		default:
			inv.foreign = append(inv.foreign, Foreign{Name: m.Name, Version: version, Reason: ForeignNotJournaled})
		}
	}
	sort.Slice(inv.genuine, func(i, j int) bool { return inv.genuine[i].Version < inv.genuine[j].Version })
	sort.Slice(inv.foreign, func(i, j int) bool { return inv.foreign[i].Name < inv.foreign[j].Name })
	return inv
}

// readInventory lists the namespace's Secrets (metadata only), then reads
// the journal. The order matters: a create-snapshot call is journaled
// before it is sent, so any object a concurrent keyledger run created
// before the list carries a nonce the journal already holds.
func readInventory(ctx context.Context, f *family, run *workflow.Run, live *corev1.Secret) (inventory, error) {
	metas, err := listClaims(ctx, f, live)
	if err != nil {
		return inventory{}, err
	}
	p, err := f.provenance(ctx, run, live.UID, listedNames(metas))
	if err != nil {
		return inventory{}, err
	}
	return classify(metas, live, p), nil
}

// listClaims lists the metadata of the Secrets that claim live's UID.
func listClaims(ctx context.Context, f *family, live *corev1.Secret) ([]metav1.PartialObjectMetadata, error) {
	metas, err := f.api.ListClaims(ctx, claimant(live.UID), MaxHistoryClaims)
	if tooMany := (*kube.TooManyClaimsError)(nil); errors.As(err, &tooMany) {
		return nil, &historyTooLarge{count: tooMany.Count, max: tooMany.Max}
	}
	if err != nil {
		return nil, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	return metas, nil
}

// newNonce is 128 random bits, hex.
func newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
