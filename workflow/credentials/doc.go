// Package credentials is the create-once credentials family: a
// CredentialPlan names up to 64 Secrets whose values are generated once
// (crypto/rand, rejection sampling) and never replaced.
//
// A plan is desired state. Every run of it is an operation of its own in the
// journal, "<mutationId>:run-<n>" (workflow.Plan.Runs, store.PrepareRun): a
// run that finds the plan's newest run unfinished resumes it (within the
// run bound, RunBoundFromEnv: past it the stuck run is closed and a fresh
// one starts), otherwise it starts the next one; a changed plan of the same
// namespace and owner under the same mutationId is the plan's next version, so running the plan again converges again (a deleted
// Secret is recreated, a refusing server repaired) while an interrupted run
// never starts over. Concurrent runs meet on one operation. A terminal run
// is never replayed (a forged completed run only makes the next run start);
// a run handed back already ended is refused (replay-run-ended).
//
// Decide walks five phases, each a short list of calls the engine journals
// (authority_call before, authority_result after):
//
//  1. read-external-secret: GET the ExternalSecret of every planned Secret's
//     name, listed in adopt or not. Absent: nothing to adopt. One that is not
//     generator-backed (spec.data, or a dataFrom without
//     sourceRef.generatorRef) or writes another Secret refuses the run before
//     any write (exit 2, the summary names it).
//  2. orphan-external-secret: for each one found, GET it again right before
//     the delete and check it again (refuse as above), then DELETE with
//     propagationPolicy Orphan and that read's UID and resourceVersion as
//     preconditions; wait (bounded) until it is gone. A lost answer or 409
//     is resolved by reading again: gone or being deleted is ours; another
//     UID is someone else's (external-secret-replaced); the same one is
//     checked again and deleted again with the new read's preconditions.
//  3. delete-generator: GET each listed Password generator (journaled with
//     the call) and DELETE it with that read's UID and resourceVersion;
//     absent is journaled and skipped. Resolution reads again: gone is ours;
//     another UID means ours is gone and someone created a new one, which is
//     not deleted ("replaced-not-deleted"); the same one is deleted again
//     with the new read's preconditions.
//  4. create-secret / patch-secret: GET every planned Secret this run has
//     not settled since it was last resumed (store.StepResumeRun: a resumed
//     run re-reads what it settled before, so a Secret deleted meanwhile is
//     created again), then POST each absent one (one batch) with its
//     labels, the annotations keyledger.dev/created-by-mutation (the run,
//     for people) and keyledger.dev/create-nonce (128 random bits; the call
//     record holds its sha256 as Digest, committed before the POST) and its
//     values: a Secret that exists is never POSTed, so no value is
//     generated or sent for it. The Secrets found complete are journaled
//     together, one read-secrets record per 32 (names, UIDs, authorship).
//     A lost answer or 409 (a create racing the read) is settled by
//     reading the Secret: the call's nonce, type Opaque and
//     exactly the planned keys mean ours ("created-by-this-mutation");
//     anything else is kept ("kept-existing") once it passes the checks
//     every kept Secret gets (terminating, type, immutable: keptProblem),
//     counted as existing, never as created, with its authorship (see
//     Authorship: proven when the nonce it carries is that of a create any
//     run of the plan journaled, adopted, or unproven; lookAlike when an
//     unproven one carries keyledger's annotations; a later run carries
//     proven and adopted forward by UID from the newest read-secrets,
//     read-secret or resolution record of any run).
//     Then one JSON patch whose first operation tests
//     /metadata/resourceVersion adds only what is absent (labels, planned
//     keys) and, on adopted Secrets, removes ExternalSecret owner references,
//     Argo CD's tracking-id annotation and app.kubernetes.io/instance label.
//     No operation's path is an existing /data/<key>. A failed test answers
//     422; resolution re-reads and recomputes, at most MaxAttempts sends per
//     Secret. A complete Secret costs one GET and no write.
//  5. probe-server / delete-pod: probe each server pod at its status IP
//     (Valkey AUTH over RESP, NATS CONNECT+PING; replies bounded) with the
//     password the Secret holds, only when the pod is Running and Ready, not
//     terminating, not host-network, its IP listed in status.podIPs and its
//     controller the one the plan expects (unprobeable: otherwise unknown,
//     nothing sent), and, for a StatefulSet, tied to the live one read now
//     (notOwned: the owner reference's group apps and UID, the selector,
//     the template's containers; otherwise nothing is sent and the run
//     refuses server-not-owned naming the pod and the check); a probe that never reached the server's answer
//     (connection refused, timeout, reset: a restarted server is Ready
//     before the network lets the hook reach its new address) is sent
//     again for at most reprobeBound, the pod read again before each send
//     (same UID, same IP, still probeable; otherwise the last answer
//     stands), and only its last answer is journaled; a refusing pod whose
//     Secret is unproven is not restarted unless the plan opts in
//     (spec.repair.restartOnUnproven; otherwise secret-unproven, naming the
//     Secret's authorship); a refusing pod is deleted once (UID precondition), its
//     replacement (same name, new UID, Ready) awaited and probed again; still
//     refused is exit 2. The delete-pod call's Digest is its cause (the
//     Secret's resourceVersion, the controller and its revision, the
//     containers): a refusing pod whose cause any run of the plan already
//     restarted for (FindInRuns) is not restarted again, the run refuses
//     server-still-refuses naming it. An unknown answer restarts nothing and ends the run
//     uncertain (exit 75) after journaling the probe (workflow.Decision.End);
//     a rerun probes again every server whose newest probe record is not
//     accepted or skipped.
//     An absent pod is skipped (a server that does not run reads the Secret
//     when it starts).
//
// A delete-pod call the journal holds and resolution finds not applied
// (a lost answer, or a run forged in the journal) is sent again only when
// a decision made now would make it (Asks, workflow.Asker): the same pod
// UID, tied to its StatefulSet, refusing now for the call's cause, onto a
// Secret whose authorship allows it; otherwise the run refuses
// call-not-asked and sends nothing.
//
// Progress is folded from the operation's records on every Decide and
// Resolve (what a call settled through workflow.Run.Settled; reads and
// probes from their observation and probe records, the newest winning), so a
// resumed, reloaded or concurrent run continues where the journal says. The
// family keeps nothing between decisions: what one decision read and a
// later one relies on is journaled (the adoption check and what it found, a
// Secret found complete, a kept Secret's verdict with what it lacks, each
// server's probe); anything else is read again. A kept Secret that lacks
// something is therefore read twice (by the resolution that kept it and by
// the decision that builds its patch from its own read); a complete one once.
//
// Everything the decisions reach outside the process goes through a seam
// of the family: authority (exactly the kube.Credentials methods it calls),
// prober (Probe), waiter (wait.PollUntilContextCancel under waitBound) and the reader values
// and nonces come from (crypto/rand). The unit tests put the test kit's
// scripted API server (workflow/kubetest: UIDs, resourceVersions,
// preconditions, JSON patch tests, faults per request) behind them, with
// the garbage collector and a pod's controller (kube_test.go), and drive the family through workflow.Operate on
// workflowtest.Journal; integration/ proves every Kubernetes claim.
//
// Limits (MaxSecrets, MaxKeysPerSecret, MaxKeys, MaxLabelsPerSecret, the
// 12 KiB of planned names, MaxMutationID) are chosen so that every record a
// valid plan can produce fits the journal's 16 KiB detail limit; records
// carry counts, never lists, of anything the cluster (not the plan) sizes.
//
// Nothing here journals or prints a value or a hash of one: records hold
// names (Secrets, keys, labels), UIDs, resourceVersions, nonce digests and
// kebab-case reasons. Literal `value`s in a plan are not secret by contract
// (render ships the plan in a ConfigMap), so the plan file is read without
// RequirePrivate and its canonical digest is the operation's command digest.
//
// Hook renders the Argo CD PreSync hook that runs a plan in the cluster
// (`keyledger render credentials`): a ServiceAccount, a Role holding exactly
// Rules of the plan, its RoleBinding, a ConfigMap with the plan's bytes and
// the Job running `keyledger run` on them, named by HookJobName so that a new
// plan, version or image is a new Job. Applying it is kube.Hook's.
package credentials
