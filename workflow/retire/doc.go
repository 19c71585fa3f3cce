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
// The receipt's retiredAt is the operation's preparation time from the
// journal, so every run of the same command (a retry, a rerun after a crash,
// a concurrent duplicate) computes byte-identical keyring bytes.
package retire
