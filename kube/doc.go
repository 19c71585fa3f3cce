// Package kube holds keyledger's client-go adapters: loading the cluster
// configuration, keyledger's own narrow client (Client: REST clients of the
// five API groups it calls over one scheme of their types, without
// client-go's clientset, its all-groups scheme, discovery or apply
// configurations), the permission matrix (SelfSubjectAccessReviews), request
// counting, and the narrow per-workflow adapters that expose only the verbs a
// workflow may use (a retirement gets Get and Replace on one Secret, nothing
// else; `keyledger apply-hook` gets Hook: delete, wait until gone, create of
// the credentials hook's five kinds in one namespace, and waiting for its Job).
//
// Every API error an adapter returns is a *Error carrying its Failure: a
// typed Reason (kube.ReasonNotFound, kube.ReasonConflict, ...) that
// errors.Is matches, the HTTP status, and whether the API server definitely
// did not apply the request. Families never read HTTP codes or compare
// reason strings; workflow.KubeAnswer turns a failed call into its answer.
package kube
