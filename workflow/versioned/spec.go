package versioned

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow/command"
)

// UpdateSpec is a SecretUpdate's spec. ExpectedResourceVersion must be
// present: "" creates the Secret (version 1, no snapshot); anything else is
// the resourceVersion the operator loaded. Data values are canonical
// base64; RemoveKeys are deleted.
type UpdateSpec struct {
	Namespace               string            `json:"namespace"`
	Name                    string            `json:"name"`
	ExpectedResourceVersion *string           `json:"expectedResourceVersion"`
	Data                    map[string]string `json:"data,omitempty"`
	RemoveKeys              []string          `json:"removeKeys,omitempty"`
}

// RestoreSpec is a SecretRestore's spec: write retained Version's data back
// to the live Secret loaded at ExpectedResourceVersion.
type RestoreSpec struct {
	Namespace               string `json:"namespace"`
	Name                    string `json:"name"`
	Version                 int64  `json:"version"`
	ExpectedResourceVersion string `json:"expectedResourceVersion"`
}

// DeleteSpec is a SecretDelete's spec. KeepHistory must be present: a
// destructive command states whether the history goes too.
type DeleteSpec struct {
	Namespace               string `json:"namespace"`
	Name                    string `json:"name"`
	ExpectedResourceVersion string `json:"expectedResourceVersion"`
	KeepHistory             *bool  `json:"keepHistory"`
}

// Command is a decoded, validated SecretUpdate, SecretRestore or
// SecretDelete: Kind says which of Update, Restore and Delete is set.
type Command struct {
	Kind     string
	Metadata command.Metadata
	// Digest is the canonical command digest journaled with the preparation.
	// A command decoded by Load may hold it pending (see resolveDigest):
	// it is then "" until the engine resolves it, before the preparation.
	Digest string
	// pending is the digest still being computed (Load's decode): the
	// PBKDF2 verifier of an update's values runs while the permission check
	// and the journal connect do.
	pending *pendingDigest

	Namespace, Name         string
	ExpectedResourceVersion string

	// Update: the decoded values by key and the keys to remove.
	Data       map[string][]byte
	RemoveKeys []string
	// Restore: the version to restore.
	Version int64
	// Delete: whether the snapshots stay.
	KeepHistory bool
}

// Create reports whether this is a SecretUpdate creating a new Secret.
func (c *Command) Create() bool {
	return c.Kind == command.KindSecretUpdate && c.ExpectedResourceVersion == ""
}

// Decode reads a SecretUpdate, SecretRestore or SecretDelete. These
// commands write Secrets and an update carries values, so the file must not
// grant group or world permissions (checked on the mode of the descriptor
// that was read). Errors are *command.FileError or *command.InvalidError,
// naming fields, never values.
func Decode(f *command.File) (*Command, error) {
	cmd, err := decode(f, false)
	if err != nil {
		return nil, err
	}
	return cmd, nil
}

// decode is Decode; with deferDigest an update's digest is left pending
// (computed in the background, resolved by resolveDigest), after every
// check of the command has passed.
func decode(f *command.File, deferDigest bool) (*Command, error) {
	if err := f.RequirePrivate(); err != nil {
		return nil, err
	}
	switch f.Envelope.Kind {
	case command.KindSecretUpdate:
		return decodeUpdate(f, deferDigest)
	case command.KindSecretRestore:
		return decodeRestore(f)
	case command.KindSecretDelete:
		return decodeDelete(f)
	default:
		return nil, command.Invalid("kind", "want "+command.KindSecretUpdate+", "+command.KindSecretRestore+" or "+command.KindSecretDelete)
	}
}

func decodeUpdate(f *command.File, deferDigest bool) (*Command, error) {
	doc, err := command.Decode[UpdateSpec](f)
	if err != nil {
		return nil, err
	}
	s := doc.Spec
	if err := checkUpdateSpec(s); err != nil {
		return nil, err
	}
	data, err := decodeData(s.Data)
	if err != nil {
		return nil, err
	}
	if err := checkRemoveKeys(s.RemoveKeys, data); err != nil {
		return nil, err
	}
	cmd := &Command{
		Kind: doc.Kind, Metadata: doc.Metadata, Namespace: s.Namespace, Name: s.Name,
		ExpectedResourceVersion: *s.ExpectedResourceVersion, Data: data, RemoveKeys: slices.Clone(s.RemoveKeys),
	}
	if deferDigest {
		cmd.pending = startDigest(func() (string, error) { return updateDigest(doc, data) })
		return cmd, nil
	}
	if cmd.Digest, err = updateDigest(doc, data); err != nil {
		return nil, err
	}
	return cmd, nil
}

// checkUpdateSpec checks an update's shape before any value is decoded: its
// target, its expectedResourceVersion (present; "" creates), that it
// changes something, removes nothing when creating, and names at most
// MaxUpdateKeys keys.
func checkUpdateSpec(s UpdateSpec) error {
	if err := validTarget(s.Namespace, s.Name); err != nil {
		return err
	}
	if s.ExpectedResourceVersion == nil {
		return command.Required("spec.expectedResourceVersion")
	}
	if *s.ExpectedResourceVersion != "" {
		if err := validResourceVersion(*s.ExpectedResourceVersion); err != nil {
			return command.Invalid("spec.expectedResourceVersion", err.Error())
		}
	}
	if len(s.Data) == 0 && len(s.RemoveKeys) == 0 {
		return command.Invalid("spec", "want data or removeKeys: an update that changes nothing is not a version")
	}
	if *s.ExpectedResourceVersion == "" && len(s.RemoveKeys) > 0 {
		return command.Invalid("spec.removeKeys", "must be empty when creating (expectedResourceVersion is empty)")
	}
	if n := len(s.Data) + len(s.RemoveKeys); n > MaxUpdateKeys {
		// Checked before any value is decoded or any verifier computed.
		return command.Invalid("spec", fmt.Sprintf("at most %d keys in data and removeKeys together (MaxUpdateKeys), got %d", MaxUpdateKeys, n))
	}
	return nil
}

// decodeData decodes spec.data's values, in key order (the first bad key
// is the one named): each key valid, each value canonical standard base64.
func decodeData(encoded map[string]string) (map[string][]byte, error) {
	data := make(map[string][]byte, len(encoded))
	keys := make([]string, 0, len(encoded))
	for k := range encoded {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		field := dataField(k)
		if err := validKey(k); err != nil {
			return nil, command.Invalid(field, err.Error())
		}
		v, err := base64.StdEncoding.Strict().DecodeString(encoded[k])
		if err != nil || base64.StdEncoding.EncodeToString(v) != encoded[k] {
			return nil, command.Invalid(field, "want canonical standard base64 (padded, no white space)")
		}
		data[k] = v
	}
	return data, nil
}

// checkRemoveKeys checks spec.removeKeys: each key valid, named once, and
// not also set in data.
func checkRemoveKeys(remove []string, data map[string][]byte) error {
	for i, k := range remove {
		field := fmt.Sprintf("spec.removeKeys[%d]", i)
		if err := validKey(k); err != nil {
			return command.Invalid(field, err.Error())
		}
		if slices.Contains(remove[:i], k) {
			return command.Invalid(field, "duplicate key")
		}
		if _, ok := data[k]; ok {
			return command.Invalid(field, "key is also set in spec.data")
		}
	}
	return nil
}

// pendingDigest is a command digest being computed in the background.
type pendingDigest struct {
	done  chan struct{}
	value string
	err   error
}

func startDigest(compute func() (string, error)) *pendingDigest {
	p := &pendingDigest{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.value, p.err = compute()
	}()
	return p
}

// resolveDigest waits for a pending digest and sets Digest (the plan's
// workflow.Plan.Digest): called once, before the operation is prepared and
// before any decision reads Digest.
func (c *Command) resolveDigest() (string, error) {
	if p := c.pending; p != nil {
		<-p.done
		if p.err != nil {
			return "", p.err
		}
		c.Digest, c.pending = p.value, nil
	}
	return c.Digest, nil
}

// MaxUpdateKeys bounds the keys one SecretUpdate names (data and
// removeKeys together). It keeps every journal record the update produces
// within the journal's 16 KiB detail limit (the preparation lists the key
// names, each at most 253 characters) with room to spare.
const MaxUpdateKeys = 60

// VerifierIterations is the PBKDF2-HMAC-SHA256 work spent on a
// SecretUpdate's values before they enter its command digest.
const VerifierIterations = 100_000

// updateDigest is the command digest of a SecretUpdate. The digest is
// journaled, and a plain digest over a document holding a low-entropy value
// (a password) would let anyone who reads the journal confirm a guess
// offline, since every other member of the command is journaled too. So the
// values enter the digest only through one verifier: PBKDF2-HMAC-SHA256 at
// VerifierIterations over all of them (each key and value, length-prefixed,
// in key order), salted with the mutation ID. The digest still changes with
// any value (a reused mutationId with other values is refused); a reader
// pays 100,000 HMACs for every guess, and a guess must name every value at
// once. One derivation whatever the number of keys: decoding the largest
// valid command costs one PBKDF2 (about 60 ms of CPU), never one per key.
func updateDigest(doc *command.Document[UpdateSpec], data map[string][]byte) (string, error) {
	masked := *doc
	masked.Spec.Data = nil
	verifier, err := valuesVerifier(doc.Metadata.MutationID, data)
	if err != nil {
		return "", err
	}
	// The verifier stands where the values were: the keys stay visible in
	// the digest's input, the values never.
	masked.Spec.Data = map[string]string{"": verifier}
	if len(data) == 0 {
		masked.Spec.Data = nil
	}
	return masked.Digest()
}

func valuesVerifier(mutationID string, data map[string][]byte) (string, error) {
	keys := sortedKeys(data)
	var input []byte
	for _, k := range keys {
		input = binary.BigEndian.AppendUint32(input, uint32(len(k))) //nolint:gosec // G115: a key of a command file of at most 64 KiB
		input = append(input, k...)
		input = binary.BigEndian.AppendUint32(input, uint32(len(data[k]))) //nolint:gosec // G115: a value of a command file of at most 64 KiB
		input = append(input, data[k]...)
	}
	salt := []byte("keyledger.dev/secret-update/v2\x00" + mutationID)
	dk, err := pbkdf2.Key(sha256.New, string(input), salt, VerifierIterations, sha256.Size)
	if err != nil {
		return "", fmt.Errorf("computing the command digest: %w", err)
	}
	return "pbkdf2-sha256:" + hex.EncodeToString(dk) + ":" + strings.Join(keys, ","), nil
}

func decodeRestore(f *command.File) (*Command, error) {
	doc, err := command.Decode[RestoreSpec](f)
	if err != nil {
		return nil, err
	}
	s := doc.Spec
	if err := validTarget(s.Namespace, s.Name); err != nil {
		return nil, err
	}
	if s.Version < 1 || s.Version > MaxVersion {
		return nil, command.Invalid("spec.version", fmt.Sprintf("want a version from 1 to %d", MaxVersion))
	}
	if err := requiredResourceVersion(s.ExpectedResourceVersion); err != nil {
		return nil, err
	}
	digest, err := doc.Digest()
	if err != nil {
		return nil, err
	}
	return &Command{
		Kind: doc.Kind, Metadata: doc.Metadata, Digest: digest, Namespace: s.Namespace, Name: s.Name,
		ExpectedResourceVersion: s.ExpectedResourceVersion, Version: s.Version,
	}, nil
}

func decodeDelete(f *command.File) (*Command, error) {
	doc, err := command.Decode[DeleteSpec](f)
	if err != nil {
		return nil, err
	}
	s := doc.Spec
	if err := validTarget(s.Namespace, s.Name); err != nil {
		return nil, err
	}
	if err := requiredResourceVersion(s.ExpectedResourceVersion); err != nil {
		return nil, err
	}
	if s.KeepHistory == nil {
		return nil, command.Required("spec.keepHistory")
	}
	digest, err := doc.Digest()
	if err != nil {
		return nil, err
	}
	return &Command{
		Kind: doc.Kind, Metadata: doc.Metadata, Digest: digest, Namespace: s.Namespace, Name: s.Name,
		ExpectedResourceVersion: s.ExpectedResourceVersion, KeepHistory: *s.KeepHistory,
	}, nil
}

func validTarget(namespace, name string) error {
	for _, c := range []struct {
		field, value string
		valid        func(string) error
	}{
		{"spec.namespace", namespace, command.ValidNamespace},
		{"spec.name", name, command.ValidName},
	} {
		if c.value == "" {
			return command.Required(c.field)
		}
		if err := c.valid(c.value); err != nil {
			return command.Invalid(c.field, err.Error())
		}
	}
	if strings.HasPrefix(name, kube.SnapshotPrefix) {
		return command.Invalid("spec.name", "names starting with "+kube.SnapshotPrefix+" are history snapshots, never live Secrets")
	}
	return nil
}

func requiredResourceVersion(rv string) error {
	if rv == "" {
		return command.Required("spec.expectedResourceVersion")
	}
	if err := validResourceVersion(rv); err != nil {
		return command.Invalid("spec.expectedResourceVersion", err.Error())
	}
	return nil
}

// validResourceVersion accepts an opaque resourceVersion as the API server
// hands them out: 1 to 128 characters of [A-Za-z0-9._:-].
func validResourceVersion(rv string) error {
	if err := command.ValidIdentifier(rv); err != nil {
		return errors.New("want a resourceVersion as read from the API server (" + err.Error() + ")")
	}
	return nil
}

func validKey(k string) error {
	if len(validation.IsConfigMapKey(k)) > 0 {
		return errors.New("not a valid Secret data key (at most 253 characters of A-Z a-z 0-9 - _ .)")
	}
	return nil
}

func dataField(k string) string {
	return fmt.Sprintf("spec.data[%q]", k)
}
