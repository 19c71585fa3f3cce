package command

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
)

const canary = "CANARY-SECRET-VALUE"

type testKey struct {
	Name    string `json:"name"`
	Version int32  `json:"version,omitempty"`
}

type testSecret struct {
	Name string            `json:"name"`
	Keys []testKey         `json:"keys,omitempty"`
	Data map[string]string `json:"data,omitempty"`
}

type testSpec struct {
	KeyID   string          `json:"keyId"`
	Secrets []testSecret    `json:"secrets,omitempty"`
	Count   uint8           `json:"count,omitempty"`
	Enabled bool            `json:"enabled,omitempty"`
	Ratio   float64         `json:"ratio,omitempty"`
	Note    *string         `json:"note,omitempty"`
	Extra   any             `json:"extra,omitempty"`
	Raw     json.RawMessage `json:"raw,omitempty"`
}

type testDoc = Document[testSpec]

// doc builds a valid command document around spec.
func doc(spec string) string {
	return `{"apiVersion":"keyledger.dev/v1","kind":"KeyRetirement",` +
		`"metadata":{"requestId":"req-7","mutationId":"mut-7"},"spec":` + spec + `}`
}

func requireInvalid(t *testing.T, err error, field, problem string) {
	t.Helper()
	require.Error(t, err)
	var ie *InvalidError
	require.ErrorAs(t, err, &ie, "error %q", err)
	require.Equal(t, field, ie.Field, "error %q", err)
	if problem != "" {
		require.Equal(t, problem, ie.Problem, "error %q", err)
	}
	require.NotContains(t, err.Error(), canary)
}

func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		input   string
		field   string // "" with ok false means the whole document
		problem string
		ok      bool
	}{
		{name: "valid", input: doc(`{"keyId":"k1","secrets":[{"name":"a","keys":[{"name":"x","version":3}],"data":{"tls.crt":"v"}}]}`), ok: true},
		{name: "valid with white space", input: " \n" + doc(`{ "keyId" : "k1" }`) + "\n\t ", ok: true},
		{name: "null pointer and interface", input: doc(`{"keyId":"k1","note":null,"extra":null}`), ok: true},

		{name: "unknown field at top", input: `{"apiVersion":"keyledger.dev/v1","extra":1}`, field: "extra", problem: "unknown field"},
		{name: "unknown field in metadata", input: `{"metadata":{"requestId":"r","requestID":"r"}}`, field: "metadata.requestID", problem: "unknown field"},
		{name: "unknown field in spec", input: doc(`{"keyID":"k1"}`), field: "spec.keyID", problem: "unknown field"},
		{name: "unknown field nested in arrays", input: doc(`{"secrets":[{"name":"a"},{"name":"b"},{"name":"c","keys":[{"nam":"x"}]}]}`), field: "spec.secrets[2].keys[0].nam", problem: "unknown field"},
		{name: "unknown field with odd name", input: doc(`{"key id":1}`), field: `spec["key id"]`, problem: "unknown field"},

		{name: "duplicate member at top", input: `{"kind":"KeyRetirement","kind":"SecretDelete"}`, field: "kind", problem: "duplicate member"},
		{name: "duplicate member nested", input: doc(`{"secrets":[{"name":"a"},{"name":"b"},{"name":"` + canary + `","name":"` + canary + `"}]}`), field: "spec.secrets[2].name", problem: "duplicate member"},
		{name: "duplicate member in map", input: doc(`{"secrets":[{"name":"a","data":{"k":"` + canary + `","k":"x"}}]}`), field: "spec.secrets[0].data.k", problem: "duplicate member"},
		{name: "duplicate member by escape", input: doc(`{"keyId":"a","key\u0049d":"b"}`), field: "spec.keyId", problem: "duplicate member"},
		{name: "duplicate member in raw message", input: doc(`{"raw":{"a":{"b":1,"b":2}}}`), field: "spec.raw.a.b", problem: "duplicate member"},
		{name: "duplicate member in interface", input: doc(`{"extra":[{"b":1,"b":2}]}`), field: "spec.extra[0].b", problem: "duplicate member"},

		{name: "trailing object", input: `{} {}`, problem: "data after the top-level object"},
		{name: "trailing garbage", input: `{}x`, problem: "data after the top-level object"},
		{name: "trailing after document", input: doc(`{}`) + `,`, problem: "data after the top-level object"},

		{name: "wrong type string for number", input: doc(`{"count":"` + canary + `"}`), field: "spec.count", problem: "want non-negative integer, got string"},
		{name: "wrong type number for string", input: `{"metadata":{"requestId":7}}`, field: "metadata.requestId", problem: "want string, got number"},
		{name: "wrong type nested", input: doc(`{"secrets":[{"name":"a","keys":[{"name":"x","version":"` + canary + `"}]}]}`), field: "spec.secrets[0].keys[0].version", problem: "want integer, got string"},
		{name: "wrong type object for array", input: doc(`{"secrets":{"name":"a"}}`), field: "spec.secrets", problem: "want array, got object"},
		{name: "wrong type map value", input: doc(`{"secrets":[{"data":{"k":true}}]}`), field: "spec.secrets[0].data.k", problem: "want string, got boolean"},
		{name: "fraction for integer", input: doc(`{"count":1.5}`), field: "spec.count", problem: "want non-negative integer, got number"},
		{name: "negative for unsigned", input: doc(`{"count":-1}`), field: "spec.count", problem: "want non-negative integer, got number"},
		{name: "out of range", input: doc(`{"count":256}`), field: "spec.count", problem: "number out of range for uint8"},
		{name: "interface number out of range", input: doc(`{"extra":[1e400]}`), field: "spec.extra[0]", problem: "number out of range"},
		{name: "float out of range", input: doc(`{"ratio":1e400}`), field: "spec.ratio", problem: "number out of range for float64"},

		{name: "null for object", input: `{"metadata":null}`, field: "metadata", problem: "want object, got null"},
		{name: "null for string", input: `{"kind":null}`, field: "kind", problem: "want string, got null"},
		{name: "null for array", input: doc(`{"secrets":null}`), field: "spec.secrets", problem: "want array, got null"},

		{name: "top level array", input: `[]`, problem: "want object, got array"},
		{name: "top level string", input: `"` + canary + `"`, problem: "want object, got string"},
		{name: "top level null", input: `null`, problem: "want object, got null"},
		{name: "empty", input: ``, problem: "unexpected end of input"},
		{name: "truncated", input: `{"kind":"Key`, field: "kind", problem: "unexpected end of input"},
		{name: "syntax error after secret", input: doc(`{"keyId":"` + canary + `"x}`), field: "spec"},

		{name: "invalid UTF-8 in value", input: doc(`{"keyId":"a` + "\xff" + `b"}`), field: "spec.keyId", problem: "invalid UTF-8"},
		{name: "invalid UTF-8 in name", input: doc(`{"key` + "\xc3" + `":"a"}`), field: "spec", problem: "invalid UTF-8 in member name"},
		{name: "lone high surrogate", input: doc(`{"keyId":"\ud800x"}`), field: "spec.keyId", problem: "unpaired UTF-16 surrogate escape"},
		{name: "lone low surrogate", input: doc(`{"keyId":"\udc00"}`), field: "spec.keyId", problem: "unpaired UTF-16 surrogate escape"},
		{name: "surrogate pair", input: doc(`{"keyId":"\ud83d\ude00 \\u"}`), ok: true},

		{name: "too deep", input: doc(`{"extra":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`), field: "spec.extra" + strings.Repeat("[0]", 30), problem: "nested deeper than 32"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got testDoc
			err := DecodeStrict([]byte(tc.input), &got)
			if tc.ok {
				require.NoError(t, err)
				var want testDoc
				require.NoError(t, json.Unmarshal([]byte(tc.input), &want))
				require.Equal(t, want, got)
				return
			}
			requireInvalid(t, err, tc.field, tc.problem)
		})
	}
}

// DecodeStrict decodes into the kinds command types use and refuses any
// other type with a programming error (no *InvalidError, so exit 1), even
// for a document that would fit it: its walk could not decide as
// encoding/json does. Supported types go through.
func TestUnsupportedTypes(t *testing.T) {
	t.Parallel()
	type Common struct {
		Name string `json:"name"`
	}
	type embedded struct {
		Common
	}
	for name, v := range map[string]any{
		"Unmarshaler": new(struct {
			At time.Time `json:"at"`
		}),
		"quoted": new(struct {
			Port int `json:"port,string"`
		}),
		"bytes": new(struct {
			B []byte `json:"b"`
		}),
		"array": new(struct {
			A [2]string `json:"a"`
		}),
		"number": new(struct {
			N json.Number `json:"n"`
		}),
		"untagged": new(struct{ Name string }),
		"skipped": new(struct {
			Name string `json:"-"`
		}),
		"unexported": new(struct{ name string }),
		"embedded":   new(embedded),
		"twice": reflect.New(reflect.StructOf([]reflect.StructField{
			{Name: "A", Type: reflect.TypeFor[string](), Tag: `json:"a"`},
			{Name: "B", Type: reflect.TypeFor[string](), Tag: `json:"a"`},
		})).Interface(),
		"int key":         new(map[int]string),
		"TextUnmarshaler": new(map[string]*time.Time),
		"interface": new(struct {
			E error `json:"e"`
		}),
		"channel": new(struct {
			C chan int `json:"c"`
		}),
		"deep": new(Document[map[string][]*struct {
			U uintptr `json:"u"`
		}]),
	} {
		err := DecodeStrict([]byte(`{}`), v)
		require.Error(t, err, name)
		require.NotErrorAs(t, err, new(*InvalidError), name)
	}
	type recursive struct {
		Next *recursive `json:"next,omitempty"`
	}
	for _, v := range []any{new(testDoc), new(Envelope), new(recursive), new(map[string]any), new(struct {
		I8  int8    `json:"i8"`
		U64 uint64  `json:"u64"`
		F32 float32 `json:"f32"`
	})} {
		require.NoError(t, DecodeStrict([]byte(`{}`), v), "%T", v)
	}
}

func TestDecodeStrictNeedsPointer(t *testing.T) {
	t.Parallel()
	var d testDoc
	err := DecodeStrict([]byte(`{}`), d)
	require.Error(t, err)
	require.NotErrorAs(t, err, new(*InvalidError))
}

func TestParse(t *testing.T) {
	t.Parallel()
	envelope := func(apiVersion, kind, requestID, mutationID string) string {
		b, err := json.Marshal(map[string]any{
			"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]string{"requestId": requestID, "mutationId": mutationID},
			"spec":     map[string]any{},
		})
		require.NoError(t, err)
		return string(b)
	}
	valid := func(kind string) string { return envelope(APIVersion, kind, "req-7", "mut-7") }
	cases := []struct {
		name, input, field, problem string
	}{
		{name: "bad apiVersion", input: envelope("keyledger.dev/v2", "KeyRetirement", "r", "m"), field: "apiVersion", problem: "unsupported; want keyledger.dev/v1"},
		{name: "missing apiVersion", input: `{"kind":"KeyRetirement"}`, field: "apiVersion", problem: "required"},
		{name: "unknown kind", input: envelope(APIVersion, "SecretExplode", "r", "m"), field: "kind", problem: "unknown; want one of KeyRetirement, CredentialPlan, SecretUpdate, SecretRestore, SecretDelete"},
		{name: "kind wrong case", input: envelope(APIVersion, "keyretirement", "r", "m"), field: "kind"},
		{name: "missing kind", input: envelope(APIVersion, "", "r", "m"), field: "kind", problem: "required"},
		{name: "empty requestId", input: envelope(APIVersion, "KeyRetirement", "", "m"), field: "metadata.requestId", problem: "required"},
		{name: "missing metadata", input: `{"apiVersion":"keyledger.dev/v1","kind":"SecretDelete","spec":{}}`, field: "metadata.requestId", problem: "required"},
		{name: "requestId 129 chars", input: envelope(APIVersion, "KeyRetirement", strings.Repeat("r", 129), "m"), field: "metadata.requestId", problem: "must be at most 128 characters"},
		{name: "requestId space", input: envelope(APIVersion, "KeyRetirement", "req 7", "m"), field: "metadata.requestId", problem: "must contain only the characters A-Z a-z 0-9 . _ : -"},
		{name: "mutationId slash", input: envelope(APIVersion, "KeyRetirement", "r", "mut/7"), field: "metadata.mutationId", problem: "must contain only the characters A-Z a-z 0-9 . _ : -"},
		{name: "mutationId unicode", input: envelope(APIVersion, "KeyRetirement", "r", "mut-é"), field: "metadata.mutationId", problem: "must contain only the characters A-Z a-z 0-9 . _ : -"},
		{name: "missing spec", input: `{"apiVersion":"keyledger.dev/v1","kind":"SecretDelete","metadata":{"requestId":"r","mutationId":"m"}}`, field: "spec", problem: "required"},
		{name: "null spec", input: `{"apiVersion":"keyledger.dev/v1","kind":"SecretDelete","metadata":{"requestId":"r","mutationId":"m"},"spec":null}`, field: "spec", problem: "want object, got null"},
		{name: "duplicate member in raw spec", input: `{"apiVersion":"keyledger.dev/v1","kind":"SecretDelete","metadata":{"requestId":"r","mutationId":"m"},"spec":{"a":[{"x":1,"x":"` + canary + `"}]}}`, field: "spec.a[0].x", problem: "duplicate member"},
		{name: "array spec", input: `{"apiVersion":"keyledger.dev/v1","kind":"SecretDelete","metadata":{"requestId":"r","mutationId":"m"},"spec":[]}`, field: "spec", problem: "want object, got array"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.input))
			requireInvalid(t, err, tc.field, tc.problem)
		})
	}
	for _, kind := range Kinds {
		t.Run("kind "+kind, func(t *testing.T) {
			t.Parallel()
			env, err := Parse([]byte(valid(kind)))
			require.NoError(t, err)
			require.Equal(t, kind, env.Kind)
			require.Equal(t, Metadata{RequestID: "req-7", MutationID: "mut-7"}, env.Metadata)
			require.JSONEq(t, `{}`, string(env.Spec))
		})
	}
	t.Run("longest identifier", func(t *testing.T) {
		t.Parallel()
		_, err := Parse([]byte(envelope(APIVersion, KindSecretUpdate, strings.Repeat("a", 128), "A.b_c:d-9")))
		require.NoError(t, err)
	})
}

func TestInvalidErrorFormat(t *testing.T) {
	t.Parallel()
	require.Equal(t, "command file: spec.keyId: unknown field", Invalid("spec.keyId", "unknown field").Error())
	require.Equal(t, "command file: spec.keyId: required", Required("spec.keyId").Error())
	require.Equal(t, "command file: data after the top-level object", Invalid("", "data after the top-level object").Error())
	require.ErrorIs(t, Required("spec.keyId"), &InvalidError{Field: "spec.keyId"})
	require.NotErrorIs(t, Required("spec.keyId"), &InvalidError{Field: "spec.name"})
}

func TestValidators(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		check func(string) error
		input string
		ok    bool
	}{
		{"identifier", ValidIdentifier, "req-7:a.b_C", true},
		{"identifier empty", ValidIdentifier, "", false},
		{"identifier 128", ValidIdentifier, strings.Repeat("x", 128), true},
		{"identifier 129", ValidIdentifier, strings.Repeat("x", 129), false},
		{"identifier space", ValidIdentifier, "a b", false},
		{"identifier slash", ValidIdentifier, "a/b", false},
		{"identifier unicode", ValidIdentifier, "ä", false},
		{"name", ValidName, "tls.app-1", true},
		{"name upper", ValidName, "App", false},
		{"name empty", ValidName, "", false},
		{"name 253", ValidName, strings.Repeat("a", 253), true},
		{"name 254", ValidName, strings.Repeat("a", 254), false},
		{"name trailing dash", ValidName, "zz-", false},
		{"namespace", ValidNamespace, "kube-system", true},
		{"namespace dot", ValidNamespace, "a.b", false},
		{"namespace 63", ValidNamespace, strings.Repeat("a", 63), true},
		{"namespace 64", ValidNamespace, strings.Repeat("a", 64), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.check(tc.input)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			if tc.input != "" {
				require.NotContains(t, err.Error(), tc.input)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	data := doc(`{"keyId":"k1","secrets":[{"name":"a"},{"name":"b"},{"name":"c","keys":[{"name":"x"}]}]}`)
	f := &File{Bytes: []byte(data)}

	d, err := Decode[testSpec](f)
	require.NoError(t, err)
	require.Equal(t, "k1", d.Spec.KeyID)
	require.Equal(t, KindKeyRetirement, d.Kind)
	require.Equal(t, "mut-7", d.Metadata.MutationID)

	var spec testSpec
	require.NoError(t, f.DecodeSpec(&spec))
	require.Equal(t, d.Spec, spec)

	bad := &File{Bytes: []byte(doc(`{"secrets":[{},{},{"keys":[{"name":"x","name":"` + canary + `"}]}]}`))}
	_, err = Decode[testSpec](bad)
	requireInvalid(t, err, "spec.secrets[2].keys[0].name", "duplicate member")
	requireInvalid(t, bad.DecodeSpec(&spec), "spec.secrets[2].keys[0].name", "duplicate member")

	_, err = Decode[testSpec](&File{Bytes: []byte(`{"apiVersion":"v0"}`)})
	requireInvalid(t, err, "apiVersion", "")

	kd, digest, err := DecodeKind[testSpec](f, KindKeyRetirement)
	require.NoError(t, err)
	require.Equal(t, d, kd)
	want, err := d.Digest()
	require.NoError(t, err)
	require.Equal(t, want, digest)
	_, _, err = DecodeKind[testSpec](f, KindCredentialPlan)
	requireInvalid(t, err, "kind", "want "+KindCredentialPlan)
}

func TestDigest(t *testing.T) {
	t.Parallel()
	digest := func(data string) string {
		t.Helper()
		d, err := Decode[testSpec](&File{Bytes: []byte(data)})
		require.NoError(t, err)
		s, err := d.Digest()
		require.NoError(t, err)
		require.Regexp(t, `^sha256:[0-9a-f]{64}$`, s)
		return s
	}
	base := digest(doc(`{"keyId":"k1","count":2}`))
	reordered := digest(`{
		"spec": {"count": 2, "keyId": "k\u0031"},
		"metadata": {"mutationId": "mut-7", "requestId": "req-7"},
		"kind": "KeyRetirement",
		"apiVersion": "keyledger.dev/v1"
	}`)
	require.Equal(t, base, reordered, "white space, member order and escapes keep the digest")
	require.NotEqual(t, base, digest(doc(`{"keyId":"k1","count":3}`)), "a value change changes the digest")
	require.NotEqual(t, base, digest(strings.Replace(doc(`{"keyId":"k1","count":2}`), "req-7", "req-8", 1)))
}

// fuzzDoc is the document FuzzDecodeStrict decodes into.
type fuzzDoc = Document[testSpec]

func FuzzDecodeStrict(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var got fuzzDoc
		err := DecodeStrict(data, &got)
		if err != nil {
			require.ErrorAs(t, err, new(*InvalidError))
			return
		}
		// The walk alone accepted it, so encoding/json must accept it too and
		// yield the same value.
		var want fuzzDoc
		require.NoError(t, json.Unmarshal(data, &want))
		require.Equal(t, want, got)
		// What we accept re-encodes to something we accept again, with the
		// same digest (nil and empty slices differ after omitempty, so
		// compare encodings rather than values).
		out, err := json.Marshal(got)
		require.NoError(t, err)
		var again fuzzDoc
		require.NoError(t, DecodeStrict(out, &again), "%s", out)
		want1, err := Digest(got)
		require.NoError(t, err)
		want2, err := Digest(again)
		require.NoError(t, err)
		require.Equal(t, want1, want2, "%s", out)
	})
}

// The mutation ID's label value is a valid label value for every valid
// mutation ID, and the same ID always gives the same value.
func TestMutationIDHashIsALabelValue(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"m", "mut-7", "shop:orders:run-3", strings.Repeat("a", 128), "-._:"} {
		require.NoError(t, ValidIdentifier(id), id)
		v := MutationIDHash(id)
		require.Empty(t, validation.IsValidLabelValue(v), id)
		require.Len(t, v, 32)
		require.Equal(t, v, MutationIDHash(id))
	}
	// Why a digest: an ID may be no label value at all.
	require.NotEmpty(t, validation.IsValidLabelValue("shop:orders"))
	require.NotEmpty(t, validation.IsValidLabelValue(strings.Repeat("a", 64)))
	require.NotEqual(t, MutationIDHash("mut-7"), MutationIDHash("mut-8"))
}
