package command

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// agreeTargets are the types both decoders are asked to decode into: the
// fuzz target's document, the envelope (a raw spec), and a spec of the
// kinds the fuzz document lacks (a pointer to a struct, a *bool, an int64,
// a raw member below the top). DecodeStrict decodes no other kinds (see
// supported), so targets with Unmarshalers, ",string" or embedded structs
// are gone; TestUnsupportedTypes holds that they are refused.
func agreeTargets() map[string]func() any {
	type nested struct {
		Name  string          `json:"name"`
		Size  int64           `json:"size"`
		Keep  *bool           `json:"keep,omitempty"`
		Inner *testSecret     `json:"inner,omitempty"`
		Raw   json.RawMessage `json:"raw,omitempty"`
	}
	return map[string]func() any{
		"document": func() any { return new(testDoc) },
		"envelope": func() any { return new(Envelope) },
		"nested":   func() any { return new(nested) },
	}
}

// hostileInputs are documents made to find where two strict decoders could
// part: several problems in one document (the first one counts), problems
// hidden behind type errors, escapes, odd names, big and odd numbers,
// nulls everywhere, depth at and past the bound.
var hostileInputs = []string{
	doc(`{"keyId":"k1","extra":{"a":[1,{"b":null}]},"raw":[{"x":1}]}`),
	doc(`{"count":"x","keyID":"k"}`),
	doc(`{"keyID":"k","count":"x"}`),
	doc(`{"count":"x","count":1}`),
	doc(`{"count":1,"count":"x"}`),
	doc(`{"secrets":[{"name":1},{"nam":"a"}]}`),
	doc(`{"secrets":[{"nam":"a"},{"name":1}]}`),
	doc(`{"secrets":[{"name":"a","data":{"k":1,"k":2}},{"bad":1}]}`),
	doc(`{"count":1,"enabled":"yes","ratio":"1","note":2,"extra":{"k":"v","k":"w"}}`),
	doc(`{"count":300}`), doc(`{"count":-0}`), doc(`{"count":1e2}`), doc(`{"count":0.0}`), doc(`{"count":18446744073709551616}`),
	doc(`{"ratio":1e309}`), doc(`{"ratio":-1e-400}`), doc(`{"ratio":"NaN"}`),
	doc(`{"extra":123456789012345678901234567890}`), doc(`{"extra":[1e999,"x"]}`),
	doc(`{"secrets":[{"keys":[{"version":2147483648}]}]}`),
	doc(`{"secrets":[{"keys":[{"version":-2147483649}]}]}`),
	doc(`{"note":null,"extra":null,"raw":null,"keyId":null}`),
	doc(`{"secrets":[null]}`), doc(`{"secrets":[{"keys":null}]}`), doc(`{"secrets":[{"data":{"k":null}}]}`),
	`{"metadata":{"requestId":null}}`, `{"spec":null}`, `{"apiVersion":null,"kind":null}`,
	doc(`{"key\u0049d":"a"}`), doc(`{"keyid":"a"}`), doc(`{"KeyId":"a"}`), doc(`{"":"a"}`),
	doc(`{"tls.crt":1}`), doc(`{"secrets":[{"data":{"tls.crt":"v","tls.crt":"w"}}]}`),
	doc(`{"secrets":[{"data":{"` + strings.Repeat("n", 80) + `":1,"` + strings.Repeat("n", 80) + `":2}}]}`),
	doc(`{"keyId":"\u0000"}`), doc(`{"keyId":"\ud800\ud800"}`), doc(`{"keyId":"\udbff\udfff"}`), doc(`{"keyId":"\\ud800"}`),
	doc(`{"keyId":"a` + "\xed\xa0\x80" + `"}`), doc(`{"keyId":"` + "\xc0\xaf" + `"}`),
	"\xef\xbb\xbf" + doc(`{}`), doc(`{}`) + "\x00", doc(`{}`) + " \n", doc(`{}`) + "\xff",
	doc(`{"keyId":"a"`), doc(`{"keyId":"a",}`), doc(`{"keyId" "a"}`), doc(`{'keyId':"a"}`), doc(`{"keyId":tru}`),
	doc(`{"extra":` + strings.Repeat("[", 30) + strings.Repeat("]", 30) + `}`),
	doc(`{"extra":` + strings.Repeat("[", 31) + strings.Repeat("]", 31) + `}`),
	doc(`{"extra":` + strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat("}", 40) + `}`),
	doc(`{"raw":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`),
	doc(`{"secrets":{"name":"a"},"keyID":"x"}`), doc(`{"secrets":"a"}`), doc(`{"secrets":[[]]}`), doc(`{"secrets":[{"keys":[{"name":["x"]}]}]}`),
	`{"spec":{"at":"2024-01-02T03:04:05Z","port":"80","bytes":"aGk="}}`,
	`{"spec":{"at":"soon","port":"80"}}`, `{"spec":{"port":" 80"}}`, `{"spec":{"port":"80","bytes":"!!"}}`, `{"spec":{"port":true}}`,
	`{"spec":{"at":null,"port":null,"bytes":null}}`, `{"spec":{"port":"x","nope":1}}`, `{"spec":{"nope":1,"port":"x"}}`,
	`{"name":"a","size":1}`, `{"Common":{}}`, `{"keep":true,"size":9223372036854775808}`, `{"keep":1}`, `{"keep":null,"inner":{"data":{"k":null}}}`, `{"Name":"a"}`, `{"inner":{"name":"a","keys":[{"version":"1"}]}}`, `{"inner":null,"size":null}`,
	`{"raw":{"a":1,"a":2}}`, `{"size":1.0}`,
	`[]`, `"x"`, `1`, `null`, ``, ` `, `{`, `}`, `{"a"}`, `{} x`, `{}{}`,
}

// readCorpus returns the inputs of a fuzz target's corpus directory.
func readCorpus(t *testing.T, dir string) [][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var out [][]byte
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		for _, line := range strings.Split(string(raw), "\n")[1:] {
			lit, ok := strings.CutPrefix(strings.TrimSpace(line), "[]byte(")
			if !ok {
				continue
			}
			s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
			require.NoError(t, err, "%s", e.Name())
			out = append(out, []byte(s))
		}
	}
	return out
}

// The decoder on sigs.k8s.io/json and the reflection walker it replaced
// make the same decision on today's fuzz corpus and on a table of hostile
// inputs: both accept (with the same value) or both refuse, naming the
// same field with the same problem. The one difference is meant: a
// document larger than MaxSize is refused by the new decoder only (Read
// never passes one).
func TestDecodersAgree(t *testing.T) {
	t.Parallel()
	inputs := readCorpus(t, filepath.Join("testdata", "fuzz", "FuzzDecodeStrict"))
	require.NotEmpty(t, inputs, "the corpus was read")
	for _, dir := range []string{"../credentials/testdata/fuzz/FuzzDecode", "../retire/testdata/fuzz/FuzzDecode"} {
		inputs = append(inputs, readCorpus(t, dir)...)
	}
	for _, in := range hostileInputs {
		inputs = append(inputs, []byte(in))
	}
	refused := 0
	for _, data := range inputs {
		for name, target := range agreeTargets() {
			if agree(t, name, data, target) != nil {
				refused++
			}
		}
	}
	require.Greater(t, refused, len(inputs), "most hostile inputs are refused by some target")

	big := []byte(doc(`{"keyId":"` + strings.Repeat("a", MaxSize) + `"}`))
	require.NoError(t, walkDecodeStrict(big, new(testDoc)))
	requireInvalid(t, DecodeStrict(big, new(testDoc)), "", "larger than 65536 bytes")
}

// agree decodes data with both decoders into new values of target and
// requires the same outcome; it returns the new decoder's error.
func agree(t *testing.T, name string, data []byte, target func() any) error {
	t.Helper()
	gotNew, gotOld := target(), target()
	errNew := DecodeStrict(data, gotNew)
	errOld := walkDecodeStrict(data, gotOld)
	if errOld == nil {
		require.NoError(t, errNew, "%s %q: the walker accepts", name, data)
		require.Equal(t, gotOld, gotNew, "%s %q", name, data)
		return nil
	}
	var ieOld, ieNew *InvalidError
	require.ErrorAs(t, errOld, &ieOld)
	require.ErrorAs(t, errNew, &ieNew, "%s %q: the walker refuses with %v", name, data, errOld)
	require.Equal(t, ieOld.Field, ieNew.Field, "%s %q: old %v, new %v", name, data, errOld, errNew)
	if strings.HasPrefix(ieOld.Problem, "invalid JSON at byte offset") {
		require.True(t, strings.HasPrefix(ieNew.Problem, "invalid JSON"), "%s %q: old %v, new %v", name, data, errOld, errNew)
	} else {
		require.Equal(t, ieOld.Problem, ieNew.Problem, "%s %q: old %v, new %v", name, data, errOld, errNew)
	}
	return errNew
}

// FuzzDecodersAgree looks for an input on which the two decoders part.
func FuzzDecodersAgree(f *testing.F) {
	for _, in := range hostileInputs {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, target := range agreeTargets() {
			agree(t, name, data, target)
		}
	})
}
