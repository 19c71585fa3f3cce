package app

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/workflow/command"
)

// examplesDir is the repository's examples/.
var examplesDir = filepath.Join("..", "..", "..", "examples")

// Every member of every kind's Go type has an entry in the member table,
// and every entry names a member: explain and schema cannot leave one out
// or describe one that does not exist.
func TestFieldDocsCoverTheTypes(t *testing.T) {
	t.Parallel()
	require.ElementsMatch(t, command.Kinds, slices.Collect(maps.Keys(kindSpecs)))
	require.ElementsMatch(t, command.Kinds, slices.Collect(maps.Keys(kindDocs)))
	for _, kind := range command.Kinds {
		paths := map[string]bool{}
		walkMembers(documentType(kind), "", func(path string, _ reflect.Type) {
			paths[path] = true
			d, ok := docOf(kind, path)
			require.True(t, ok, "%s.%s has an entry", kind, path)
			require.NotEmpty(t, d.doc, "%s.%s says what it means", kind, path)
		})
		for path := range fieldDocs[kind] {
			require.True(t, paths[path], "fieldDocs %s.%s names a member of the type", kind, path)
		}
		for path := range envelopeDocs {
			require.True(t, paths[path], "envelopeDocs %s names a member of %s", path, kind)
		}
		var out bytes.Buffer
		require.NoError(t, explain(&out, kind))
		for path := range paths {
			out.Reset()
			require.NoError(t, explain(&out, kind+"."+path), "explain %s.%s", kind, path)
			require.Contains(t, out.String(), "FIELD:       "+path+" <")
		}
	}
}

// schemas compiles every kind's schema (checked against the draft's
// metaschema) and one that takes a file of any kind.
func schemas(t *testing.T) (map[string]*jsonschema.Schema, *jsonschema.Schema) {
	t.Helper()
	c := jsonschema.NewCompiler()
	var anyOf []any
	for _, kind := range command.Kinds {
		s, err := kindSchema(kind)
		require.NoError(t, err)
		doc := roundTrip(t, s)
		require.NoError(t, c.AddResource(s["$id"].(string), doc))
		anyOf = append(anyOf, map[string]any{"$ref": s["$id"]})
	}
	require.NoError(t, c.AddResource("https://keyledger.dev/schemas/v1/any.json", map[string]any{"$schema": jsonSchemaDraft, "anyOf": anyOf}))
	out := map[string]*jsonschema.Schema{}
	for _, kind := range command.Kinds {
		s, err := c.Compile("https://keyledger.dev/schemas/v1/" + kind + ".json")
		require.NoError(t, err, kind)
		out[kind] = s
	}
	anyKind, err := c.Compile("https://keyledger.dev/schemas/v1/any.json")
	require.NoError(t, err)
	return out, anyKind
}

// roundTrip is v as the validator reads a schema file.
func roundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	return doc
}

// schemaAccepts reports whether data, a command file, is valid under its
// kind's schema (under every kind's, when it names none).
func schemaAccepts(kinds map[string]*jsonschema.Schema, anyKind *jsonschema.Schema, data []byte) bool {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return false
	}
	s := anyKind
	if m, ok := doc.(map[string]any); ok {
		if k, ok := m["kind"].(string); ok && kinds[k] != nil {
			s = kinds[k]
		}
	}
	return s.Validate(doc) == nil
}

// decoderAccepts reports whether validate (run's decoder and checks, offline)
// accepts data written to a private file.
func decoderAccepts(t *testing.T, data []byte) bool {
	t.Helper()
	path := filepath.Join(t.TempDir(), "command.json")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	_, err := validateFile(path, 0, &commonFlags{})
	return err == nil
}

func exampleFiles(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(examplesDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		out[filepath.Base(p)] = b
	}
	return out
}

// Every example passes keyledger validate and its kind's schema, and every
// kind has an example.
func TestExamplesPassDecoderAndSchema(t *testing.T) {
	isolate(t)
	kinds, anyKind := schemas(t)
	seen := map[string]bool{}
	for name, data := range exampleFiles(t) {
		env, err := command.Parse(data)
		require.NoError(t, err, name)
		seen[env.Kind] = true
		require.True(t, decoderAccepts(t, data), "validate %s", name)
		require.True(t, schemaAccepts(kinds, anyKind, data), "schema of %s", name)
		// As a user runs it, from the checkout (relative path, the mode git
		// gives): valid, with a warning for files run wants private.
		i := invoke("validate", filepath.Join(examplesDir, name))
		require.Equal(t, ExitDone, i.code, "keyledger validate %s: %s", name, i.stderr)
		require.Equal(t, "valid: "+env.Kind+" "+env.Metadata.MutationID+"\n", i.stdout)
	}
	require.ElementsMatch(t, command.Kinds, slices.Collect(maps.Keys(seen)), "every kind has an example")
}

// A misspelled member names its line and column and the member meant, in
// validate's message and run's outcome line alike.
func TestMisspelledFieldIsLocatedAndNamed(t *testing.T) {
	isolate(t)
	data := exampleFiles(t)["key-retirement.json"]
	bad := bytes.Replace(data, []byte(`"secretName"`), []byte(`"secertName"`), 1)
	path := writeCommand(t, "bad.json", string(bad))
	at := bytes.Index(bad, []byte("secertName"))
	require.Positive(t, at)
	line := 1 + bytes.Count(bad[:at], []byte("\n"))
	want := "spec.secertName: unknown field (line " + strconv.Itoa(line) + ", column 5); did you mean secretName?"
	i := invoke("validate", path)
	require.Equal(t, ExitUsage, i.code)
	require.Contains(t, i.stderr, want)
	i = invoke("run", "--database-url", unreachableDB, path)
	require.Equal(t, ExitUsage, i.code)
	require.Contains(t, i.stdout, want, "the outcome line")
}

// disagreements are the inputs the decoder and the schema decide
// differently, and why. The decoder is the authority (validate and run use
// it); the schema states what a JSON Schema can about one document.
var disagreements = map[string]string{
	"duplicate member": "a JSON Schema validator sees the parsed document, where a repeated member is one member (the last); " +
		"the decoder refuses it, because two readers of the same file could take different values",
	"invalid UTF-8 in a value": "the validator's JSON parser replaces invalid UTF-8 with U+FFFD, which a free text takes; " +
		"the decoder refuses it, because the file would not mean what its bytes say",
	"larger than 64 KiB":                             "size is the file's, not the document's: run reads at most 64 KiB",
	"credential key with generate and value":         "one of two members is a rule across members; the schema states each member's own rules",
	"credential key with neither generate nor value": "one of two members is a rule across members",
	"credential Secret planned twice":                "uniqueness of a member's value across a list is a rule across members",
	"credential server naming an unplanned Secret":   "a reference between members (a server's secret names a planned Secret)",
	"credential password key not in its Secret":      "a reference between members (passwordKey names a key of that Secret)",
	"credential nats server without userKey":         "a member required by another member's value (protocol nats)",
	"credential adopt of an unplanned Secret":        "a reference between members (adopt names a planned Secret)",
	"credential Argo CD instance label":              "one label name refused among the valid ones: the family's rule, kept in one place",
	"credential plan mutationId naming a run":        "the run suffix is refused by the family; the schema states the identifier's form and length",
	"update with nothing to change":                  "data or removeKeys: a rule across members",
	"update removing a key it also sets":             "a reference between members",
	"update creating with removeKeys":                "a rule across members (removeKeys only when expectedResourceVersion is not empty)",
	"update of a snapshot's name":                    "a name prefix refused by the family (keyledger-h- names snapshots)",
	"update value in non-canonical base64":           "canonical base64 (zero padding bits) is beyond a pattern's reach; the pattern states the alphabet and padding",
	"retirement data key of dots":                    "\".\" and \"..\" match the data key pattern; Kubernetes refuses them as keys",
}

// mutation is one edit of an example, and the example it applies to.
type mutation struct {
	name, file string
	edit       func(doc map[string]any)
	text       func(string) string
}

func spec(doc map[string]any) map[string]any { return doc["spec"].(map[string]any) }

func firstKey(doc map[string]any) map[string]any {
	secrets := spec(doc)["secrets"].([]any)
	return secrets[0].(map[string]any)["keys"].([]any)[0].(map[string]any)
}

var mutations = []mutation{
	{name: "unknown member", file: "key-retirement.json", text: func(s string) string { return strings.Replace(s, `"secretName"`, `"secertName"`, 1) }},
	{name: "duplicate member", file: "key-retirement.json", text: func(s string) string {
		return strings.Replace(s, `"namespace": "ai",`, `"namespace": "ai", "namespace": "ai",`, 1)
	}},
	{name: "missing required member", file: "key-retirement.json", edit: func(d map[string]any) { delete(spec(d), "keyId") }},
	{name: "wrong type", file: "secret-restore.json", edit: func(d map[string]any) { spec(d)["version"] = "1" }},
	{name: "fraction for an integer", file: "secret-restore.json", edit: func(d map[string]any) { spec(d)["version"] = 1.5 }},
	{name: "null for a required pointer", file: "secret-delete.json", edit: func(d map[string]any) { spec(d)["keepHistory"] = nil }},
	{name: "null for an optional pointer", file: "credential-plan-servers.json", edit: func(d map[string]any) {
		spec(d)["servers"].([]any)[0].(map[string]any)["controller"] = nil
	}},
	{name: "trailing data", file: "secret-delete.json", text: func(s string) string { return s + "{}" }},
	{name: "invalid UTF-8 in a value", file: "credential-plan.json", text: func(s string) string { return strings.Replace(s, `"value": "app"`, "\"value\": \"a\xffp\"", 1) }},
	{name: "larger than 64 KiB", file: "credential-plan.json", text: func(s string) string { return s + strings.Repeat(" ", 64<<10) }},
	{name: "unknown kind", file: "secret-delete.json", edit: func(d map[string]any) { d["kind"] = "SecretErase" }},
	{name: "other apiVersion", file: "secret-delete.json", edit: func(d map[string]any) { d["apiVersion"] = "keyledger.dev/v2" }},
	{name: "identifier with a space", file: "key-retirement.json", edit: func(d map[string]any) { spec(d)["keyId"] = "k 1" }},
	{name: "namespace in capitals", file: "key-retirement.json", edit: func(d map[string]any) { spec(d)["namespace"] = "AI" }},
	{name: "digest too short", file: "key-retirement.json", edit: func(d map[string]any) { spec(d)["expectedMaterialDigest"] = "sha256:abc" }},
	{name: "retirement data key of dots", file: "key-retirement.json", edit: func(d map[string]any) { spec(d)["dataKey"] = ".." }},
	{name: "credential length too short", file: "credential-plan.json", edit: func(d map[string]any) {
		firstKey(d)["generate"].(map[string]any)["length"] = 8
	}},
	{name: "credential unknown alphabet", file: "credential-plan.json", edit: func(d map[string]any) {
		firstKey(d)["generate"].(map[string]any)["alphabet"] = "emoji"
	}},
	{name: "credential key with generate and value", file: "credential-plan.json", edit: func(d map[string]any) { firstKey(d)["value"] = "x" }},
	{name: "credential key with neither generate nor value", file: "credential-plan.json", edit: func(d map[string]any) { delete(firstKey(d), "generate") }},
	{name: "credential no Secrets", file: "credential-plan.json", edit: func(d map[string]any) { spec(d)["secrets"] = []any{} }},
	{name: "credential Secret planned twice", file: "credential-plan.json", edit: func(d map[string]any) {
		s := spec(d)["secrets"].([]any)
		s[1].(map[string]any)["name"] = s[0].(map[string]any)["name"]
	}},
	{name: "credential server naming an unplanned Secret", file: "credential-plan-servers.json", edit: func(d map[string]any) {
		spec(d)["servers"].([]any)[0].(map[string]any)["secret"] = "elsewhere"
	}},
	{name: "credential password key not in its Secret", file: "credential-plan-servers.json", edit: func(d map[string]any) {
		spec(d)["servers"].([]any)[0].(map[string]any)["passwordKey"] = "pass"
	}},
	{name: "credential nats server without userKey", file: "credential-plan-servers.json", edit: func(d map[string]any) {
		delete(spec(d)["servers"].([]any)[0].(map[string]any), "userKey")
	}},
	{name: "credential port out of range", file: "credential-plan-servers.json", edit: func(d map[string]any) {
		spec(d)["servers"].([]any)[0].(map[string]any)["port"] = 70000
	}},
	{name: "credential unknown protocol", file: "credential-plan-servers.json", edit: func(d map[string]any) {
		spec(d)["servers"].([]any)[0].(map[string]any)["protocol"] = "redis"
	}},
	{name: "credential adopt of an unplanned Secret", file: "credential-plan.json", edit: func(d map[string]any) {
		spec(d)["adopt"].([]any)[0].(map[string]any)["externalSecret"] = "elsewhere"
	}},
	{name: "credential Argo CD instance label", file: "credential-plan.json", edit: func(d map[string]any) {
		spec(d)["secrets"].([]any)[0].(map[string]any)["labels"] = map[string]any{"app.kubernetes.io/instance": "shop"}
	}},
	{name: "credential label value too long", file: "credential-plan.json", edit: func(d map[string]any) {
		spec(d)["secrets"].([]any)[0].(map[string]any)["labels"] = map[string]any{"team": strings.Repeat("a", 64)}
	}},
	{name: "credential plan mutationId naming a run", file: "credential-plan.json", edit: func(d map[string]any) {
		d["metadata"].(map[string]any)["mutationId"] = "shop-credentials:run-3"
	}},
	{name: "credential plan mutationId too long", file: "credential-plan.json", edit: func(d map[string]any) {
		d["metadata"].(map[string]any)["mutationId"] = strings.Repeat("m", 120)
	}},
	{name: "update with nothing to change", file: "secret-update.json", edit: func(d map[string]any) {
		delete(spec(d), "data")
		delete(spec(d), "removeKeys")
	}},
	{name: "update removing a key it also sets", file: "secret-update.json", edit: func(d map[string]any) { spec(d)["removeKeys"] = []any{"password"} }},
	{name: "update creating with removeKeys", file: "secret-update.json", edit: func(d map[string]any) { spec(d)["expectedResourceVersion"] = "" }},
	{name: "update creating", file: "secret-update.json", edit: func(d map[string]any) {
		spec(d)["expectedResourceVersion"] = ""
		delete(spec(d), "removeKeys")
	}},
	{name: "update without expectedResourceVersion", file: "secret-update.json", edit: func(d map[string]any) { delete(spec(d), "expectedResourceVersion") }},
	{name: "update of a snapshot's name", file: "secret-update.json", edit: func(d map[string]any) { spec(d)["name"] = "keyledger-h-0123-v1" }},
	{name: "update value not base64", file: "secret-update.json", edit: func(d map[string]any) { spec(d)["data"] = map[string]any{"password": "not base64!"} }},
	{name: "update value in non-canonical base64", file: "secret-update.json", edit: func(d map[string]any) { spec(d)["data"] = map[string]any{"password": "YR=="} }},
	{name: "restore of version 0", file: "secret-restore.json", edit: func(d map[string]any) { spec(d)["version"] = 0 }},
	{name: "delete without keepHistory", file: "secret-delete.json", edit: func(d map[string]any) { delete(spec(d), "keepHistory") }},
}

// The decoder's refusal corpus (the fuzz corpus of workflow/command) and
// each example edited in the ways above go to the decoder and to the
// schema: they decide alike, except where disagreements says why not.
func TestSchemaAgreesWithTheDecoder(t *testing.T) {
	isolate(t)
	kinds, anyKind := schemas(t)
	type input struct {
		name string
		data []byte
	}
	var inputs []input
	corpus, err := filepath.Glob(filepath.Join("..", "..", "..", "workflow", "command", "testdata", "fuzz", "*", "*"))
	require.NoError(t, err)
	require.NotEmpty(t, corpus)
	for _, p := range corpus {
		inputs = append(inputs, input{"corpus " + filepath.Base(filepath.Dir(p)) + "/" + filepath.Base(p), fuzzInput(t, p)})
	}
	examples := exampleFiles(t)
	for _, m := range mutations {
		data, ok := examples[m.file]
		require.True(t, ok, "%s: example %s", m.name, m.file)
		if m.edit != nil {
			var doc map[string]any
			require.NoError(t, json.Unmarshal(data, &doc))
			m.edit(doc)
			data, err = json.MarshalIndent(doc, "", "  ")
			require.NoError(t, err)
		}
		if m.text != nil {
			data = []byte(m.text(string(data)))
			require.NotEqual(t, examples[m.file], data, "%s changes the file", m.name)
		}
		inputs = append(inputs, input{m.name, data})
	}
	disagreed := map[string]bool{}
	for _, in := range inputs {
		byDecoder, bySchema := decoderAccepts(t, in.data), schemaAccepts(kinds, anyKind, in.data)
		if byDecoder == bySchema {
			require.NotContains(t, disagreements, in.name, "%s: decoder and schema agree (%v); drop it from disagreements", in.name, byDecoder)
			continue
		}
		disagreed[in.name] = true
		require.Contains(t, disagreements, in.name, "%s: decoder accepts %v, schema accepts %v: say why in disagreements, or fix the schema", in.name, byDecoder, bySchema)
		require.False(t, byDecoder, "%s: the decoder accepts what the schema refuses: the schema is wrong", in.name)
	}
	for name := range disagreements {
		require.True(t, disagreed[name], "disagreements lists %q, which no input is", name)
	}
}

// fuzzInput reads one input of a Go fuzz corpus file ([]byte("...")).
func fuzzInput(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Equal(t, "go test fuzz v1", lines[0], path)
	lit := strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")")
	s, err := strconv.Unquote(lit)
	require.NoError(t, err, path)
	return []byte(s)
}

// keyledger schema prints every kind's schema, and a file the validator
// takes; explain and schema refuse an unknown kind naming the kinds.
func TestSchemaAndExplainCommands(t *testing.T) {
	t.Parallel()
	for _, kind := range command.Kinds {
		var out bytes.Buffer
		require.NoError(t, Run(context.Background(), []string{"schema", kind}, IOStreams{Out: &out, ErrOut: &bytes.Buffer{}}))
		var s map[string]any
		require.NoError(t, json.Unmarshal(out.Bytes(), &s), kind)
		require.Equal(t, kind, s["title"])
		out.Reset()
		require.NoError(t, Run(context.Background(), []string{"explain", kind}, IOStreams{Out: &out, ErrOut: &bytes.Buffer{}}))
		require.Contains(t, out.String(), "KIND:        "+kind)
	}
	for _, args := range [][]string{{"schema"}, {"schema", "Nope"}, {"explain"}, {"explain", "Nope"}, {"explain", "KeyRetirement.spec.secertName"}} {
		i := invoke(args...)
		require.Equal(t, ExitUsage, i.code, "%v", args)
	}
	i := invoke("explain", "KeyRetirement.spec.secertName")
	require.Contains(t, i.stderr, "did you mean KeyRetirement.spec.secretName?")
	i = invoke("explain", "CredentialPlan.spec.secrets[0].keys[].generate.alphabet")
	require.Equal(t, ExitDone, i.code, i.stderr)
	require.Contains(t, i.stdout, "one of alphanumeric, hex, base64url")
}
