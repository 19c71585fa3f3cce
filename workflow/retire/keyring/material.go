package keyring

import (
	"fmt"
	"log/slog"
)

const redacted = "[redacted]"

// Material is a key's raw secret bytes. Every way of printing it (fmt verbs,
// encoding/json, encoding.TextMarshaler, log/slog) yields "[redacted]"; only
// [Manifest.Encode] writes the bytes, as base64.
type Material []byte

// String returns "[redacted]".
func (Material) String() string { return redacted }

// GoString returns "[redacted]", for %#v.
func (Material) GoString() string { return redacted }

// Format writes "[redacted]" for every verb and flag (%v, %+v, %#v, %s, %x, %q, ...).
func (Material) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// MarshalJSON returns the JSON string "[redacted]".
func (Material) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText returns "[redacted]".
func (Material) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// LogValue returns "[redacted]" for log/slog.
func (Material) LogValue() slog.Value { return slog.StringValue(redacted) }

// Wipe overwrites the bytes with zeros.
func (m Material) Wipe() { clear(m) }

// clone returns a copy that shares no memory with m.
func (m Material) clone() Material {
	if m == nil {
		return nil
	}
	return append(Material(make([]byte, 0, len(m))), m...)
}
