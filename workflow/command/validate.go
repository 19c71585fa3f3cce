package command

import (
	"errors"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxIdentifier is the longest identifier ValidIdentifier accepts.
const MaxIdentifier = 128

// ValidIdentifier checks a requestId, mutationId or similar: 1 to 128
// characters of [A-Za-z0-9._:-]. The error states the rule, not the value;
// wrap it with Invalid(field, err.Error()).
func ValidIdentifier(s string) error {
	switch {
	case s == "":
		return errors.New("must not be empty")
	case len(s) > MaxIdentifier:
		return errors.New("must be at most 128 characters")
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '-') {
			return errors.New("must contain only the characters A-Z a-z 0-9 . _ : -")
		}
	}
	return nil
}

// ValidName checks a Secret or ConfigMap name: a DNS-1123 subdomain of at
// most 253 characters. The error states the rule, not the value.
func ValidName(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if len(validation.IsDNS1123Subdomain(s)) > 0 {
		return errors.New("must be a DNS-1123 subdomain: at most 253 characters of a-z 0-9 - ., starting and ending with a-z or 0-9")
	}
	return nil
}

// ValidNamespace checks a namespace name: a DNS-1123 label of at most 63
// characters. The error states the rule, not the value.
func ValidNamespace(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if len(validation.IsDNS1123Label(s)) > 0 {
		return errors.New("must be a DNS-1123 label: at most 63 characters of a-z 0-9 -, starting and ending with a-z or 0-9")
	}
	return nil
}
