package versioned

import (
	"fmt"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
)

// The records a versioned write journals, one type a detail (and one for
// every summary): their JSON form is the journal's schema. The family
// decides from these types, never from a key read out of a detail;
// TestRecordsReadTodaysJournal reads the details journaled before they
// were typed. A field written by some records of a kind and not others is
// a pointer (or omitted when empty), so that each record says exactly
// what it said before.

// preparationDetail is the preparation record's detail: key names and
// versions, never values.
type preparationDetail struct {
	ExpectedResourceVersion string `json:"expectedResourceVersion"`
	*UpdateKeys                    // SecretUpdate
	Version                 *int64 `json:"version,omitempty"`     // SecretRestore
	KeepHistory             *bool  `json:"keepHistory,omitempty"` // SecretDelete
}

// UpdateKeys is what a SecretUpdate's preparation names: the keys it
// writes and the keys it removes (exported only so that encoding/json can
// decode it embedded).
type UpdateKeys struct {
	Keys       []string `json:"keys"`
	RemoveKeys []string `json:"removeKeys"`
}

// liveReadDetail is a read-live observation: how many keys, the type, the
// version counter (when it parses) and whether it is being deleted.
type liveReadDetail struct {
	Keys        int    `json:"keys"`
	Type        string `json:"type"`
	Version     *int64 `json:"version,omitempty"`
	Terminating bool   `json:"terminating,omitempty"`
}

// liveWriteDetail is a create-live or replace-live call's detail: the
// version written and how many keys.
type liveWriteDetail struct {
	Version int64 `json:"version"`
	Keys    int   `json:"keys"`
}

// snapshotDetail is a create-snapshot call's detail: the version archived,
// how many keys, and the digest of the nonce the snapshot carries (a
// record of an older keyledger holds the nonce itself).
type snapshotDetail struct {
	Version     int64  `json:"version"`
	Keys        int    `json:"keys"`
	NonceDigest string `json:"nonceDigest,omitempty"`
	Nonce       string `json:"nonce,omitempty"`
}

// nonceDigest is the digest of the nonce the call's snapshot carries.
func (d snapshotDetail) nonceDigest() string {
	switch {
	case d.NonceDigest != "":
		return d.NonceDigest
	case d.Nonce != "":
		return nonceDigest(d.Nonce)
	}
	return ""
}

// versionDetail is the version a call names (create-live, replace-live,
// create-snapshot, prune-snapshot, delete-snapshot all name one).
type versionDetail struct {
	Version int64 `json:"version"`
}

// deleteSnapshotDetail is a prune-snapshot or delete-snapshot call's
// detail: the snapshot's version and the history limit in force.
type deleteSnapshotDetail struct {
	Version      int64 `json:"version"`
	HistoryLimit int   `json:"historyLimit"`
}

// deleteLiveDetail is a delete-live call's detail.
type deleteLiveDetail struct {
	KeepHistory bool `json:"keepHistory"`
}

// deletionDetail is what a delete's applied answer or its resolution says
// of the object: deleted, pending (still there, being deleted), or failed
// (a cleanup delete the API server refused, deletionFailed).
type deletionDetail struct {
	Deletion kube.Deletion `json:"deletion"`
}

// deletionFailed is a cleanup delete's answer when the API server
// definitely refused it (403, 422: an admission policy, RBAC): the
// snapshot stays. The answer is journaled as applied with this detail,
// its HTTP status and reason, so that the cleanup goes on with the next
// snapshot and ends uncertain with its counts (see cleanup); a rerun sends
// the delete again.
const deletionFailed kube.Deletion = "failed"

// reusedDetail is the resolution of a snapshot create that found its
// snapshot in place: whether another actor's run made it.
type reusedDetail struct {
	Reused bool `json:"reused"`
}

// secretRef names the live Secret in a summary (its UID when there is one).
type secretRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// summaryDetail is the content-free description printed on stdout and
// stored in the completion or refusal record: identity, versions, names
// and counts. Secret is always there; every other field only where a
// decision states it.
type summaryDetail struct {
	Secret             secretRef `json:"secret"`
	Version            *int64    `json:"version,omitempty"`
	Snapshot           *string   `json:"snapshot,omitempty"`
	SnapshotVersion    *int64    `json:"snapshotVersion,omitempty"`
	RestoredVersion    *int64    `json:"restoredVersion,omitempty"`
	DroppedAnnotations []string  `json:"droppedAnnotations,omitempty"`
	History            string    `json:"history,omitempty"`
	RecreatedUID       string    `json:"recreatedUID,omitempty"`
	Finalizers         *int      `json:"finalizers,omitempty"`
	HistoryClaims      *int      `json:"historyClaims,omitempty"`
	MaxHistoryClaims   *int      `json:"maxHistoryClaims,omitempty"`
	LiveVersion        *int64    `json:"liveVersion,omitempty"`
	NewestVersion      *int64    `json:"newestVersion,omitempty"`
	Occupied           *[]string `json:"occupied,omitempty"`
	OccupiedCount      *int      `json:"occupiedCount,omitempty"`
	HighestOccupied    *int64    `json:"highestOccupied,omitempty"`
}

// purgedDetail is what a delete without history adds to its summaries:
// the versions whose snapshots its purge deleted (oldest first; empty
// when none).
type purgedDetail struct {
	PurgedVersions []int64 `json:"purgedVersions"`
}

// detailOf reads r's detail into its record type T.
func detailOf[T any](r store.Record) (T, error) {
	v, err := store.DecodeDetail[T](r.Detail)
	if err != nil {
		return v, fmt.Errorf("reading the %s record of %s %s: %w", r.Kind, r.Step, r.Target, err)
	}
	return v, nil
}
