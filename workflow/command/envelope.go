package command

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// APIVersion is the only apiVersion command files may have.
const APIVersion = "keyledger.dev/v1"

// Kinds of command file. Each family defines its spec type in its own
// package.
const (
	// KindKeyRetirement retires a key from a keyring.
	KindKeyRetirement = "KeyRetirement"
	// KindCredentialPlan plans credential changes.
	KindCredentialPlan = "CredentialPlan" //nolint:gosec // G101: a kind name, not a credential
	// KindSecretUpdate updates values in a Secret.
	KindSecretUpdate = "SecretUpdate"
	// KindSecretRestore restores a Secret.
	KindSecretRestore = "SecretRestore"
	// KindSecretDelete deletes a Secret.
	KindSecretDelete = "SecretDelete"
)

// Kinds lists every kind Parse accepts. Changing it changes nothing: Parse
// checks its own copy.
var Kinds = slices.Clone(kinds)

var kinds = []string{
	KindKeyRetirement, KindCredentialPlan, KindSecretUpdate, KindSecretRestore, KindSecretDelete,
}

// Metadata identifies a command. MutationID names the change and makes it
// idempotent; RequestID names the request that asked for it.
type Metadata struct {
	RequestID  string `json:"requestId"`
	MutationID string `json:"mutationId"`
}

// Envelope is what every command file holds, with its spec left raw.
type Envelope struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   Metadata        `json:"metadata"`
	Spec       json.RawMessage `json:"spec"`
}

// Document is a command file decoded with a typed spec. Families get one
// from Decode.
type Document[S any] struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	Spec       S        `json:"spec"`
}

// Digest returns the canonical digest of d; see the package function Digest.
func (d *Document[S]) Digest() (string, error) {
	return Digest(d)
}

// Parse decodes data strictly and validates the envelope: apiVersion is
// APIVersion, kind is one of Kinds, requestId and mutationId are
// identifiers, spec is an object. Errors are *InvalidError.
func Parse(data []byte) (*Envelope, error) {
	var env Envelope
	if err := DecodeStrict(data, &env); err != nil {
		return nil, err
	}
	if err := validateHeader(env.APIVersion, env.Kind, env.Metadata); err != nil {
		return nil, err
	}
	switch spec := bytes.TrimSpace(env.Spec); {
	case len(spec) == 0:
		return nil, Required("spec")
	case spec[0] != '{':
		return nil, Invalid("spec", "want object, got "+rawKind(spec))
	}
	return &env, nil
}

func validateHeader(apiVersion, kind string, md Metadata) error {
	switch {
	case apiVersion == "":
		return Required("apiVersion")
	case apiVersion != APIVersion:
		return Invalid("apiVersion", "unsupported; want "+APIVersion)
	case kind == "":
		return Required("kind")
	case !slices.Contains(kinds, kind):
		return Invalid("kind", "unknown; want one of "+strings.Join(kinds, ", "))
	}
	for _, id := range []struct{ field, value string }{
		{"metadata.requestId", md.RequestID},
		{"metadata.mutationId", md.MutationID},
	} {
		if id.value == "" {
			return Required(id.field)
		}
		if err := ValidIdentifier(id.value); err != nil {
			return Invalid(id.field, err.Error())
		}
	}
	return nil
}

func rawKind(raw []byte) string {
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// Decode decodes the whole of f strictly into a Document with spec type S,
// so errors in the spec carry paths like "spec.secrets[2].name". It checks
// the envelope as Parse does; rules of the spec itself (required members,
// names) are the family's, reported with Required and Invalid.
func Decode[S any](f *File) (*Document[S], error) {
	if err := f.parsed(); err != nil {
		return nil, err
	}
	var doc Document[S]
	if err := DecodeStrict(f.Bytes, &doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

// parsed checks the envelope of f.Bytes as Parse checks it, unless Read
// did and the bytes are still those Read read (their digest unchanged).
func (f *File) parsed() error {
	if f.checked && f.Digest == digestBytes(f.Bytes) {
		return nil
	}
	_, err := Parse(f.Bytes)
	return err
}

// DecodeKind is Decode for a family of one kind: it also refuses a document
// of another kind and returns the canonical Digest.
func DecodeKind[S any](f *File, kind string) (*Document[S], string, error) {
	doc, err := Decode[S](f)
	if err != nil {
		return nil, "", err
	}
	if doc.Kind != kind {
		return nil, "", Invalid("kind", "want "+kind)
	}
	digest, err := doc.Digest()
	if err != nil {
		return nil, "", err
	}
	return doc, digest, nil
}

// DecodeSpec is Decode for callers without a type parameter: it decodes the
// whole of f strictly, with the spec member into v, a non-nil pointer.
func (f *File) DecodeSpec(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("command: DecodeSpec needs a non-nil pointer, got %T", v)
	}
	if err := f.parsed(); err != nil {
		return err
	}
	docType := reflect.StructOf([]reflect.StructField{
		{Name: "APIVersion", Type: reflect.TypeFor[string](), Tag: `json:"apiVersion"`},
		{Name: "Kind", Type: reflect.TypeFor[string](), Tag: `json:"kind"`},
		{Name: "Metadata", Type: reflect.TypeFor[Metadata](), Tag: `json:"metadata"`},
		{Name: "Spec", Type: rv.Type().Elem(), Tag: `json:"spec"`},
	})
	doc := reflect.New(docType)
	if err := DecodeStrict(f.Bytes, doc.Interface()); err != nil {
		return err
	}
	rv.Elem().Set(doc.Elem().Field(3))
	return nil
}

// Digest returns "sha256:<hex>" of json.Marshal(v), where v is a decoded
// command document, usually a *Document. White space and member order in
// the file do not change it; any value does. See the package documentation.
func Digest(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("command: computing digest: %w", err)
	}
	return digestBytes(b), nil
}
