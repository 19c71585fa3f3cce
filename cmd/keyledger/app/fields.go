package app

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/credentials"
	"github.com/keyledger/keyledger/workflow/retire"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// What every member of a command file means, and the rules the decoder
// and the family check on it, in one table: `keyledger explain` prints it
// and `keyledger schema` states it as JSON Schema, walking the families'
// Go types (kindSpecs). TestFieldDocsCoverTheTypes fails when a member of
// a type has no entry or an entry names no member.

// kindSpecs are the spec types of the kinds: what each family decodes.
var kindSpecs = map[string]reflect.Type{
	command.KindKeyRetirement:  reflect.TypeFor[retire.Spec](),
	command.KindCredentialPlan: reflect.TypeFor[credentials.Spec](),
	command.KindSecretUpdate:   reflect.TypeFor[versioned.UpdateSpec](),
	command.KindSecretRestore:  reflect.TypeFor[versioned.RestoreSpec](),
	command.KindSecretDelete:   reflect.TypeFor[versioned.DeleteSpec](),
}

// fieldDoc is one member: what it means, whether it must be present, and
// the rules on its value (for a list or a map: on each element).
type fieldDoc struct {
	doc      string
	required bool
	// constant is the one value the member may hold.
	constant string
	enum     []string
	pattern  string
	// minLength and maxLength bound a string; minimum and maximum a number
	// (both 0: unbounded).
	minLength, maxLength int
	minimum, maximum     int64
	// minItems and maxItems bound a list, or a map's entries.
	minItems, maxItems int
	// keyPattern and keyMaxLength are a map's keys' rule.
	keyPattern   string
	keyMaxLength int
}

// The value rules shared by many members (each is the rule the Go check
// named beside it applies).
const (
	// command.ValidIdentifier.
	identifierPattern = `^[A-Za-z0-9._:-]+$`
	// command.ValidNamespace: a DNS-1123 label.
	namespacePattern = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// command.ValidName: a DNS-1123 subdomain.
	namePattern = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// A Secret data key (validation.IsConfigMapKey).
	dataKeyPattern = `^[-._a-zA-Z0-9]+$`
	// A Kubernetes UID as retire accepts it.
	uidPattern = `^[a-z0-9-]+$`
	// keyring.DigestPrefix and 64 lowercase hex digits.
	digestPattern = `^sha256:[0-9a-f]{64}$`
	// Padded standard base64.
	base64Pattern = `^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$`
	// A label name (validation.IsQualifiedName): an optional DNS subdomain
	// prefix and a name of at most 63 characters.
	labelKeyPattern = `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	// A label value (validation.IsValidLabelValue).
	labelValuePattern = `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// A resourceVersion as the API server hands them out.
	resourceVersionPattern = identifierPattern
)

// kindDocs say what each kind does (explain KIND).
var kindDocs = map[string]string{
	command.KindKeyRetirement: `Retires one inactive key from a keyring held in one Secret (examples/keyring-secret.yaml
documents its format), by get and replace with a compare-and-set on the resourceVersion, leaving
a receipt in the keyring: who retired which key, when, at which generation. Every value the
retirement depends on is bound in the command: the Secret's UID, the data entry, the key and the
digest of its material (keyledger keyring inspect prints them). The identity may get and update
exactly that Secret, nothing more.`,
	command.KindCredentialPlan: `Desired state for an application's generated credentials: Secrets whose passwords keyledger
generates once and never replaces (create if absent; an existing Secret only gains the keys and
labels it lacks), External Secrets leftovers it adopts, and servers (Valkey, NATS) it probes with
the stored password and restarts once when they refuse it. Each run converges to the plan; a
changed plan with the same mutationId is the plan's next version. It runs on every Argo CD sync
as a PreSync hook (keyledger render credentials writes the hook).`,
	command.KindSecretUpdate: `Writes data into a Secret (or creates it, when expectedResourceVersion is ""), after archiving
the state it replaces in an immutable snapshot Secret bound to the live UID and resourceVersion
(keyledger history lists them). The file holds values: it must not be group- or
world-readable (chmod 600).`,
	command.KindSecretRestore: `Writes a retained version's data back to the live Secret, after archiving the state it
replaces, as an update would.`,
	command.KindSecretDelete: `Deletes a Secret loaded at a known resourceVersion, and keyledger's snapshots of it unless
keepHistory is true.`,
}

// envelopeDocs are the members every kind has; kind-specific entries
// (fieldDocs) take precedence.
var envelopeDocs = map[string]fieldDoc{
	"apiVersion": {doc: "The command file format's version.", required: true, constant: command.APIVersion},
	"kind":       {doc: "What the command does: " + strings.Join(command.Kinds, ", ") + ".", required: true},
	"metadata":   {doc: "Who asked for the change and which change it is.", required: true},
	"metadata.requestId": {doc: "The request that asked for the change (a ticket, a pipeline run): journaled, never interpreted.",
		required: true, pattern: identifierPattern, minLength: 1, maxLength: command.MaxIdentifier},
	"metadata.mutationId": {doc: `Names the change and makes it idempotent: the same command run again resumes or replays it
(exit 0 when it is already done); another command with the same mutationId is refused
(mutation-id-reused). Choose a new one for every change.`,
		required: true, pattern: identifierPattern, minLength: 1, maxLength: command.MaxIdentifier},
	"spec": {doc: "What to change: the kind's fields.", required: true},
}

// fieldDocs are each kind's members, by path (member names joined by
// dots; a list's or a map's elements share the list's path).
var fieldDocs = map[string]map[string]fieldDoc{
	command.KindKeyRetirement: {
		"spec.namespace":  {doc: "The keyring Secret's namespace.", required: true, pattern: namespacePattern, maxLength: 63},
		"spec.secretName": {doc: "The keyring Secret's name.", required: true, pattern: namePattern, maxLength: 253},
		"spec.expectedUID": {doc: `The keyring Secret's UID (kubectl get secret NAME -o jsonpath='{.metadata.uid}'): a Secret
deleted and created again under the same name is refused (uid-changed).`,
			required: true, pattern: uidPattern, maxLength: 128},
		"spec.dataKey": {doc: "The Secret's data entry holding the keyring manifest (keyring.json in examples/keyring-secret.yaml).",
			required: true, pattern: dataKeyPattern, maxLength: 253},
		"spec.keyId": {doc: "The id of the key to retire; it must not be the keyring's activeKeyId (key-active).",
			required: true, pattern: identifierPattern, minLength: 1, maxLength: command.MaxIdentifier},
		"spec.retirementId": {doc: "Names this retirement in the receipt the keyring keeps; unique within the keyring.",
			required: true, pattern: identifierPattern, minLength: 1, maxLength: command.MaxIdentifier},
		"spec.expectedMaterialDigest": {doc: `The digest of the key's material as keyledger keyring inspect prints it: the retirement is refused
(material-digest-mismatch) if the key's material is not the one reviewed.`,
			required: true, pattern: digestPattern},
	},
	command.KindCredentialPlan: {
		"metadata.mutationId": {doc: fmt.Sprintf(`The plan's identity for its whole life (for example <namespace>-<owner>-credentials): each run
is journaled as <mutationId>%s<n>, so it has at most %d characters and must not end in
%s<n>. A plan with the same mutationId, namespace and owner but other content is the plan's next
version; under another namespace or owner it is refused.`, store.RunSuffix, credentials.MaxMutationID, store.RunSuffix),
			required: true, pattern: identifierPattern, minLength: 1, maxLength: credentials.MaxMutationID},
		"spec.owner": {doc: "The workload the credentials belong to; the rendered hook objects are named after it.",
			required: true, pattern: namespacePattern, maxLength: 63},
		"spec.namespace": {doc: "The namespace of the Secrets, ExternalSecrets and server pods.", required: true, pattern: namespacePattern, maxLength: 63},
		"spec.secrets": {doc: fmt.Sprintf(`The planned Secrets (at most %d, %d keys in all): each is created if absent, with every
generated value drawn once; an existing one only gains the keys and labels it lacks. A Secret
dropped from the plan is left in place.`, credentials.MaxSecrets, credentials.MaxKeys),
			required: true, minItems: 1, maxItems: credentials.MaxSecrets},
		"spec.secrets.name": {doc: "The Secret's name; unique in the plan.", required: true, pattern: namePattern, maxLength: 253},
		"spec.secrets.labels": {doc: fmt.Sprintf("Labels the Secret carries (at most %d); app.kubernetes.io/instance (Argo CD's) is refused.", credentials.MaxLabelsPerSecret),
			maxItems: credentials.MaxLabelsPerSecret, keyPattern: labelKeyPattern, keyMaxLength: 317, pattern: labelValuePattern, maxLength: 63},
		"spec.secrets.keys": {doc: fmt.Sprintf("The Secret's data keys (at most %d): each generated or a literal value.", credentials.MaxKeysPerSecret),
			required: true, minItems: 1, maxItems: credentials.MaxKeysPerSecret},
		"spec.secrets.keys.name":     {doc: "The data key; unique in its Secret.", required: true, pattern: dataKeyPattern, maxLength: 253},
		"spec.secrets.keys.generate": {doc: "Generate the value once (crypto/rand), when the key is created; give generate or value, not both."},
		"spec.secrets.keys.generate.length": {doc: "How many characters.", required: true,
			minimum: credentials.MinLength, maximum: credentials.MaxLength},
		"spec.secrets.keys.generate.alphabet": {doc: "The characters drawn from.", required: true, enum: credentials.Alphabets()},
		"spec.secrets.keys.value": {doc: `A literal value that is not a secret (a user name): the plan ships in a ConfigMap. Give
generate or value, not both.`},
		"spec.adopt": {doc: `Generator-backed ExternalSecrets that produced planned Secrets: each is deleted with
propagationPolicy Orphan (the Secret stays, with its password) and the named Password
generators are retired. An ExternalSecret of a planned Secret's name is adopted whether listed
or not; one backed by a remote store stops the run.`},
		"spec.adopt.externalSecret": {doc: "The ExternalSecret, named as the planned Secret it writes.", required: true, pattern: namePattern, maxLength: 253},
		"spec.adopt.generators":     {doc: "The Password generators it used, deleted once adopted; each named once in the plan.", pattern: namePattern, maxLength: 253},
		"spec.servers": {doc: `Servers probed with the password their Secret holds (only a pod tied to its live
StatefulSet: owner group and UID, selector, containers); a server that refuses it is restarted
once per cause (its pod deleted) onto the Secret as it is, if that Secret's authorship is proven
or adopted (see spec.repair).`},
		"spec.repair": {doc: "How far the repair of a refusing server may go."},
		"spec.repair.restartOnUnproven": {doc: `Restart a refusing server onto a Secret whose authorship is unproven (anyone who may
create Secrets in the namespace may have written it, with a password they know). Unset or
false: such a server is not restarted and the run refuses secret-unproven.`},
		"spec.servers.protocol":    {doc: "How to probe.", required: true, enum: []string{credentials.ProtocolValkey, credentials.ProtocolNATS}},
		"spec.servers.pod":         {doc: "The server's pod; each pod named once.", required: true, pattern: namePattern, maxLength: 253},
		"spec.servers.port":        {doc: "The port probed at the pod's IP.", required: true, minimum: 1, maximum: 65535},
		"spec.servers.secret":      {doc: "The planned Secret holding the server's password.", required: true, pattern: namePattern, maxLength: 253},
		"spec.servers.userKey":     {doc: "The data key holding the user name (required for nats).", pattern: dataKeyPattern, maxLength: 253},
		"spec.servers.passwordKey": {doc: "The data key holding the password.", required: true, pattern: dataKeyPattern, maxLength: 253},
		"spec.servers.controller": {doc: `The pod's expected controller; a pod with another is never contacted. Unset: the
StatefulSet of the pod's name without its ordinal (cache-0: StatefulSet cache), or none.`},
		"spec.servers.controller.kind": {doc: "StatefulSet, or None for a pod without a controller (then its name is all that ties it to the server).", required: true, enum: []string{"StatefulSet", "None"}},
		"spec.servers.controller.name": {doc: "The controller's name; empty for None.", pattern: namePattern, maxLength: 253},
	},
	command.KindSecretUpdate: {
		"spec.namespace": {doc: "The Secret's namespace.", required: true, pattern: namespacePattern, maxLength: 63},
		"spec.name":      {doc: "The live Secret's name (not a keyledger-h- snapshot).", required: true, pattern: namePattern, maxLength: 253},
		"spec.expectedResourceVersion": {doc: `The resourceVersion the Secret was read at (kubectl get secret NAME -o
jsonpath='{.metadata.resourceVersion}'): the write is refused if the Secret changed since. ""
creates the Secret (version 1, no snapshot). Required, also when empty.`,
			required: true, pattern: `^([A-Za-z0-9._:-]{1,128})?$`},
		"spec.data": {doc: fmt.Sprintf(`Keys to set, each value canonical standard base64 (padded, no white space): the file holds
values, so it must not be group- or world-readable. data and removeKeys name at most %d keys
together.`, versioned.MaxUpdateKeys),
			maxItems: versioned.MaxUpdateKeys, keyPattern: dataKeyPattern, keyMaxLength: 253, pattern: base64Pattern},
		"spec.removeKeys": {doc: "Keys to remove (none when creating); not also in data.", maxItems: versioned.MaxUpdateKeys, pattern: dataKeyPattern, maxLength: 253},
	},
	command.KindSecretRestore: {
		"spec.namespace": {doc: "The Secret's namespace.", required: true, pattern: namespacePattern, maxLength: 63},
		"spec.name":      {doc: "The live Secret's name.", required: true, pattern: namePattern, maxLength: 253},
		"spec.version": {doc: "The retained version to restore (keyledger history lists them); below the live version.",
			required: true, minimum: 1, maximum: versioned.MaxVersion},
		"spec.expectedResourceVersion": {doc: "The resourceVersion the live Secret was read at.", required: true, pattern: resourceVersionPattern, minLength: 1, maxLength: 128},
	},
	command.KindSecretDelete: {
		"spec.namespace":               {doc: "The Secret's namespace.", required: true, pattern: namespacePattern, maxLength: 63},
		"spec.name":                    {doc: "The live Secret's name.", required: true, pattern: namePattern, maxLength: 253},
		"spec.expectedResourceVersion": {doc: "The resourceVersion the live Secret was read at.", required: true, pattern: resourceVersionPattern, minLength: 1, maxLength: 128},
		"spec.keepHistory": {doc: `Whether keyledger's snapshots of the Secret stay (true) or are deleted first (false).
Required: a destructive command states whether the history goes too.`, required: true},
	},
}

// docOf is the entry of kind's member at path, and whether there is one.
func docOf(kind, path string) (fieldDoc, bool) {
	if d, ok := fieldDocs[kind][path]; ok {
		return d, true
	}
	d, ok := envelopeDocs[path]
	return d, ok
}

// documentType is the Go type a kind's command file decodes into.
func documentType(kind string) reflect.Type {
	spec := kindSpecs[kind]
	return reflect.StructOf([]reflect.StructField{
		{Name: "APIVersion", Type: reflect.TypeFor[string](), Tag: `json:"apiVersion"`},
		{Name: "Kind", Type: reflect.TypeFor[string](), Tag: `json:"kind"`},
		{Name: "Metadata", Type: reflect.TypeFor[command.Metadata](), Tag: `json:"metadata"`},
		{Name: "Spec", Type: spec, Tag: `json:"spec"`},
	})
}

// member is one JSON member of a struct type.
type member struct {
	name string
	typ  reflect.Type
}

// members are t's JSON members in field order (t a struct; embedded
// structs are not used by command types).
func members(t reflect.Type) []member {
	var out []member
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, member{name: name, typ: f.Type})
	}
	return out
}

// elem is t without pointers, and the element type of a list or a map
// (what a member path names beyond it).
func elem(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		return elem(t.Elem())
	}
	return t
}

// walkMembers calls visit for every member path of t, parents first.
func walkMembers(t reflect.Type, prefix string, visit func(path string, typ reflect.Type)) {
	t = elem(t)
	if t.Kind() != reflect.Struct {
		return
	}
	for _, m := range members(t) {
		path := m.name
		if prefix != "" {
			path = prefix + "." + m.name
		}
		visit(path, m.typ)
		walkMembers(m.typ, path, visit)
	}
}

// typeName is how explain names a member's JSON type.
func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		return "object"
	case reflect.Slice:
		return "[]" + typeName(t.Elem())
	case reflect.Map:
		return "map[string]" + typeName(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return t.Kind().String()
}

// rules says a member's rules in words, for explain.
func (d fieldDoc) rules() []string {
	var out []string
	if d.constant != "" {
		out = append(out, fmt.Sprintf("must be %q", d.constant))
	}
	if len(d.enum) > 0 {
		out = append(out, "one of "+strings.Join(d.enum, ", "))
	}
	if d.pattern != "" {
		out = append(out, "matches "+d.pattern)
	}
	switch {
	case d.minLength > 0 && d.maxLength > 0:
		out = append(out, fmt.Sprintf("%d to %d characters", d.minLength, d.maxLength))
	case d.maxLength > 0:
		out = append(out, fmt.Sprintf("at most %d characters", d.maxLength))
	}
	if d.minimum != 0 || d.maximum != 0 {
		out = append(out, fmt.Sprintf("from %d to %d", d.minimum, d.maximum))
	}
	switch {
	case d.minItems > 0 && d.maxItems > 0:
		out = append(out, fmt.Sprintf("%d to %d entries", d.minItems, d.maxItems))
	case d.maxItems > 0:
		out = append(out, fmt.Sprintf("at most %d entries", d.maxItems))
	}
	if d.keyPattern != "" {
		out = append(out, "keys match "+d.keyPattern)
	}
	return out
}

// kindNames are the kinds, in the envelope's order.
func kindNames() []string { return slices.Clone(command.Kinds) }
