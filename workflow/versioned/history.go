package versioned

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow"
)

// History is the retained history of one live Secret: only snapshots of
// its current UID that keyledger provably created (their UID journaled by
// its create). It never holds values. Anything else that claims to be its
// history is listed in Foreign, by name, and left alone.
type History struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	// Version is the live Secret's current version.
	Version  int64          `json:"version"`
	Versions []HistoryEntry `json:"versions"`
	// Live describes the live Secret's values (with ShowKeys only), so
	// that a retained version can be compared with the current one.
	Live []KeyInfo `json:"live,omitempty"`
	// Foreign are look-alikes: never versions, never pruned or restored.
	Foreign []Foreign `json:"foreign"`
}

// HistoryEntry is one retained version.
type HistoryEntry struct {
	Version               int64  `json:"version"`
	Snapshot              string `json:"snapshot"`
	SnapshotTime          string `json:"snapshotTime"`
	Actor                 string `json:"actor"`
	SourceResourceVersion string `json:"sourceResourceVersion"`
	SourceType            string `json:"sourceType"`
	// Size is the sum of the values' raw sizes in bytes.
	Size        int64     `json:"size"`
	Keys        []KeyInfo `json:"keys"`
	Terminating bool      `json:"terminating,omitempty"`
}

// KeyInfo describes one value: its key, raw size and, only when asked
// for, a digest keyed for this one reading (see HistoryOptions.ShowKeys).
type KeyInfo struct {
	Name   string `json:"name"`
	Size   int    `json:"size"`
	Digest string `json:"digest,omitempty"`
}

// HistoryOptions select what ReadHistory returns.
type HistoryOptions struct {
	// Version, when not 0, keeps only that version.
	Version int64
	// ShowKeys adds each value's digest, and the live Secret's keys: equal
	// digests within one reading mean equal values. The digest is
	// HMAC-SHA256 under a key drawn at random for this reading and never
	// shown, so it cannot be tested offline against a guessed value, nor
	// compared across readings.
	ShowKeys bool
}

// ReadHistory reads the live Secret namespace/name, the metadata of every
// Secret in the namespace and the journal, then the data of the genuine
// snapshots only (for key names and sizes). An absent live Secret is
// *workflow.Refused (secret-absent); an absent Version is *workflow.Refused
// (version-absent), or foreign-snapshot when a look-alike holds its slot.
func ReadHistory(ctx context.Context, client kube.Interface, journal workflow.JournalReader, namespace, name string, o HistoryOptions) (*History, error) {
	f := &family{cmd: &Command{Namespace: namespace, Name: name}, api: kube.NewVersionedSecrets(client, namespace, name), journal: journal}
	live, current, err := readLiveVersion(ctx, f)
	if err != nil {
		return nil, err
	}
	inv, err := readInventory(ctx, f, nil, live)
	if tooLarge := (*historyTooLarge)(nil); errors.As(err, &tooLarge) {
		return nil, tooLarge.refused()
	}
	if err != nil {
		return nil, err
	}
	var digest func([]byte) string
	if o.ShowKeys {
		if digest, err = keyedDigest(); err != nil {
			return nil, err
		}
	}
	versions, err := readVersions(ctx, f, inv.genuine, o.Version, digest)
	if err != nil {
		return nil, err
	}
	if o.Version != 0 && len(versions) == 0 {
		return nil, versionAbsent(inv, o.Version)
	}
	h := &History{Namespace: namespace, Name: name, UID: live.UID, Version: current, Versions: versions, Foreign: inv.foreign}
	if h.Foreign == nil {
		h.Foreign = []Foreign{}
	}
	if o.ShowKeys {
		h.Live = keyInfos(live.Data, digest)
	}
	return h, nil
}

// readLiveVersion reads the live Secret and its current version: absent is
// refused (secret-absent), as is a version annotation that is not one.
func readLiveVersion(ctx context.Context, f *family) (*corev1.Secret, int64, error) {
	live, err := f.api.GetLive(ctx)
	if err != nil {
		if errors.Is(err, kube.ReasonNotFound) {
			return nil, 0, &workflow.Refused{Reason: ReasonSecretAbsent}
		}
		return nil, 0, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	current, err := CurrentVersion(live.Annotations[AnnotationVersion], hasKey(live.Annotations, AnnotationVersion))
	if err != nil {
		return nil, 0, &workflow.Refused{Reason: err.Error()}
	}
	return live, current, nil
}

// readVersions reads the data of the genuine snapshots (of version only,
// when not 0) and describes each as a HistoryEntry, never holding a value;
// a snapshot gone since the list, or its slot taken by another object,
// is left out.
func readVersions(ctx context.Context, f *family, genuine []Snapshot, version int64, digest func([]byte) string) ([]HistoryEntry, error) {
	versions := []HistoryEntry{}
	for _, meta := range genuine {
		if version != 0 && meta.Version != version {
			continue
		}
		s, err := f.api.GetSnapshot(ctx, meta.Name)
		if err != nil {
			if errors.Is(err, kube.ReasonNotFound) {
				continue // deleted since the list
			}
			return nil, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
		}
		if s.UID != meta.UID {
			continue // another object took the slot since the list
		}
		versions = append(versions, historyEntry(meta, s, digest))
	}
	return versions, nil
}

// historyEntry describes the genuine snapshot s (listed as meta): its
// metadata, and each value's key, size and (with digest) keyed digest.
func historyEntry(meta Snapshot, s *corev1.Secret, digest func([]byte) string) HistoryEntry {
	e := HistoryEntry{
		Version: meta.Version, Snapshot: meta.Name, SnapshotTime: meta.SnapshotTime, Actor: meta.Actor,
		SourceResourceVersion: meta.SourceResourceVersion, SourceType: meta.SourceType, Terminating: s.DeletionTimestamp != nil,
		Keys: keyInfos(s.Data, digest),
	}
	for _, k := range e.Keys {
		e.Size += int64(k.Size)
	}
	return e
}

// versionAbsent refuses a version the history does not hold:
// foreign-snapshot when a look-alike holds its slot, version-absent
// otherwise.
func versionAbsent(inv inventory, version int64) error {
	if _, planted := inv.foreignAt(version); planted {
		return &workflow.Refused{Reason: ReasonForeignSnapshot}
	}
	return &workflow.Refused{Reason: ReasonVersionAbsent}
}

func keyInfos(data map[string][]byte, digest func([]byte) string) []KeyInfo {
	out := make([]KeyInfo, 0, len(data))
	for k, v := range data {
		ki := KeyInfo{Name: k, Size: len(v)}
		if digest != nil {
			ki.Digest = digest(v)
		}
		out = append(out, ki)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// keyedDigest returns "hmac-sha256:<hex>" of a value under a 256-bit key
// drawn for this call alone and then forgotten.
func keyedDigest() (func([]byte) string, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	return func(v []byte) string {
		m := hmac.New(sha256.New, key)
		m.Write(v)
		return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
	}, nil
}
