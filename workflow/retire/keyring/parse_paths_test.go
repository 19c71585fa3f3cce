package keyring_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/workflow/retire/keyring"
)

// requireSamePaths checks Parse's promise about its fast path on data:
// ParseCanonical accepts data only when the strict decoder does, with the
// same manifest, and Parse returns what the strict decoder returns.
func requireSamePaths(t *testing.T, data []byte) (fast bool) {
	t.Helper()
	strict, strictErr := keyring.ParseStrict(data)
	canonical := keyring.ParseCanonical(data)
	if canonical != nil {
		require.NoError(t, strictErr, "the fast path accepted what the strict decoder refuses")
		require.Equal(t, strict, canonical)
	}
	got, err := keyring.Parse(data)
	require.Equal(t, strict, got)
	require.Equal(t, strictErr, err)
	return canonical != nil
}

// TestParsePathsAgree feeds both paths a canonical manifest and the
// leniencies of encoding/json that the fast path must not let through:
// each is refused by the strict decoder, and the fast path gives way to
// it (the strict decoder's reason is what Parse returns).
func TestParsePathsAgree(t *testing.T) {
	good := string(standard().Encode())
	edits := map[string]func(string) string{
		"member name in another case": func(s string) string { return strings.Replace(s, `"schema"`, `"Schema"`, 1) },
		"duplicate member": func(s string) string {
			return strings.Replace(s, `{"schema":`, `{"generation":9,"schema":`, 1)
		},
		"unknown member": func(s string) string { return strings.Replace(s, `{"schema":`, `{"extra":1,"schema":`, 1) },
		"missing member": func(s string) string {
			return strings.Replace(s, `"activeKeyId":"k-2026-08",`, ``, 1)
		},
		"whitespace":          func(s string) string { return strings.Replace(s, `{"schema":`, `{ "schema":`, 1) },
		"trailing data":       func(s string) string { return s + `{}` },
		"generation as float": func(s string) string { return strings.Replace(s, `"generation":4,`, `"generation":4.0,`, 1) },
		"generation exponent": func(s string) string { return strings.Replace(s, `"generation":4,`, `"generation":4e0,`, 1) },
		"keys null":           func(s string) string { return strings.Replace(s, `"keys":[`, `"keys":null,"x":[`, 1) },
		"retirements null": func(s string) string {
			head, _, _ := strings.Cut(s, `"retirements":`)
			return head + `"retirements":null}`
		},
		"escaped character":   func(s string) string { return strings.Replace(s, `"k-2026-07"`, `"k-2026\u002d07"`, 1) },
		"invalid utf-8":       func(s string) string { return strings.Replace(s, `"k-2026-07"`, "\"k-2026\xff07\"", 1) },
		"material line break": func(s string) string { return insertInMaterial(s, `\n`) },
		"material carriage":   func(s string) string { return insertInMaterial(s, `\r`) },
		"material unpadded":   func(s string) string { return strings.Replace(s, `="}`, `"}`, 1) },
		"truncated":           func(s string) string { return s[:len(s)/2] },
		"not an object":       func(string) string { return `[]` },
		"empty":               func(string) string { return `` },
		"second manifest":     func(s string) string { return s + s },
		"member order swapped": func(s string) string {
			return strings.Replace(s, `"generation":4,"activeKeyId":"k-2026-08"`, `"activeKeyId":"k-2026-08","generation":4`, 1)
		},
	}
	require.True(t, requireSamePaths(t, []byte(good)), "the canonical manifest takes the fast path")
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			data := []byte(edit(good))
			require.False(t, bytes.Equal(data, []byte(good)), "the edit changed nothing") // never printed: it holds material
			require.False(t, requireSamePaths(t, data), "an edited manifest took the fast path")
			_, err := keyring.Parse(data)
			require.Error(t, err)
		})
	}
}

// insertInMaterial puts esc (a JSON escape) into the first material's
// base64, which encoding/json's base64 decoding skips and the strict
// decoder refuses.
func insertInMaterial(s, esc string) string {
	i := strings.Index(s, `"material":"`) + len(`"material":"`) + 4
	return s[:i] + esc + s[i:]
}

// FuzzParsePaths checks the same promise on any input.
func FuzzParsePaths(f *testing.F) {
	f.Add(standard().Encode())
	f.Add(bytes.ToUpper(standard().Encode()))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > keyring.MaxManifestBytes {
			return
		}
		requireSamePaths(t, data)
	})
}
