package versioned

import (
	"errors"
	"strconv"
)

// Reasons a version counter is refused.
const (
	ReasonVersionMalformed = "version-malformed"
	ReasonVersionExhausted = "version-exhausted"
)

// errMalformed and errExhausted carry those reasons.
var (
	errMalformed = errors.New(ReasonVersionMalformed)
	errExhausted = errors.New(ReasonVersionExhausted)
)

// CurrentVersion reads a live Secret's version counter from its annotation
// value (present reports whether the annotation exists). An adopted Secret
// without a counter, or with "0", is logically version 1. Anything but a
// canonical decimal integer from 0 to MaxVersion is malformed; MaxVersion
// itself is exhausted, since no next version exists.
func CurrentVersion(value string, present bool) (int64, error) {
	if !present || value == "0" {
		return 1, nil
	}
	n, err := parseCanonical(value, MaxVersion)
	if err != nil {
		return 0, errMalformed
	}
	if n == MaxVersion {
		return 0, errExhausted
	}
	return n, nil
}

// parseCanonical parses a decimal integer from 1 to max written without
// sign, leading zeros, white space or any other character.
func parseCanonical(s string, max int64) (int64, error) {
	if s == "" || len(s) > 19 || s[0] == '0' {
		return 0, errMalformed
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return 0, errMalformed
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > max {
		return 0, errMalformed
	}
	return n, nil
}
