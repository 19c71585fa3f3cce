// Package retire is the key retirement family: a keyring held in one
// Kubernetes Opaque Secret loses one inactive key by get + replace
// compare-and-set, and gains a content-free receipt, exactly once.
//
// Decide reads the Secret (get only) and either finds the retirement already
// in place (outcome existing), refuses, or prepares one replace whose
// precondition is the resourceVersion it read. Resolve re-reads after a lost
// answer or a 409: the receipt with this mutation's exact identity and the
// key gone means ours (converged); an unchanged resourceVersion means the
// write did not happen, so the same compare-and-set may be sent again;
// anything else is someone else's change and fails closed.
//
// A completed operation is replayed (existing) only once ConfirmReplay has
// read the Secret again and found this operation's receipt with the key
// gone and the journaled UID: a completion forged in the journal, with the
// key still there, refuses (replay-receipt-missing) and writes nothing.
//
// The receipt's retiredAt is the operation's preparation time from the
// journal, so every run of the same command (a retry, a rerun after a crash,
// a concurrent duplicate) computes byte-identical keyring bytes.
//
// Decide and Resolve reach the API server only through the secrets interface
// (get and replace of the one bound Secret), which *kube.SecretReplacer
// implements; they keep nothing between decisions, every one reads the
// Secret afresh. The package's unit tests (go test -short) drive the family
// through the engine and an in-memory journal against the test kit's
// scripted API server (workflow/kubetest) behind that interface: every answer a replace can get, someone else's writes,
// resumes from each state a crash can leave, and replays. The integration
// suite proves the same on the real API server and PostgreSQL.
package retire
