package versioned

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	ReasonPruneBlocked        = "prune-blocked"
	ReasonHistoryPending      = "history-pending"
	ReasonResultMismatch      = "result-mismatch"
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
	f := &family{cmd: cmd, limit: limit, api: kube.NewVersionedSecrets(client, cmd.Namespace, cmd.Name)}
	detail := map[string]any{"expectedResourceVersion": cmd.ExpectedResourceVersion}
	switch cmd.Kind {
	case command.KindSecretUpdate:
		detail["keys"] = sortedKeys(cmd.Data)
		detail["removeKeys"] = cmd.RemoveKeys
	case command.KindSecretRestore:
		detail["version"] = cmd.Version
	case command.KindSecretDelete:
		detail["keepHistory"] = cmd.KeepHistory
	}
	return workflow.Plan{
		Prepare: store.PrepareParams{
			Kind: cmd.Kind, MutationID: cmd.Metadata.MutationID, RequestID: cmd.Metadata.RequestID,
			CommandDigest: cmd.Digest, Namespace: cmd.Namespace, Name: cmd.Name, Detail: detail,
		},
		Access: AccessMatrix(cmd.Namespace, cmd.Name),
		// A rules review proves that update reaches no other Secret, whatever
		// its name, and that nothing else (patch, watch, deletecollection) is
		// granted on Secrets.
		SecretRights: &kube.SecretRights{
			Namespace: cmd.Namespace, Names: []string{cmd.Name}, Verbs: []string{"update"},
			NamespaceWide: []string{"get", "list", "create", "delete"},
		},
		Precheck: f.precheck,
		Family:   f,
	}
}

// AccessMatrix is what an identity running versioned writes must and must
// not be allowed in the namespace. Snapshot names are derived from the live
// UID and version, so get, create and delete cannot be narrowed by
// resourceNames, and list never can: the family needs namespace-wide get,
// list, create and delete on secrets. update stays bound to the live name
// (snapshots are never updated), and patch, watch and deletecollection are
// denied. The Role:
//
//	rules:
//	- apiGroups: [""]
//	  resources: ["secrets"]
//	  verbs: ["get", "list", "create", "delete"]
//	- apiGroups: [""]
//	  resources: ["secrets"]
//	  resourceNames: ["<live name>"]
//	  verbs: ["update"]
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

// family implements workflow.Family for one versioned write. What it reads
// is kept for the rest of the process: every write it sends carries the UID
// and resourceVersion it was read at, so a stale memory can only make a
// write fail, never land on something else; resolution always re-reads.
type family struct {
	cmd   *Command
	limit int
	api   *kube.VersionedSecrets

	liveRead bool
	live     *corev1.Secret // nil when absent
	fresh    *store.Record  // observation of a read not yet journaled
	target   *corev1.Secret // restore: the validated target snapshot
	listed   bool
	listing  []Snapshot // valid snapshots of the live UID, by version
	empty    bool       // delete without history: an empty inventory was confirmed
}

func (f *family) liveTarget() string { return "secret/" + f.cmd.Name }

// readLive reads the live Secret once per process.
func (f *family) readLive(ctx context.Context) (*corev1.Secret, error) {
	if f.liveRead {
		return f.live, nil
	}
	s, err := f.api.GetLive(ctx)
	if err != nil {
		if kube.Classify(err).Reason != "not-found" {
			return nil, err
		}
		s = nil
	}
	f.liveRead, f.live = true, s
	if s != nil {
		obs := observation(s)
		f.fresh = &obs
	}
	return s, nil
}

// precheck runs before the journal is opened: the size guard refuses a
// write whose live Secret would exceed MaxSecretBytes (exit 64), so nothing
// is journaled or written for it.
func (f *family) precheck(ctx context.Context) error {
	if f.cmd.Kind == command.KindSecretDelete {
		return nil
	}
	live, err := f.readLive(ctx)
	if err != nil {
		return &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	var desired *corev1.Secret
	switch {
	case live == nil && f.cmd.Create():
		desired = f.created()
	case live == nil, live.ResourceVersion != f.cmd.ExpectedResourceVersion:
		return nil // refused, journaled, by Decide
	case f.cmd.Kind == command.KindSecretUpdate:
		desired = f.replacement(live, live.Data, 1)
	default:
		target, _, err := f.loadTarget(ctx, live)
		if err != nil {
			return &workflow.Unavailable{Dependency: "kubernetes", Err: err}
		}
		if target == nil {
			return nil
		}
		desired = f.replacement(live, target.Data, 1)
	}
	if size := EstimateSize(desired); size > MaxSecretBytes {
		field := "spec.data"
		if f.cmd.Kind == command.KindSecretRestore {
			field = "spec.version"
		}
		return command.Invalid(field, fmt.Sprintf("the Secret would be about %d bytes (values x 4/3 plus metadata), over the %d-byte guard", size, MaxSecretBytes))
	}
	return nil
}

// Decide reads the durable facts and says what to do next.
func (f *family) Decide(ctx context.Context, run *workflow.Run) (workflow.Decision, error) {
	if f.cmd.Kind == command.KindSecretDelete {
		if _, ok := settled(run, StepDeleteLive, f.liveTarget()); ok {
			return f.confirmDeleted(ctx, run)
		}
	}
	live, err := f.readLive(ctx)
	if err != nil {
		return workflow.Decision{}, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	d, err := f.decide(ctx, run, live)
	if err != nil {
		return workflow.Decision{}, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	if f.fresh != nil && (d.Call != nil || d.Complete != nil || d.Refuse != nil) {
		switch {
		case d.Call != nil && d.Call.Observation == nil:
			d.Call.Observation = f.fresh
		case d.Complete != nil:
			d.Complete.Records = append([]store.Record{*f.fresh}, d.Complete.Records...)
		case d.Refuse != nil:
			d.Refuse.Records = append([]store.Record{*f.fresh}, d.Refuse.Records...)
		}
		f.fresh = nil
	}
	return d, nil
}

func (f *family) decide(ctx context.Context, run *workflow.Run, live *corev1.Secret) (workflow.Decision, error) {
	if live == nil {
		if f.cmd.Create() {
			return workflow.Decision{Call: f.createCall()}, nil
		}
		return f.refuse(ReasonSecretAbsent, nil), nil
	}
	if uid, ok := boundUID(run); ok && uid != string(live.UID) {
		return f.refuse(ReasonUIDChanged, live), nil
	}
	if f.cmd.Create() {
		if f.isCreated(live) {
			return f.complete(workflow.OutcomeExisting, live, map[string]any{"version": int64(1)}), nil
		}
		return f.refuse(ReasonAlreadyExists, live), nil
	}
	if live.ResourceVersion != f.cmd.ExpectedResourceVersion {
		if _, called := run.LastCall(); called {
			return f.refuse(ReasonChangedConcurrent, live), nil
		}
		if f.alreadyApplied(ctx, live) {
			return f.complete(workflow.OutcomeExisting, live, nil), nil
		}
		return f.refuse(ReasonStale, live), nil
	}
	switch {
	case live.DeletionTimestamp != nil:
		return f.refuse(ReasonTerminating, live), nil
	case live.Type == corev1.SecretTypeServiceAccountToken:
		return f.refuse(ReasonServiceAccountToken, live), nil
	}
	n, err := CurrentVersion(live.Annotations[AnnotationVersion], hasKey(live.Annotations, AnnotationVersion))
	if err != nil {
		return f.refuse(err.Error(), live), nil
	}
	immutable := live.Immutable != nil && *live.Immutable
	var base map[string][]byte
	switch f.cmd.Kind {
	case command.KindSecretUpdate:
		if immutable {
			return f.refuse(ReasonImmutable, live), nil
		}
		for _, k := range f.cmd.RemoveKeys {
			if _, ok := live.Data[k]; !ok {
				return f.refuse(ReasonKeyAbsent, live), nil
			}
		}
		base = live.Data
	case command.KindSecretRestore:
		target, reason, err := f.loadTarget(ctx, live)
		if err != nil {
			return f.refuse(ReasonSnapshotInvalid, live), nil
		}
		if target == nil {
			return f.refuse(reason, live), nil
		}
		if immutable {
			if sameData(live.Data, target.Data) {
				return f.complete(workflow.OutcomeExisting, live, map[string]any{"restoredVersion": f.cmd.Version}), nil
			}
			return f.refuse(ReasonImmutable, live), nil
		}
		base = target.Data
	}

	// 1. Archive the state being replaced (not for a delete without history).
	archive := f.cmd.Kind != command.KindSecretDelete || f.cmd.KeepHistory
	snap := snapshotOf(live, n, run.Op.CreatedAt, f.actor())
	if archive {
		if _, ok := settled(run, StepCreateSnapshot, "secret/"+snap.Name); !ok {
			return workflow.Decision{Call: f.snapshotCall(live, snap)}, nil
		}
	}
	// 2. Retention, or the whole history for a delete without history.
	listing, err := f.inventory(ctx, live)
	if err != nil {
		return workflow.Decision{}, err
	}
	if archive {
		protected := []int64{n}
		if f.cmd.Kind == command.KindSecretRestore {
			protected = append(protected, f.cmd.Version)
		}
		if d, done := f.prune(run, listing, protected); !done {
			return d, nil
		}
	} else {
		d, done, err := f.purge(ctx, run, live, listing)
		if err != nil || !done {
			return d, err
		}
	}
	// 3. The live write.
	if f.cmd.Kind == command.KindSecretDelete {
		return workflow.Decision{Call: f.deleteLiveCall(live)}, nil
	}
	return workflow.Decision{Call: f.replaceCall(live, base, n, snap.Name)}, nil
}

// prune deletes, oldest first and one at a time, the snapshots beyond the
// limit, never one in protected (the snapshot just taken, a restore's
// target). done is true when every one is confirmed absent; a snapshot
// still present (pending) blocks the live write.
func (f *family) prune(run *workflow.Run, listing []Snapshot, protected []int64) (workflow.Decision, bool) {
	excess := len(listing) - f.limit
	var c counts
	for _, s := range listing {
		if excess <= 0 {
			break
		}
		if slices.Contains(protected, s.Version) {
			continue
		}
		excess--
		rec, ok := settled(run, StepPruneSnapshot, "secret/"+s.Name)
		if !ok {
			return workflow.Decision{Call: f.deleteSnapshotCall(StepPruneSnapshot, s, c)}, false
		}
		c.add(rec)
	}
	if c.Pending > 0 {
		return f.refuseCounts(ReasonPruneBlocked, c), false
	}
	return workflow.Decision{}, true
}

// purge deletes every snapshot of the live UID, then confirms with a fresh
// list that none is left.
func (f *family) purge(ctx context.Context, run *workflow.Run, live *corev1.Secret, listing []Snapshot) (workflow.Decision, bool, error) {
	var c counts
	for _, s := range listing {
		rec, ok := settled(run, StepDeleteSnapshot, "secret/"+s.Name)
		if !ok {
			return workflow.Decision{Call: f.deleteSnapshotCall(StepDeleteSnapshot, s, c)}, false, nil
		}
		c.add(rec)
	}
	if !f.empty {
		metas, err := f.api.ListSnapshotMetadata(ctx, SnapshotSelector(live.UID))
		if err != nil {
			return workflow.Decision{}, false, err
		}
		left := 0
		for i := range metas {
			if _, ok := checkMeta(&metas[i].ObjectMeta, live.UID, live.Name); ok {
				left++
			}
		}
		if left > 0 {
			c.Remaining = left
			return f.refuseCounts(ReasonHistoryPending, c), false, nil
		}
		f.empty = true
	}
	return workflow.Decision{}, true, nil
}

// counts are what pruning or purging reports.
type counts struct {
	ConfirmedAbsent int `json:"confirmedAbsent"`
	Pending         int `json:"pending"`
	Failed          int `json:"failed"`
	Remaining       int `json:"remaining,omitempty"`
}

func (c *counts) add(rec store.Record) {
	if rec.Detail["deletion"] == string(kube.DeletionPending) {
		c.Pending++
	} else {
		c.ConfirmedAbsent++
	}
}

func (c counts) summary() map[string]any {
	out := map[string]any{"confirmedAbsent": c.ConfirmedAbsent, "pending": c.Pending, "failed": c.Failed}
	if c.Remaining > 0 {
		out["remaining"] = c.Remaining
	}
	return out
}

// inventory lists the valid snapshots of live's UID once per process,
// metadata only, sorted by version. Objects that fail validation (another
// format, another UID, edited metadata) are left alone and never used.
func (f *family) inventory(ctx context.Context, live *corev1.Secret) ([]Snapshot, error) {
	if f.listed {
		return f.listing, nil
	}
	metas, err := f.api.ListSnapshotMetadata(ctx, SnapshotSelector(live.UID))
	if err != nil {
		return nil, err
	}
	var out []Snapshot
	for i := range metas {
		if s, ok := checkMeta(&metas[i].ObjectMeta, live.UID, live.Name); ok {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	f.listed, f.listing = true, out
	return out, nil
}

// loadTarget reads and validates a restore's target snapshot. A nil target
// with a reason is a refusal; an error is a failed read.
func (f *family) loadTarget(ctx context.Context, live *corev1.Secret) (*corev1.Secret, string, error) {
	if f.target != nil && f.target.Annotations[AnnotationSourceUID] == string(live.UID) {
		return f.target, "", nil
	}
	s, err := f.api.GetSnapshot(ctx, SnapshotName(live.UID, f.cmd.Version))
	if err != nil {
		if kube.Classify(err).Reason == "not-found" {
			return nil, ReasonVersionAbsent, nil
		}
		return nil, "", err
	}
	meta, ok := checkSnapshot(s, live.UID, live.Name)
	if !ok || meta.Version != f.cmd.Version || meta.SourceType != string(live.Type) || meta.Terminating {
		return nil, ReasonSnapshotInvalid, nil
	}
	f.target = s
	return s, "", nil
}

// alreadyApplied reports whether live, found at another resourceVersion
// than the command expects, already holds this command's result: version
// M, the snapshot of M-1 taken from the expected resourceVersion, and the
// data the command writes over it. It settles a rerun whose journal was lost.
func (f *family) alreadyApplied(ctx context.Context, live *corev1.Secret) bool {
	if f.cmd.Kind == command.KindSecretDelete {
		return false
	}
	m, err := CurrentVersion(live.Annotations[AnnotationVersion], hasKey(live.Annotations, AnnotationVersion))
	if err != nil || m < 2 {
		return false
	}
	prev, err := f.api.GetSnapshot(ctx, SnapshotName(live.UID, m-1))
	if err != nil {
		return false
	}
	meta, ok := checkSnapshot(prev, live.UID, live.Name)
	if !ok || meta.SourceResourceVersion != f.cmd.ExpectedResourceVersion {
		return false
	}
	base := prev.Data
	if f.cmd.Kind == command.KindSecretRestore {
		target, _, err := f.loadTarget(ctx, live)
		if err != nil || target == nil {
			return false
		}
		base = target.Data
	}
	return sameData(live.Data, f.replacement(live, base, m-1).Data)
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
// ownerReferences, finalizers, labels and other annotations are kept.
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
	out.Annotations[AnnotationVersion] = strconv.FormatInt(n+1, 10)
	return out
}

func (f *family) refuse(reason string, s *corev1.Secret) workflow.Decision {
	return workflow.Decision{Refuse: &workflow.Refusal{Reason: reason, Summary: f.summary(s, nil)}}
}

func (f *family) refuseCounts(reason string, c counts) workflow.Decision {
	return workflow.Decision{Refuse: &workflow.Refusal{Reason: reason, Summary: f.summary(f.live, map[string]any{"history": c.summary()})}}
}

func (f *family) complete(outcome workflow.Outcome, s *corev1.Secret, extra map[string]any) workflow.Decision {
	return workflow.Decision{Complete: &workflow.Completion{Outcome: outcome, Summary: f.summary(s, extra)}}
}

// summary is the content-free description printed on stdout and stored in
// the completion or refusal record: identity, versions, names and counts.
func (f *family) summary(s *corev1.Secret, extra map[string]any) map[string]any {
	out := map[string]any{"secret": map[string]any{"namespace": f.cmd.Namespace, "name": f.cmd.Name}}
	if s != nil {
		out["secret"] = map[string]any{"namespace": f.cmd.Namespace, "name": f.cmd.Name, "uid": string(s.UID)}
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// observation records what a read of the live Secret showed: identity,
// version counter, type and how many keys; never values.
func observation(s *corev1.Secret) store.Record {
	detail := map[string]any{"keys": len(s.Data), "type": string(s.Type)}
	if n, err := CurrentVersion(s.Annotations[AnnotationVersion], hasKey(s.Annotations, AnnotationVersion)); err == nil {
		detail["version"] = n
	}
	if s.DeletionTimestamp != nil {
		detail["terminating"] = true
	}
	return store.Record{Kind: store.RecordObservation, Step: StepReadLive, UID: string(s.UID), ResourceVersion: s.ResourceVersion, Detail: detail}
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

// settled returns the record that settled the last call of step on target
// as done (an applied result or an ours resolution), if any.
func settled(run *workflow.Run, step, target string) (store.Record, bool) {
	var last *store.Record
	for i := range run.Records {
		r := &run.Records[i]
		if r.Step != step || r.Target != target {
			continue
		}
		switch r.Kind {
		case store.RecordAuthorityCall:
			last = nil
		case store.RecordAuthorityResult, store.RecordResolution:
			last = r
		}
	}
	if last == nil || (last.Status != string(workflow.Applied) && last.Status != string(workflow.Ours)) {
		return store.Record{}, false
	}
	return *last, true
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

func detailInt(d map[string]any, key string) int64 {
	switch v := d[key].(type) {
	case float64:
		return int64(v)
	case int64:
		return v
	case int:
		return int64(v)
	case json.Number:
		n, _ := v.Int64()
		return n
	}
	return 0
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
