package versioned

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/kube"
)

// The metadata keyledger writes. The live Secret carries only
// AnnotationVersion; a snapshot carries every label and annotation below and
// nothing else.
const (
	// AnnotationVersion is the live Secret's version counter, and on a
	// snapshot the version it archives.
	AnnotationVersion = "keyledger.dev/version"

	// LabelManagedBy marks objects keyledger manages; its value is ManagedBy.
	LabelManagedBy = "keyledger.dev/managed-by"
	ManagedBy      = "keyledger"
	// LabelKind says what the object is; a snapshot's is KindHistory.
	LabelKind   = "keyledger.dev/kind"
	KindHistory = "history"
	// LabelSourceUID is Hash(source UID): lists select on it. A label value
	// proves nothing; every listed object is validated in full.
	LabelSourceUID = "keyledger.dev/source-uid"
	// LabelSourceResourceVersion is Hash(source resourceVersion).
	LabelSourceResourceVersion = "keyledger.dev/source-resource-version"

	// AnnotationFormat names the snapshot format; only FormatUIDRV is used.
	AnnotationFormat = "keyledger.dev/history-format"
	FormatUIDRV      = "uid-rv-v1"
	// AnnotationSourceUID is the live object's full UID.
	AnnotationSourceUID = "keyledger.dev/source-uid"
	// AnnotationSourceResourceVersion is the live object's full resourceVersion.
	AnnotationSourceResourceVersion = "keyledger.dev/source-resource-version"
	// AnnotationSourceName is the live Secret's name (never in a label).
	AnnotationSourceName = "keyledger.dev/source-name"
	// AnnotationSourceType is the live Secret's type (the snapshot is Opaque).
	AnnotationSourceType = "keyledger.dev/source-type"
	// AnnotationSnapshotTime is when the operation that took the snapshot
	// was prepared (RFC 3339, UTC): every retry computes the same bytes.
	AnnotationSnapshotTime = "keyledger.dev/snapshot-time"
	// AnnotationActor is "<requestId>/<mutationId>" of that operation.
	AnnotationActor = "keyledger.dev/actor"
	// AnnotationNonce is a random value (128 bits, hex) made for one
	// create-snapshot call and journaled in that call's record before the
	// create is sent: it proves an occupant was made by that call when the
	// answer (and so the snapshot's UID) was lost. Snapshots written before
	// it existed lack it; their UID is journaled.
	AnnotationNonce = "keyledger.dev/nonce"

	// AnnotationLastApplied is kubectl's copy of the last applied object,
	// values included: a keyledger write drops it from the live Secret, and
	// snapshots never copy it.
	AnnotationLastApplied = "kubectl.kubernetes.io/last-applied-configuration"
)

// MaxVersion is the largest version a counter may hold. It keeps snapshot
// names within MaxSnapshotName characters: 12 + 32 + 2 + 14 = 60.
const MaxVersion int64 = 99_999_999_999_999

// MaxSnapshotName is the longest snapshot name SnapshotName returns.
const MaxSnapshotName = 60

// hashLen is how many hex digits of sha256 names and labels carry.
const hashLen = 32

// Hash returns the first 32 hex digits of sha256(s): the form a UID or
// resourceVersion takes in snapshot names and label values.
func Hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:hashLen]
}

// SnapshotName is the name of the snapshot slot for version n of the live
// object with uid: keyledger-h-<Hash(uid)>-v<n>, at most 60 characters
// whatever the live name (which is never part of it).
func SnapshotName(uid types.UID, n int64) string {
	return kube.SnapshotPrefix + Hash(string(uid)) + "-v" + strconv.FormatInt(n, 10)
}

// slotPrefix starts the name of every snapshot slot of uid.
func slotPrefix(uid types.UID) string {
	return kube.SnapshotPrefix + Hash(string(uid)) + "-v"
}

// slotVersion is the version whose slot name is, or 0 when name is no slot
// of uid.
func slotVersion(name string, uid types.UID) int64 {
	rest, ok := strings.CutPrefix(name, slotPrefix(uid))
	if !ok {
		return 0
	}
	n, err := parseCanonical(rest, MaxVersion)
	if err != nil {
		return 0
	}
	return n
}

// SnapshotSelector selects the snapshots whose LabelSourceUID is Hash(uid).
func SnapshotSelector(uid types.UID) string {
	return LabelKind + "=" + KindHistory + "," + LabelSourceUID + "=" + Hash(string(uid))
}
