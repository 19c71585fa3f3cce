package versioned

import (
	"bytes"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// snapshotOf builds the snapshot of live, which is at version n: an
// immutable Opaque Secret holding a byte-for-byte copy of live's data and
// exactly the labels and annotations of the uid-rv-v1 format. live's
// labels, annotations, ownerReferences, finalizers and managed fields are
// not copied. at and actor come from the operation, so every retry of it
// builds the same object.
func snapshotOf(live *corev1.Secret, n int64, at time.Time, actor string) *corev1.Secret {
	immutable := true
	data := make(map[string][]byte, len(live.Data))
	for k, v := range live.Data {
		data[k] = bytes.Clone(v)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      SnapshotName(live.UID, n),
			Namespace: live.Namespace,
			Labels: map[string]string{
				LabelManagedBy:             ManagedBy,
				LabelKind:                  KindHistory,
				LabelSourceUID:             Hash(string(live.UID)),
				LabelSourceResourceVersion: Hash(live.ResourceVersion),
			},
			Annotations: map[string]string{
				AnnotationFormat:                FormatUIDRV,
				AnnotationSourceUID:             string(live.UID),
				AnnotationSourceResourceVersion: live.ResourceVersion,
				AnnotationSourceName:            live.Name,
				AnnotationSourceType:            string(live.Type),
				AnnotationVersion:               strconv.FormatInt(n, 10),
				AnnotationSnapshotTime:          at.UTC().Format(time.RFC3339),
				AnnotationActor:                 actor,
			},
		},
		Type:      corev1.SecretTypeOpaque,
		Immutable: &immutable,
		Data:      data,
	}
}

// snapshotAnnotations is the exact annotation set of a uid-rv-v1 snapshot,
// beside AnnotationNonce (present on every snapshot written since it exists).
var snapshotAnnotations = []string{
	AnnotationFormat, AnnotationSourceUID, AnnotationSourceResourceVersion, AnnotationSourceName,
	AnnotationSourceType, AnnotationVersion, AnnotationSnapshotTime, AnnotationActor,
}

// identityAnnotations are the annotations that say which state a snapshot
// holds; the snapshot time and actor say who took it.
var identityAnnotations = []string{
	AnnotationFormat, AnnotationSourceUID, AnnotationSourceResourceVersion, AnnotationSourceName,
	AnnotationSourceType, AnnotationVersion,
}

// Snapshot is a validated snapshot's identity, from its metadata.
type Snapshot struct {
	Name            string
	UID             types.UID
	ResourceVersion string
	// Version is the archived version; SourceResourceVersion the live
	// object's resourceVersion it was taken from.
	Version               int64
	SourceResourceVersion string
	SourceType            string
	SnapshotTime          string
	Actor                 string
	// Terminating is true when the snapshot has a deletionTimestamp.
	Terminating bool
	// Finalizers counts the snapshot's finalizers (keyledger sets none).
	Finalizers int
}

// checkMeta validates a snapshot's metadata (as listed without data, or as
// read) against the live object uid/name it must belong to. Every label and
// annotation is checked: a matching label hash or name never proves
// identity. ok is false for anything else, including snapshots in another
// format or of another UID, which are left alone and never used.
func checkMeta(m *metav1.ObjectMeta, uid types.UID, liveName string) (Snapshot, bool) {
	a := m.Annotations
	want := len(snapshotAnnotations)
	if nonce, ok := a[AnnotationNonce]; ok {
		if nonce == "" {
			return Snapshot{}, false
		}
		want++
	}
	if len(a) != want || len(m.Labels) != 4 || len(m.OwnerReferences) != 0 {
		return Snapshot{}, false
	}
	for _, k := range snapshotAnnotations {
		if _, ok := a[k]; !ok {
			return Snapshot{}, false
		}
	}
	rv := a[AnnotationSourceResourceVersion]
	switch {
	case a[AnnotationFormat] != FormatUIDRV,
		a[AnnotationSourceUID] != string(uid), uid == "",
		a[AnnotationSourceName] != liveName,
		rv == "", a[AnnotationSourceType] == "", a[AnnotationActor] == "",
		m.Labels[LabelManagedBy] != ManagedBy,
		m.Labels[LabelKind] != KindHistory,
		m.Labels[LabelSourceUID] != Hash(string(uid)),
		m.Labels[LabelSourceResourceVersion] != Hash(rv):
		return Snapshot{}, false
	}
	n, err := parseCanonical(a[AnnotationVersion], MaxVersion)
	if err != nil || m.Name != SnapshotName(uid, n) {
		return Snapshot{}, false
	}
	if _, err := time.Parse(time.RFC3339, a[AnnotationSnapshotTime]); err != nil {
		return Snapshot{}, false
	}
	return Snapshot{
		Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion, Version: n, SourceResourceVersion: rv,
		SourceType: a[AnnotationSourceType], SnapshotTime: a[AnnotationSnapshotTime], Actor: a[AnnotationActor],
		Terminating: m.DeletionTimestamp != nil, Finalizers: len(m.Finalizers),
	}, true
}

// checkSnapshot validates a full snapshot object: its metadata, and that it
// is an immutable Opaque Secret.
func checkSnapshot(s *corev1.Secret, uid types.UID, liveName string) (Snapshot, bool) {
	meta, ok := checkMeta(&s.ObjectMeta, uid, liveName)
	if !ok || s.Type != corev1.SecretTypeOpaque || s.Immutable == nil || !*s.Immutable || len(s.StringData) != 0 {
		return Snapshot{}, false
	}
	return meta, true
}

// sameSource reports whether occupant, found in want's slot, holds exactly
// the state want archives: a valid snapshot whose identity annotations and
// labels equal want's, immutable, Opaque, with byte-identical data. Only
// the snapshot time and actor may differ (another operation archiving the
// same source state).
func sameSource(occupant, want *corev1.Secret) bool {
	uid := types.UID(want.Annotations[AnnotationSourceUID])
	if occupant.Name != want.Name {
		return false
	}
	if _, ok := checkSnapshot(occupant, uid, want.Annotations[AnnotationSourceName]); !ok {
		return false
	}
	for _, k := range identityAnnotations {
		if occupant.Annotations[k] != want.Annotations[k] {
			return false
		}
	}
	for k, v := range want.Labels {
		if occupant.Labels[k] != v {
			return false
		}
	}
	return sameData(occupant.Data, want.Data)
}

// sameData compares two data maps byte for byte.
func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}
