// Package versioned is the versioned-writes family: SecretUpdate,
// SecretRestore and SecretDelete. Every update and restore archives the
// state it replaces in an immutable snapshot Secret bound to the live
// object's UID and resourceVersion, so any retained version can be restored.
//
// # Versions and snapshots
//
// The live Secret's annotation keyledger.dev/version counts versions: a
// Secret keyledger creates starts at 1, an adopted one without a counter (or
// "0") is logically 1, and each write moves N to N+1 after archiving N in
// the slot keyledger-h-<Hash(UID)>-v<N> (at most 60 characters; the live
// name is only in an annotation). A snapshot is an Opaque Secret with
// immutable: true, the live data byte for byte, and exactly the labels and
// annotations of the uid-rv-v1 format plus a nonce (see names.go); it never
// copies the live Secret's other labels or annotations.
//
// # Provenance: history is what keyledger provably created
//
// Anyone who may create Secrets in the namespace can compute a snapshot's
// name, labels and annotations from the live UID, so none of them proves
// anything. A snapshot is history only when the journal proves keyledger
// created it: its UID is the UID journaled in the authority_result of an
// applied create-snapshot call (or in an "ours" resolution of one) whose
// call record was bound to that live UID and named that very slot
// (provenance.go). The journal is asked only about the names the history
// listing returned (store.StepRecords by target, migration 10), so a
// decision reads the same few records whether the Secret was updated ten
// times or ten thousand; what it proves of a name is what the whole
// journal proves of it, since a call, its result and its resolutions are
// all on the slot's target. Every Secret of the namespace is listed,
// metadata only; anything else that claims to be history of the UID (a slot name, the
// label or the annotation naming it) is foreign: never counted, pruned,
// read or restored, and reported by `history` by name with its reason
// (not-journaled, edited, or unsettled: see below). The proof lives in the
// journal: snapshots made by runs against another journal database are
// foreign to this one (left alone, never pruned), and a stale command is
// never found already applied through one of them (refused
// stale-resource-version).
//
// A create-snapshot call carries a fresh random nonce, whose SHA-256 is
// journaled in the call record ("nonceDigest") before the create is sent,
// written as the snapshot's keyledger.dev/nonce annotation (records written
// by an older keyledger hold the nonce itself, and are still read). When
// the answer is lost, the occupant carrying a journaled nonce is that
// call's; its resolution journals the
// occupant's UID, which is from then on the proof. Until then the object is
// "unsettled": not history, and not blocking the slot it was made for. The
// list is taken before the journal is read, so an object a concurrent run
// created before the list carries a nonce the journal already holds.
//
// A slot at or above the live counter held by anything not provably ours
// blocks the write (slot-occupied, exit 2): the refusal names the objects
// and the highest slot. The operator reviews them and, when they are to
// stay, raises the live counter above the highest by hand
// (kubectl annotate --overwrite secret NAME keyledger.dev/version=M) and
// runs a new command against the new resourceVersion. keyledger's own
// history above the counter (the counter was moved back) blocks too
// (counter-behind, exit 2). A restore's target must be below the live
// counter (version-ahead) and genuine (foreign-snapshot otherwise); only
// then is its data read.
//
// # Steps
//
// Each kind of write is one ordered list of steps in steps.go
// (createSteps, updateSteps, restoreSteps, deleteSteps, keepHistorySteps),
// each a small function named with the journal's word for what it reads or
// writes; a decision runs its list from the top and returns the first
// step's decision. An update or restore is: read the live Secret (refuse a stale
// expectedResourceVersion before any side effect), list the history and
// check the slots, create-snapshot of version N, check that archive (it
// must still be there, keyledger's, not terminating and without finalizers,
// on every rerun too: archive-missing, snapshot-terminating,
// snapshot-finalizers; a missing archive is not re-created), prune-snapshot
// of the oldest genuine snapshots beyond KEYLEDGER_HISTORY_LIMIT (serially,
// each with UID and resourceVersion preconditions), then replace-live with
// UID and resourceVersion preconditions and version N+1. The write drops
// kubectl.kubernetes.io/last-applied-configuration (it holds the old values
// in plain text) and says so in the outcome (droppedAnnotations). A delete
// with keepHistory: true touches no snapshot; with keepHistory: false it
// deletes every genuine snapshot of the UID and confirms with a fresh list
// that none is left. Then delete-live, then a re-read reports deleted or
// pending. Each write is one engine call; its target is "secret/<name>".
//
// A run lists the history once and reads the live Secret once (runReads):
// each later decision folds in what this run's applied answers said (the
// archive created, a snapshot deleted), and only the decision that writes
// the live Secret reads the archive again (its metadata only; a delete
// without history reads the live Secret again and lists afresh). A purge
// reads the live Secret again before each snapshot delete (the contract
// rechecks the live object before each cleanup mutation): once it changed,
// no further snapshot goes and the run is refused naming the change. Another writer between
// decisions is caught by the writes' preconditions (a create's
// AlreadyExists, a delete's UID and resourceVersion, the live write's UID
// and resourceVersion), not by that memory: a live Secret changed after
// this run read it answers the replace 409, and the resolution's fresh
// read refuses changed-concurrently (uid-changed, secret-absent).
// The family never asks whether it is in a dry run (keyledger plan): a
// planned answer folds in as an applied one (the archive counts as present,
// so retention prunes what the run will prune; a purge's deletes as gone),
// and the reads of a call's effect go through workflow.Verify (the archive
// re-read, the fresh list after a purge, the live Secret after its delete),
// which a dry run answers with the intended effect.
//
// A cleanup that does not finish (a snapshot held by finalizers, a delete
// the API server refuses: 403, 422) goes on with its other snapshots, then
// ends the run uncertain (exit 75, prune-pending or history-pending) with
// the operation still open, the live write or delete not sent, and the
// counts of its snapshots confirmed absent, pending and failed in the
// message: rerunning the same command re-reads, sends a refused delete
// again and completes once the snapshots are gone. A snapshot changed
// between the read a cleanup delete was decided from and the delete (409:
// its resourceVersion precondition) is refused (snapshot-changed), never
// deleted with new preconditions. Cleanup reads no value: a lost cleanup
// answer is settled from the snapshot's metadata (GetSnapshotMeta).
//
// # Settling lost answers
//
// A 409 on a snapshot create, or a lost answer, is settled by re-reading:
// the occupant of the slot must be keyledger's (its UID or its call's nonce
// journaled), not terminating, without finalizers, and the exact snapshot of
// the same source (identity annotations, labels, immutable, Opaque,
// byte-identical data; only the snapshot time, actor and nonce may differ);
// else slot-occupied, snapshot-terminating, snapshot-finalizers or
// source-conflict. The live Secret of the same UID carrying version N+1 and
// exactly the data the command writes over the archived state N is ours; an
// unchanged resourceVersion means the write did not happen and the same
// compare-and-set may be sent again.
//
// # Replays
//
// A completed operation is replayed (existing) only once ConfirmReplay
// (replay.go) has read the cluster and found its effect: for an update or a
// restore the live UID the write was bound to, a resourceVersion past the
// replaced one, a counter at or past the version written and the archive
// this operation created (its journaled UID, or its call's nonce), for a
// delete no live object of the deleted UID that is not being deleted and,
// without history, none of its proven snapshots left. Otherwise the run
// refuses with a replay- reason and writes nothing.
//
// # What a decision reads
//
// A decision reads what the journal does not vouch for afresh, except one
// run's own reads (above); a resolution always reads afresh, and memoizes
// only within that one call (reads: the history list, read once when a
// restore's target and retention both need it). A live read is journaled
// (read-live) when it differs from the newest one the operation
// journaled. The precheck's read of the live Secret (the size guard, before
// the journal is opened) is the run's first. When it shows the expected
// resourceVersion, the history is listed while the journal connects
// (Prefetch), and the journal's provenance of it is read once the journal
// is open, before the preparation, while the PBKDF2 digest may still be
// computed (Digest). These reads serve the first decision of an operation
// that has journaled nothing but its preparation; a resumed operation reads
// afresh. A failed read ahead is dropped: the decision reads again.
//
// # Unit tests
//
// The family depends on the verbs of kube.VersionedSecrets through a small
// interface (secrets); its tests (family_test.go) drive it through the
// engine against the test kit's scripted API server (workflow/kubetest,
// behind kube_test.go's adapter: UIDs, resourceVersions, compare-and-set, 404/409/422 as real API
// statuses, lost answers before and after the effect, someone else's
// writes) and an in-memory journal. They prove decision logic only; the
// integration suite proves every Kubernetes and PostgreSQL claim.
//
// # Size
//
// New data is measured by the versioning contract's estimate (the values'
// UTF-8 bytes x 1.4 plus metadata, EstimateSize); an update that brings no
// new bytes (it only removes keys, or sets values the live Secret holds)
// and a restore by the bytes the API server counts (DataSize). Over MaxSecretBytes an update exits 64 before
// the journal is opened.
//
// # No value digests in the journal
//
// The journal records names, versions, key names and counts, nonce digests, and
// for each call a digest of its intent (command digest, UID,
// resourceVersion, version), never a digest of values. A SecretUpdate's
// command digest sees its values only through one PBKDF2-HMAC-SHA256
// verifier over all of them (100,000 iterations, salted with the mutation
// ID): one derivation per decode whatever the number of keys, and at most
// MaxUpdateKeys keys (data and removeKeys together) so that every record
// fits the journal. `history --show-keys` prints HMAC-SHA256 digests under a
// key drawn for that one invocation: equal within one output means equal
// values, and nothing printed can be tested offline.
//
// # Permissions
//
// See Rules (the one declaration) and AccessMatrix: namespace-wide get,
// list, create and delete on secrets (snapshot names are derived, list
// cannot be narrowed by resourceNames), update only on the live name;
// patch, watch and deletecollection denied.
// `history` needs get and list on secrets and read access to the journal.
package versioned
