// Package versioned is the versioned-writes family: SecretUpdate,
// SecretRestore and SecretDelete. Every write archives the state it
// replaces in an immutable snapshot Secret bound to the live object's UID
// and resourceVersion, so any retained version can be restored.
//
// # Versions and snapshots
//
// The live Secret's annotation keyledger.dev/version counts versions: a
// Secret keyledger creates starts at 1, an adopted one without a counter (or
// "0") is logically 1, and each write moves N to N+1 after archiving N in
// the slot keyledger-h-<Hash(UID)>-v<N> (at most 60 characters; the live
// name is only in an annotation). A snapshot is an Opaque Secret with
// immutable: true, the live data byte for byte, and exactly the labels and
// annotations of the uid-rv-v1 format (see names.go). Lists select by the
// source UID's hash, and every listed object is validated in full (checkMeta,
// checkSnapshot): a hash or a name never proves identity. Anything else
// (another format, another UID, edited metadata) is left alone, never
// counted, pruned or restored. A recreated live name has a new UID and so a
// separate history.
//
// # Steps
//
// An update or restore is: read the live Secret (refuse a stale
// expectedResourceVersion before any side effect), create-snapshot of
// version N, prune-snapshot of the oldest snapshots beyond
// KEYLEDGER_HISTORY_LIMIT (serially, each with UID and resourceVersion
// preconditions; a snapshot still present behind a finalizer blocks the
// live write), then replace-live with UID and resourceVersion preconditions
// and version N+1. A delete archives first when keepHistory is true, or
// deletes every snapshot of the UID and confirms an empty inventory when it
// is false, then delete-live, then re-reads to report deleted or pending.
// Each write is one engine call; its target is "secret/<name>".
//
// # Settling lost answers
//
// A 409 on a snapshot create, or a lost answer, is settled by re-reading:
// the occupant of the slot must be the exact snapshot of the same source
// (identity annotations, labels, immutable, Opaque, byte-identical data;
// only the snapshot time and actor, which say who took it, may differ), else
// source-conflict. The live Secret of the same UID carrying version N+1 and
// exactly the data the command writes over the archived state N is ours; an
// unchanged resourceVersion means the write did not happen and the same
// compare-and-set may be sent again.
//
// # No value digests in the journal
//
// The journal records names, versions, key names and counts, and for each
// call a digest of its intent (command digest, UID, resourceVersion,
// version), never a digest of values: a plain or salted digest whose salt
// sits beside it lets anyone who can read the journal confirm a guessed
// value, and a key kept away from the journal would have to outlive the
// process somewhere else. No step needs one: a rerun has the command's
// values and the archived state, and compares the live bytes directly.
//
// # Permissions
//
// See AccessMatrix: namespace-wide get, list, create and delete on secrets
// (snapshot names are derived, list cannot be narrowed by resourceNames),
// update only on the live name; patch, watch and deletecollection denied.
package versioned
