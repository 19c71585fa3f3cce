package versioned

import (
	"bytes"

	corev1 "k8s.io/api/core/v1"
)

// MaxSecretBytes is the size guard: a live Secret keyledger would write is
// refused when its estimated size exceeds it.
const MaxSecretBytes = 1 << 20

// EstimateSize estimates the size of s as written: every value's raw bytes
// times 4/3 (its base64 form, rounded up to whole 4-byte groups), plus every
// key, label and annotation, the name, namespace and type. It is an
// estimate in the sense of the guard, deliberately conservative: the API
// server's own limit counts raw bytes.
func EstimateSize(s *corev1.Secret) int64 {
	var n int64
	for k, v := range s.Data {
		n += int64(len(k)) + base64Len(len(v))
	}
	for k, v := range s.Labels {
		n += int64(len(k) + len(v))
	}
	for k, v := range s.Annotations {
		n += int64(len(k) + len(v))
	}
	n += int64(len(s.Name) + len(s.Namespace) + len(s.Type))
	return n
}

func base64Len(raw int) int64 { return int64((raw + 2) / 3 * 4) }

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
