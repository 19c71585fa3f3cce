// Package kubetest is the families' one scripted API server double: an
// in-memory store of one namespace's objects (Secrets, Pods, custom
// resources) with the API server's UID and resourceVersion semantics, its
// preconditions and its answers, one fault vocabulary, a request log and
// write counts, and small builders for the objects it holds.
//
// Each family's unit tables put a thin adapter over a Server that gives the
// family's authority seam (retire's bound Secret, versioned's
// kube.VersionedSecrets-like seam, credentials' secrets, pods,
// ExternalSecrets and generators) and nothing more: the adapter refuses
// what the real adapter refuses before sending, and maps answers as it maps
// them (a delete's 404 is "deleted" for versioned). What the Server answers
// is what the real adapters return: a *kube.Error over a real
// *apierrors.StatusError (kube.Wrap, kube.WrapPatch), or over a transport
// error for a lost answer, so errors.Is(err, kube.ReasonConflict) and
// kube.Classify read them.
//
// What the Server keeps, as the API server does:
//   - a UID per object ("uid-0001", ...) and a creation timestamp when it is
//     created; one resourceVersion counter for the namespace, bumped by every
//     write that changes an object (a write that changes nothing keeps it);
//   - create: 409 AlreadyExists for an existing name, 422 for an object that
//     carries a UID or resourceVersion;
//   - update: 404 when absent; 409 Conflict when the object's UID or
//     resourceVersion (when set) is not the stored one; 422 when the data of
//     an immutable Secret would change;
//   - patch: an RFC 6902 JSON patch applied as the API server applies it
//     (gopkg.in/evanphx/json-patch.v4); a test operation that does not hold
//     is 422 naming no object (kube.ReasonTestFailed);
//   - delete: UID and resourceVersion preconditions (409); finalizers keep
//     the object terminating (a deletion timestamp, one resourceVersion
//     bump), and an orphaning delete adds the orphan finalizer; 404 when
//     absent.
//
// The fault vocabulary (Fault): AppliedLost (the write lands, its answer is
// lost), LostBefore (the request never lands), Status (an HTTP status
// answered, nothing applied), Theirs (someone else's write right before
// ours; First adds one to any fault), Admission (admission changes what we
// write before it is stored) and Answer (the answer differs from what was
// stored). Faults are scripted with On for a verb, resource and name, and
// each request takes the first one that matches.
//
// It is imported by _test files only (TestOnlyTestsImportIt), and it never
// proves a Kubernetes claim: the integration suite does, on a real API
// server.
package kubetest
