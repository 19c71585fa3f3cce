package credentials

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/workflow/command"
)

const canary = "CANARY-LITERAL-VALUE"

func planJSON(spec string) string {
	return `{"apiVersion":"keyledger.dev/v1","kind":"CredentialPlan","metadata":{"requestId":"r-1","mutationId":"m-1"},"spec":` + spec + `}`
}

const validSpec = `{"owner":"shop-orders-cache","namespace":"shop",
 "secrets":[{"name":"shop-orders-cache-app","labels":{"app.kubernetes.io/part-of":"shop"},
   "keys":[{"name":"password","generate":{"length":32,"alphabet":"alphanumeric"}},{"name":"username","value":"` + canary + `"}]},
  {"name":"shop-bus-users","keys":[{"name":"user","value":"bus"},{"name":"password","generate":{"length":16,"alphabet":"hex"}}]}],
 "adopt":[{"externalSecret":"shop-orders-cache-app","generators":["shop-orders-cache-password"]}],
 "servers":[{"protocol":"valkey","pod":"shop-orders-cache-0","port":6379,"secret":"shop-orders-cache-app","passwordKey":"password"},
  {"protocol":"nats","pod":"shop-bus-0","port":4222,"secret":"shop-bus-users","userKey":"user","passwordKey":"password"}]}`

func decode(t *testing.T, data string) (*Command, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plan.json")
	require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
	f, err := command.Read(path, command.ReadOptions{})
	if err != nil {
		return nil, err
	}
	return Decode(f)
}

func TestDecodeValid(t *testing.T) {
	t.Parallel()
	cmd, err := decode(t, planJSON(validSpec))
	require.NoError(t, err)
	require.Equal(t, []string{"shop-orders-cache-app", "shop-bus-users"}, cmd.Spec.SecretNames())
	require.Equal(t, []string{"shop-orders-cache-password"}, cmd.Spec.GeneratorNames())
	require.Equal(t, []string{"shop-orders-cache-0", "shop-bus-0"}, cmd.Spec.PodNames())
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, cmd.Digest)
	prep, err := json.Marshal(cmd.preparation())
	require.NoError(t, err)
	require.NotContains(t, string(prep), canary, "the preparation holds names, never values")
}

func TestDecodeInvalid(t *testing.T) {
	t.Parallel()
	key := func(k string) string {
		return `{"owner":"o","namespace":"ns","secrets":[{"name":"s","keys":[` + k + `]}]}`
	}
	many := make([]string, MaxSecrets+1)
	for i := range many {
		many[i] = `{"name":"s` + strings.Repeat("x", i) + `","keys":[{"name":"k","value":"v"}]}`
	}
	cases := []struct{ name, spec, field, problem string }{
		{"no owner", `{"namespace":"ns","secrets":[]}`, "spec.owner", "required"},
		{"bad namespace", `{"owner":"o","namespace":"Shop","secrets":[]}`, "spec.namespace", ""},
		{"no secrets", `{"owner":"o","namespace":"ns","secrets":[]}`, "spec.secrets", "required"},
		{"65 secrets", `{"owner":"o","namespace":"ns","secrets":[` + strings.Join(many, ",") + `]}`, "spec.secrets", "at most 64 Secrets"},
		{"unknown member", key(`{"name":"k","value":"v","valu":"x"}`), "spec.secrets[0].keys[0].valu", "unknown field"},
		{"both", key(`{"name":"k","value":"` + canary + `","generate":{"length":16,"alphabet":"hex"}}`), "spec.secrets[0].keys[0]", "want generate or value, not both"},
		{"neither", key(`{"name":"k"}`), "spec.secrets[0].keys[0]", "want generate or value"},
		{"short", key(`{"name":"k","generate":{"length":15,"alphabet":"hex"}}`), "spec.secrets[0].keys[0].generate.length", "want 16 to 128"},
		{"long", key(`{"name":"k","generate":{"length":129,"alphabet":"hex"}}`), "spec.secrets[0].keys[0].generate.length", "want 16 to 128"},
		{"alphabet", key(`{"name":"k","generate":{"length":16,"alphabet":"base32"}}`), "spec.secrets[0].keys[0].generate.alphabet", ""},
		{"duplicate key", key(`{"name":"k","value":"a"},{"name":"k","value":"b"}`), "spec.secrets[0].keys[1].name", ""},
		{"bad key", key(`{"name":"a/b","value":"a"}`), "spec.secrets[0].keys[0].name", ""},
		{"duplicate secret", `{"owner":"o","namespace":"ns","secrets":[{"name":"s","keys":[{"name":"k","value":"v"}]},{"name":"s","keys":[{"name":"k","value":"v"}]}]}`, "spec.secrets[1].name", ""},
		{"instance label", `{"owner":"o","namespace":"ns","secrets":[{"name":"s","labels":{"app.kubernetes.io/instance":"x"},"keys":[{"name":"k","value":"v"}]}]}`, `spec.secrets[0].labels["app.kubernetes.io/instance"]`, ""},
		{"adopt unplanned", `{"owner":"o","namespace":"ns","secrets":[{"name":"s","keys":[{"name":"k","value":"v"}]}],"adopt":[{"externalSecret":"t"}]}`, "spec.adopt[0].externalSecret", ""},
		{"server unplanned secret", `{"owner":"o","namespace":"ns","secrets":[{"name":"s","keys":[{"name":"k","value":"v"}]}],"servers":[{"protocol":"valkey","pod":"p","port":1,"secret":"t","passwordKey":"k"}]}`, "spec.servers[0].secret", ""},
		{"server key", `{"owner":"o","namespace":"ns","secrets":[{"name":"s","keys":[{"name":"k","value":"v"}]}],"servers":[{"protocol":"valkey","pod":"p","port":1,"secret":"s","passwordKey":"x"}]}`, "spec.servers[0].passwordKey", ""},
		{"nats user", `{"owner":"o","namespace":"ns","secrets":[{"name":"s","keys":[{"name":"k","value":"v"}]}],"servers":[{"protocol":"nats","pod":"p","port":1,"secret":"s","passwordKey":"k"}]}`, "spec.servers[0].userKey", "required"},
		{"port", `{"owner":"o","namespace":"ns","secrets":[{"name":"s","keys":[{"name":"k","value":"v"}]}],"servers":[{"protocol":"valkey","pod":"p","port":0,"secret":"s","passwordKey":"k"}]}`, "spec.servers[0].port", ""},
		{"protocol", `{"owner":"o","namespace":"ns","secrets":[{"name":"s","keys":[{"name":"k","value":"v"}]}],"servers":[{"protocol":"redis","pod":"p","port":1,"secret":"s","passwordKey":"k"}]}`, "spec.servers[0].protocol", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := decode(t, planJSON(tc.spec))
			var ie *command.InvalidError
			require.ErrorAs(t, err, &ie, "%v", err)
			require.Equal(t, tc.field, ie.Field, "%v", err)
			if tc.problem != "" {
				require.Equal(t, tc.problem, ie.Problem)
			}
			require.NotContains(t, err.Error(), canary)
		})
	}
	_, err := decode(t, strings.Replace(planJSON(validSpec), "CredentialPlan", "KeyRetirement", 1))
	require.ErrorIs(t, err, &command.InvalidError{Field: "kind"})
}

func TestGenerate(t *testing.T) {
	t.Parallel()
	for _, a := range Alphabets() {
		chars, err := alphabet(a)
		require.NoError(t, err)
		for _, n := range []int{MinLength, 33, MaxLength} {
			v, err := GenerateValue(Generate{Length: n, Alphabet: a})
			require.NoError(t, err)
			require.Len(t, v, n)
			for _, c := range v {
				require.Contains(t, chars, string(c))
			}
		}
	}
	_, err := GenerateValue(Generate{Length: 15, Alphabet: AlphabetHex})
	require.Error(t, err)
}

// Rejection sampling: bytes at or above 248 are never used for the 62
// alphanumeric characters, so every character has exactly 4 bytes mapping to
// it. A reader yielding every byte value once shows it.
func TestGenerateNoModuloBias(t *testing.T) {
	t.Parallel()
	var all []byte
	for range 8 {
		for b := range 256 {
			all = append(all, byte(b))
		}
	}
	v, err := generate(bytes.NewReader(all), Generate{Length: 124, Alphabet: AlphabetAlphanumeric})
	require.NoError(t, err)
	counts := map[byte]int{}
	for _, c := range v {
		counts[c]++
	}
	// The first 124 accepted bytes are 0..123: each character twice.
	require.Len(t, counts, 62)
	for c, n := range counts {
		require.Equal(t, 2, n, "character %q", c)
	}
	// Bytes 248..255 are thrown away: after 0..247 the next accepted is 0.
	v, err = generate(bytes.NewReader(all[200:]), Generate{Length: 50, Alphabet: AlphabetAlphanumeric})
	require.NoError(t, err)
	require.Equal(t, alphanumeric[200%62:200%62+48], string(v[:48]))
	require.Equal(t, alphanumeric[0:2], string(v[48:]), "bytes 248-255 skipped")
}

func TestDiffAndPatch(t *testing.T) {
	t.Parallel()
	plan := Secret{Name: "app", Labels: map[string]string{"a": "1", "b/c": "2"},
		Keys: []Key{{Name: "password", Generate: &Generate{Length: 16, Alphabet: AlphabetHex}}, {Name: "user", Value: new("u")}}}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app", ResourceVersion: "42",
		Labels:      map[string]string{"a": "other", LabelArgoInstance: "shop"},
		Annotations: map[string]string{AnnotationArgoTracking: "x", "keep": "y"},
		OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "Deployment", Name: "d"},
			{APIVersion: "external-secrets.io/v1", Kind: "ExternalSecret", Name: "app"},
		}},
		Data: map[string][]byte{"password": []byte(canary)}}
	c := diff(s, plan, true)
	require.Equal(t, change{AddKeys: []string{"user"}, AddLabels: []string{"b/c"}, RemoveOwners: []string{"app"},
		RemoveTracking: true, RemoveInstance: true}, c)
	require.Equal(t, change{AddKeys: []string{"user"}, AddLabels: []string{"b/c"}}, diff(s, plan, false), "only adopted Secrets lose ownership")

	raw, err := patchFor(rand.Reader, s, plan, c)
	require.NoError(t, err)
	var ops []map[string]any
	require.NoError(t, json.Unmarshal(raw, &ops))
	require.Equal(t, map[string]any{"op": "test", "path": "/metadata/resourceVersion", "value": "42"}, ops[0])
	var paths []string
	for _, op := range ops[1:] {
		paths = append(paths, op["op"].(string)+" "+op["path"].(string))
		require.NotEqual(t, "/data/password", op["path"], "an existing key is never touched")
	}
	require.Equal(t, []string{
		"remove /metadata/ownerReferences/1",
		"remove /metadata/annotations/argocd.argoproj.io~1tracking-id",
		"remove /metadata/labels/app.kubernetes.io~1instance",
		"add /metadata/labels/b~1c",
		"add /data/user",
	}, paths)
	require.NotContains(t, string(raw), canary)

	// No data, no labels: whole members are added.
	bare := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app", ResourceVersion: "7"}}
	raw, err = patchFor(rand.Reader, bare, plan, diff(bare, plan, false))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &ops))
	require.Len(t, ops, 3)
	require.Equal(t, "/metadata/labels", ops[1]["path"])
	require.Equal(t, "/data", ops[2]["path"])
	require.Len(t, ops[2]["value"], 2)

	complete := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "x", "b/c": "y"}},
		Data: map[string][]byte{"password": nil, "user": nil}}
	require.True(t, diff(complete, plan, true).empty())
}

func TestClassifyProbeReplies(t *testing.T) {
	t.Parallel()
	for reply, want := range map[string]ProbeStatus{
		"+OK": ProbeAccepted,
		"-WRONGPASS invalid username-password pair or user is disabled.": ProbeRefused,
		"-ERR invalid password": ProbeRefused,
		"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?": ProbeUnknown,
		"-NOAUTH Authentication required.": ProbeUnknown,
		"":                                 ProbeUnknown,
	} {
		require.Equal(t, want, classifyValkey(reply).Status, reply)
	}
	for line, want := range map[string]ProbeStatus{
		"PONG":                              ProbeAccepted,
		"-ERR 'Authorization Violation'":    ProbeRefused,
		"-ERR 'Unknown Protocol Operation'": ProbeUnknown,
		"-ERR 'Authentication Timeout'":     ProbeUnknown,
		"MSG x 1 2":                         ProbeUnknown,
	} {
		res, done := classifyNATS(line)
		require.True(t, done, line)
		require.Equal(t, want, res.Status, line)
	}
	for _, line := range []string{"+OK", "PING", `INFO {"server_id":"x"}`} {
		_, done := classifyNATS(line)
		require.False(t, done, line)
	}
}

func TestRulesAndMatrix(t *testing.T) {
	t.Parallel()
	cmd, err := decode(t, planJSON(validSpec))
	require.NoError(t, err)
	rules := Rules(cmd.Spec)
	require.Len(t, rules, 6)
	for _, r := range rules {
		for _, v := range r.Verbs {
			require.NotContains(t, []string{"update", "list", "watch", "*"}, v)
		}
		require.NotContains(t, r.Resources, "*")
	}
	require.Equal(t, []string{"get", "delete"}, rules[3].Verbs, "a generator is deleted with the preconditions of a read")
	require.Equal(t, cmd.Spec.SecretNames(), rules[2].ResourceNames, "the ExternalSecret of every planned Secret is read, listed in adopt or not")
	noAdopt := cmd.Spec
	noAdopt.Adopt, noAdopt.Servers = nil, nil
	require.Len(t, Rules(noAdopt), 3, "a rule whose resourceNames would be empty is left out")
	require.Equal(t, "externalsecrets", Rules(noAdopt)[2].Resources[0], "without adopt, the ExternalSecrets are still read")

	require.Equal(t, cmd.Spec.SecretNames(), rules[1].ResourceNames, "get and patch on exactly the planned Secrets")
	require.Equal(t, []string{"get", "patch"}, rules[1].Verbs)
	require.Equal(t, []string{"create"}, rules[0].Verbs)
	require.Empty(t, rules[0].ResourceNames, "create cannot be narrowed by name")
	require.Equal(t, []string{"apps"}, rules[5].APIGroups)
	require.Equal(t, []string{"statefulsets"}, rules[5].Resources)
	require.Equal(t, []string{"get"}, rules[5].Verbs, "a server's StatefulSet is only read")
	require.Equal(t, []string{"shop-orders-cache", "shop-bus"}, rules[5].ResourceNames, "the servers' expected StatefulSets, by name")
	named := cmd.Spec
	named.Servers = append([]Server{}, named.Servers...)
	named.Servers[0].Controller = &Controller{Kind: ControllerNone}
	named.Servers[1].Controller = &Controller{Kind: ControllerStatefulSet, Name: "shop-orders-cache"}
	require.Equal(t, []string{"shop-orders-cache"}, Rules(named)[5].ResourceNames, "a StatefulSet named once; none for a pod without a controller")

	m := AccessMatrix(cmd.Spec)
	want := map[string]bool{
		"get secrets/keyledger-matrix-probe in shop (want denied)":                                          true,
		"update secrets/shop-orders-cache-app in shop (want denied)":                                        true,
		"delete pods/shop-bus-0 in shop (want allowed)":                                                     true,
		"get statefulsets.apps/shop-bus in shop (want allowed)":                                             true,
		"delete passwords.generators.external-secrets.io/shop-orders-cache-password in shop (want allowed)": true,
		"get passwords.generators.external-secrets.io/shop-orders-cache-password in shop (want allowed)":    true,
		"list passwords.generators.external-secrets.io in shop (want denied)":                               true,
		"get externalsecrets.external-secrets.io/keyledger-matrix-probe in shop (want denied)":              true,
		"delete externalsecrets.external-secrets.io/shop-orders-cache-app in shop (want allowed)":           true,
	}
	got := map[string]bool{}
	for _, c := range m {
		got[c.String()] = true
	}
	for k := range want {
		require.True(t, got[k], "matrix lacks %q", k)
	}
}
