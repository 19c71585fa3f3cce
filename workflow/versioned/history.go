package versioned

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow"
)

// History is the retained history of one live Secret: only snapshots of
// its current UID that pass full validation. It never holds values.
type History struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	// Version is the live Secret's current version.
	Version  int64          `json:"version"`
	Versions []HistoryEntry `json:"versions"`
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
// for, its digest ("sha256:<hex>" of the raw bytes).
type KeyInfo struct {
	Name   string `json:"name"`
	Size   int    `json:"size"`
	Digest string `json:"digest,omitempty"`
}

// HistoryOptions select what ReadHistory returns.
type HistoryOptions struct {
	// Version, when not 0, keeps only that version.
	Version int64
	// ShowKeys adds each value's digest (requires Version).
	ShowKeys bool
}

// ReadHistory reads the live Secret namespace/name and its valid
// snapshots. An absent live Secret is *workflow.Refused (secret-absent);
// an absent Version is *workflow.Refused (version-absent).
func ReadHistory(ctx context.Context, client kube.Interface, namespace, name string, o HistoryOptions) (*History, error) {
	api := kube.NewVersionedSecrets(client, namespace, name)
	live, err := api.GetLive(ctx)
	if err != nil {
		if kube.Classify(err).Reason == "not-found" {
			return nil, &workflow.Refused{Reason: ReasonSecretAbsent}
		}
		return nil, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	current, err := CurrentVersion(live.Annotations[AnnotationVersion], hasKey(live.Annotations, AnnotationVersion))
	if err != nil {
		return nil, &workflow.Refused{Reason: err.Error()}
	}
	list, err := api.ListSnapshots(ctx, SnapshotSelector(live.UID))
	if err != nil {
		return nil, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	h := &History{Namespace: namespace, Name: name, UID: live.UID, Version: current, Versions: []HistoryEntry{}}
	for i := range list {
		s := &list[i]
		meta, ok := checkSnapshot(s, live.UID, live.Name)
		if !ok || (o.Version != 0 && meta.Version != o.Version) {
			continue
		}
		e := HistoryEntry{
			Version: meta.Version, Snapshot: meta.Name, SnapshotTime: meta.SnapshotTime, Actor: meta.Actor,
			SourceResourceVersion: meta.SourceResourceVersion, SourceType: meta.SourceType, Terminating: meta.Terminating,
			Keys: []KeyInfo{},
		}
		for k, v := range s.Data {
			ki := KeyInfo{Name: k, Size: len(v)}
			if o.ShowKeys {
				ki.Digest = ValueDigest(v)
			}
			e.Keys = append(e.Keys, ki)
			e.Size += int64(len(v))
		}
		sort.Slice(e.Keys, func(i, j int) bool { return e.Keys[i].Name < e.Keys[j].Name })
		h.Versions = append(h.Versions, e)
	}
	sort.Slice(h.Versions, func(i, j int) bool { return h.Versions[i].Version < h.Versions[j].Version })
	if o.Version != 0 && len(h.Versions) == 0 {
		return nil, &workflow.Refused{Reason: ReasonVersionAbsent}
	}
	return h, nil
}

// ValueDigest is "sha256:<hex>" of a value's raw bytes, printed only by
// `keyledger history --version N --show-keys`, so an operator can compare a
// retained value with one they hold without printing either.
func ValueDigest(v []byte) string {
	sum := sha256.Sum256(v)
	return "sha256:" + hex.EncodeToString(sum[:])
}
