// Package credentials is the create-once credentials family: a
// CredentialPlan names up to 64 Secrets whose values are generated once
// (crypto/rand, rejection sampling) and never replaced.
//
// Decide walks five phases, each a short list of calls the engine journals
// (authority_call before, authority_result after):
//
//  1. check-adoption: GET every ExternalSecret the plan adopts. One that is
//     not generator-backed (spec.data, or a dataFrom without
//     sourceRef.generatorRef) or writes another Secret refuses the run before
//     any write (exit 2).
//  2. orphan-external-secret: DELETE with propagationPolicy Orphan and a UID
//     precondition, then wait (bounded) until the garbage collector has
//     released the Secret and the ExternalSecret is gone.
//  3. delete-generator: DELETE each retired Password generator (404 is
//     "absent"; the plan's identity may not read generators, so a lost
//     answer is settled by deleting again, which is idempotent).
//  4. create-secret / patch-secret: POST each Secret with its labels, the
//     annotation keyledger.dev/created-by-mutation and its values: exactly one
//     request for an absent Secret. 409 is settled by resolution, which reads
//     the Secret: this mutation's annotation means ours, anything else is
//     kept ("kept-existing"); then one JSON patch whose first operation tests
//     /metadata/resourceVersion adds only what is absent (labels, planned
//     keys) and, on adopted Secrets, removes ExternalSecret owner references,
//     Argo CD's tracking-id annotation and app.kubernetes.io/instance label.
//     No operation's path is an existing /data/<key>. A failed test answers
//     422; resolution re-reads and recomputes, at most MaxAttempts sends per
//     Secret. A complete Secret costs a POST (409) and a GET, and no write.
//  5. probe-server / delete-pod: probe each server pod at its status IP
//     (Valkey AUTH over RESP, NATS CONNECT+PING) with the password the Secret
//     holds; a refusing pod is deleted once (UID precondition), its
//     replacement (same name, new UID, Ready) awaited and probed again; still
//     refused is exit 2. An unknown answer restarts nothing and ends the run
//     uncertain (exit 75) after journaling the probe; a rerun probes again.
//     An absent pod is skipped (a server that does not run reads the Secret
//     when it starts).
//
// Progress is folded from the operation's records on every Decide, so a
// resumed, reloaded or concurrent run continues where the journal says; what
// no record says (a read found a Secret complete) is kept in memory and
// re-read after a restart.
//
// For create-if-absent, the create step's intended result is "a Secret of
// this name exists and was never overwritten": resolution therefore answers
// Ours both for this mutation's Secret ("created-by-this-mutation") and for
// someone else's ("kept-existing"); the reason tells them apart.
//
// Nothing here journals or prints a value or a hash of one: records hold
// names (Secrets, keys, labels), UIDs, resourceVersions and kebab-case
// reasons. Literal `value`s in a plan are not secret by contract (render
// ships the plan in a ConfigMap), so the plan file is read without
// RequirePrivate and its canonical digest is the operation's command digest.
package credentials
