// Package kube holds keyledger's client-go adapters: loading the cluster
// configuration, the permission matrix (SelfSubjectAccessReviews), request
// counting, and the narrow per-workflow adapters that expose only the verbs a
// workflow may use (a retirement gets Get and Replace on one Secret, nothing
// else).
package kube
