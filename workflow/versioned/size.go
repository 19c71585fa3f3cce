package versioned

import (
	"bytes"

	corev1 "k8s.io/api/core/v1"
)

// MaxSecretBytes is the size guard: a live Secret keyledger would write is
// refused when its estimated size exceeds it.
const MaxSecretBytes = 1 << 20

// The versioning contract's estimate of a value as written: its UTF-8
// bytes times 1.4 (textFactorNum / textFactorDen).
const (
	textFactorNum = 14
	textFactorDen = 10
)

// EstimateSize is the contract's estimate of s as written, for an update
// that brings new data (text input): the UTF-8 bytes of every value (the
// decoded bytes the command carries) times 1.4, rounded up, plus every key,
// label and annotation, the name, namespace and type. It is compared with
// MaxSecretBytes. Restores and updates that bring no new bytes are
// measured by DataSize instead.
func EstimateSize(s *corev1.Secret) int64 {
	var n, values int64
	for k, v := range s.Data {
		n += int64(len(k))
		values += int64(len(v))
	}
	n += (values*textFactorNum + textFactorDen - 1) / textFactorDen
	for k, v := range s.Labels {
		n += int64(len(k) + len(v))
	}
	for k, v := range s.Annotations {
		n += int64(len(k) + len(v))
	}
	n += int64(len(s.Name) + len(s.Namespace) + len(s.Type))
	return n
}

// DataSize is what the API server counts against its Secret limit: every
// key and raw value, as stored. A restore writes data the API server
// accepted before, and an update that brings no new bytes (preservesData)
// only shrinks or keeps it, so both are measured by it.
func DataSize(data map[string][]byte) int64 {
	var n int64
	for k, v := range data {
		n += int64(len(k) + len(v))
	}
	return n
}

// preservesData reports whether next holds no byte that prev does not:
// every key of next is in prev with the same value (keys may be removed).
func preservesData(prev, next map[string][]byte) bool {
	for k, v := range next {
		w, ok := prev[k]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}
