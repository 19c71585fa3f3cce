package retire

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/retire/keyring"
)

// Spec is a KeyRetirement command's spec: it binds everything exactly.
type Spec struct {
	Namespace              string `json:"namespace"`
	SecretName             string `json:"secretName"`
	ExpectedUID            string `json:"expectedUID"`
	DataKey                string `json:"dataKey"`
	KeyID                  string `json:"keyId"`
	RetirementID           string `json:"retirementId"`
	ExpectedMaterialDigest string `json:"expectedMaterialDigest"`
}

// Command is a decoded, validated KeyRetirement.
type Command struct {
	Metadata command.Metadata
	Spec     Spec
	// Digest is the canonical command digest journaled with the preparation.
	Digest string
}

// Decode reads a KeyRetirement from a command file. Errors are
// *command.InvalidError naming the field.
func Decode(f *command.File) (*Command, error) {
	doc, digest, err := command.DecodeKind[Spec](f, command.KindKeyRetirement)
	if err != nil {
		return nil, err
	}
	s := doc.Spec
	checks := []struct {
		field, value string
		valid        func(string) error
	}{
		{"spec.namespace", s.Namespace, command.ValidNamespace},
		{"spec.secretName", s.SecretName, command.ValidName},
		{"spec.expectedUID", s.ExpectedUID, validUID},
		{"spec.dataKey", s.DataKey, validDataKey},
		{"spec.keyId", s.KeyID, command.ValidIdentifier},
		{"spec.retirementId", s.RetirementID, command.ValidIdentifier},
		{"spec.expectedMaterialDigest", s.ExpectedMaterialDigest, validDigest},
	}
	for _, c := range checks {
		if c.value == "" {
			return nil, command.Required(c.field)
		}
		if err := c.valid(c.value); err != nil {
			return nil, command.Invalid(c.field, err.Error())
		}
	}
	return &Command{Metadata: doc.Metadata, Spec: s, Digest: digest}, nil
}

func validUID(s string) error {
	if len(s) > 128 {
		return fmt.Errorf("longer than 128 characters")
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return fmt.Errorf("must be a Kubernetes UID (lowercase hex and dashes)")
		}
	}
	return nil
}

func validDataKey(s string) error {
	if errs := validation.IsConfigMapKey(s); len(errs) > 0 {
		return fmt.Errorf("not a valid Secret data key")
	}
	return nil
}

func validDigest(s string) error {
	const hexLen = 64
	if len(s) != len(keyring.DigestPrefix)+hexLen || s[:len(keyring.DigestPrefix)] != keyring.DigestPrefix {
		return fmt.Errorf("must be %q followed by 64 lowercase hex digits", keyring.DigestPrefix)
	}
	for _, r := range s[len(keyring.DigestPrefix):] {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return fmt.Errorf("must be %q followed by 64 lowercase hex digits", keyring.DigestPrefix)
		}
	}
	return nil
}
