package store

import (
	"errors"
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
//
// A record's target is always in its operation's namespace: every read of
// the journal fills Namespace with it (the namespace a lookup asked for,
// which its query keeps to, or the one read with the operation), so a
// target read back equals, with ==, the one the family built for the
// operation's namespace, and the journal never holds a namespace to
// disagree with. Only this package parses the text (parseTarget).
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

// parseTarget reads a journaled target of an operation in namespace: the
// one parsing of String's text ("" is no target).
func parseTarget(namespace, text string) (Target, error) {
	if text == "" {
		return Target{}, nil
	}
	kind, name, ok := strings.Cut(text, "/")
	if !ok || kind == "" || name == "" {
		return Target{}, errors.New("target is not <kind>/<name>")
	}
	return Target{Kind: TargetKind(kind), Namespace: namespace, Name: name}, nil
}

// Journaled is t as the journal reads it back for an operation in
// namespace: its text parsed again, in that namespace (none stays none).
// It is an error when the text does not read back as t's kind and name (a
// kind with a "/", an empty kind or name): the journal refuses to append
// such a target (Transition), and so does any journal that stands in for
// it.
func (t Target) Journaled(namespace string) (Target, error) {
	back, err := parseTarget(namespace, t.String())
	if err == nil && (back.Kind != t.Kind || back.Name != t.Name) {
		err = fmt.Errorf("target %q does not read back as kind %q, name %q", t.String(), t.Kind, t.Name)
	}
	return back, err
}

// Same reports whether t and u name the same object of one operation: the
// same kind and name. The namespace is the operation's, which a record
// read back always carries and a target a family built may leave out.
func (t Target) Same(u Target) bool { return t.Kind == u.Kind && t.Name == u.Name }
