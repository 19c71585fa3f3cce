package store

import (
	"fmt"
	"strings"
)

// TargetKind is the kind of object a call or a record acts on.
type TargetKind string

// The kinds of target keyledger journals.
const (
	TargetSecret         TargetKind = "secret"
	TargetPod            TargetKind = "pod"
	TargetPassword       TargetKind = "password"       // an External Secrets Password generator
	TargetExternalSecret TargetKind = "externalsecret" // an External Secrets ExternalSecret
	// TargetSecrets is a chunk of a credential plan's Secrets (a
	// read-secrets record), named by its number.
	TargetSecrets TargetKind = "secrets"
)

// Target is what a call or a record acts on: an object's kind, namespace
// and name. Its text (String, the journal's target column) is
// "<kind>/<name>": the namespace is the operation's and is not written.
// The zero Target is none (the text "").
type Target struct {
	Kind      TargetKind
	Namespace string
	Name      string
}

// SecretTarget is the Secret name in namespace.
func SecretTarget(namespace, name string) Target {
	return Target{Kind: TargetSecret, Namespace: namespace, Name: name}
}

// String is the target as the journal writes it: "<kind>/<name>", "" for
// none.
func (t Target) String() string {
	if t == (Target{}) {
		return ""
	}
	return string(t.Kind) + "/" + t.Name
}

// ParseTarget reads a journaled target of an operation in namespace: the
// one parsing of String's text ("" is no target).
func ParseTarget(namespace, text string) (Target, error) {
	if text == "" {
		return Target{}, nil
	}
	kind, name, ok := strings.Cut(text, "/")
	if !ok || kind == "" || name == "" {
		return Target{}, fmt.Errorf("target %q is not <kind>/<name>", text)
	}
	return Target{Kind: TargetKind(kind), Namespace: namespace, Name: name}, nil
}

// TargetIn is the record's target, in namespace, the operation's: the
// journal writes its text (Target.String) and this reads it back.
func (r Record) TargetIn(namespace string) (Target, error) {
	return ParseTarget(namespace, r.Target)
}
