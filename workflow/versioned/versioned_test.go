package versioned

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/workflow/command"
)

const canary = "CANARY-VERSIONED-VALUE"

func TestSnapshotName(t *testing.T) {
	t.Parallel()
	uid := types.UID("0b0e2d57-5bd6-4d5e-9f4c-6f1c1f2c9a11")
	sum := sha256.Sum256([]byte(uid))
	want := "keyledger-h-" + hex.EncodeToString(sum[:])[:32] + "-v7"
	require.Equal(t, want, SnapshotName(uid, 7))
	require.Len(t, SnapshotName(uid, MaxVersion), MaxSnapshotName, "the largest version fills exactly 60 characters")
	require.NotEqual(t, SnapshotName(uid, 1), SnapshotName("another-uid", 1), "another UID, another history")
	require.Equal(t, "keyledger.dev/kind=history,keyledger.dev/source-uid="+hex.EncodeToString(sum[:])[:32], SnapshotSelector(uid))
	require.NoError(t, command.ValidName(SnapshotName(uid, MaxVersion)))
}

func TestCurrentVersion(t *testing.T) {
	t.Parallel()
	cases := []struct {
		value   string
		present bool
		want    int64
		err     string
	}{
		{"", false, 1, ""},
		{"0", true, 1, ""},
		{"1", true, 1, ""},
		{"42", true, 42, ""},
		{"99999999999998", true, 99999999999998, ""},
		{"99999999999999", true, 0, ReasonVersionExhausted},
		{"100000000000000", true, 0, ReasonVersionMalformed},
		{"", true, 0, ReasonVersionMalformed},
		{"00", true, 0, ReasonVersionMalformed},
		{"07", true, 0, ReasonVersionMalformed},
		{"-1", true, 0, ReasonVersionMalformed},
		{"+1", true, 0, ReasonVersionMalformed},
		{"1.0", true, 0, ReasonVersionMalformed},
		{" 1", true, 0, ReasonVersionMalformed},
		{"1\n", true, 0, ReasonVersionMalformed},
		{"one", true, 0, ReasonVersionMalformed},
		{"99999999999999999999", true, 0, ReasonVersionMalformed},
	}
	for _, tc := range cases {
		got, err := CurrentVersion(tc.value, tc.present)
		if tc.err != "" {
			require.EqualError(t, err, tc.err, "%q", tc.value)
			continue
		}
		require.NoError(t, err, "%q", tc.value)
		require.Equal(t, tc.want, got, "%q", tc.value)
	}
}

func TestParseHistoryLimit(t *testing.T) {
	t.Parallel()
	got, err := ParseHistoryLimit("", false)
	require.NoError(t, err)
	require.Equal(t, 20, got, "unset means 20")
	for value, want := range map[string]int{"1": 1, "20": 20, "99": 99, "100": 100} {
		got, err := ParseHistoryLimit(value, true)
		require.NoError(t, err, value)
		require.Equal(t, want, got, value)
	}
	for _, value := range []string{"", "0", "-1", "1.5", "2.0", "01", "007", " 5", "5 ", "\t5", "+5", "101", "1000", "1e1", "0x10", "twenty", "5\n"} {
		_, err := ParseHistoryLimit(value, true)
		require.Error(t, err, "%q", value)
		require.Contains(t, err.Error(), HistoryLimitEnv)
	}
}

func TestEstimateSize(t *testing.T) {
	t.Parallel()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"k": "vv"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"p": make([]byte, 3), "q": make([]byte, 4), "e": {}},
	}
	// values: 3+4+0 = 7 bytes x 1.4 = 9.8 -> 10; keys 3; labels 2; annotations 3; name+ns+type 2+4+6
	require.Equal(t, int64(10+3+2+3+2+4+6), EstimateSize(s))

	// The contract's bound: UTF-8 bytes x 1.4 against 1 MiB. 748,983 bytes
	// are 1,048,576.2 estimated (rounded up), over with the key; one byte
	// less is exactly 1 MiB with the key.
	big := &corev1.Secret{Data: map[string][]byte{"v": make([]byte, 748983)}}
	require.Equal(t, int64(MaxSecretBytes+2), EstimateSize(big), "over the guard")
	big.Data["v"] = make([]byte, 748982)
	require.Equal(t, int64(MaxSecretBytes), EstimateSize(big), "at the guard: accepted")

	// 760 KiB of values: under 1 MiB as base64 (x 4/3), over it at x 1.4.
	big.Data["v"] = make([]byte, 760<<10)
	require.Less(t, int64((760<<10+2)/3*4+1), int64(MaxSecretBytes), "base64 would let it pass")
	require.Greater(t, EstimateSize(big), int64(MaxSecretBytes), "the contract's estimate refuses it")
}

func liveSecret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: "db", Namespace: "shop", UID: "uid-1", ResourceVersion: "123",
			Labels:          map[string]string{"app": "shop"},
			Annotations:     map[string]string{AnnotationVersion: "3", "controller.example/owner": "x"},
			Finalizers:      []string{"example.com/keep"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "o-1"}},
		},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": []byte(canary), "__proto__": {0xef, 0xbb, 0xbf, 0x00, 0xff}},
	}
}

func TestSnapshotOfAndValidation(t *testing.T) {
	t.Parallel()
	live := liveSecret()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.FixedZone("x", 3600))
	snap := snapshotOf(live, 3, at, "req/mut")
	require.Equal(t, SnapshotName("uid-1", 3), snap.Name)
	require.Equal(t, corev1.SecretTypeOpaque, snap.Type)
	require.True(t, *snap.Immutable)
	require.Equal(t, live.Data, snap.Data)
	require.Empty(t, snap.OwnerReferences)
	require.Empty(t, snap.Finalizers)
	require.Equal(t, map[string]string{
		LabelManagedBy: "keyledger", LabelKind: "history", LabelSourceUID: Hash("uid-1"), LabelSourceResourceVersion: Hash("123"),
	}, snap.Labels)
	require.Equal(t, map[string]string{
		AnnotationFormat: "uid-rv-v1", AnnotationSourceUID: "uid-1", AnnotationSourceResourceVersion: "123",
		AnnotationSourceName: "db", AnnotationSourceType: string(corev1.SecretTypeTLS), AnnotationVersion: "3",
		AnnotationSnapshotTime: "2026-05-01T11:00:00Z", AnnotationActor: "req/mut",
	}, snap.Annotations)
	live.Data["tls.crt"][0] = 'X'
	require.Equal(t, byte('C'), snap.Data["tls.crt"][0], "the snapshot holds a copy")

	meta, ok := checkSnapshot(snap, "uid-1", "db")
	require.True(t, ok)
	require.Equal(t, int64(3), meta.Version)
	_, ok = checkSnapshot(snap, "uid-2", "db")
	require.False(t, ok, "another UID's snapshot is never used")
	_, ok = checkSnapshot(snap, "uid-1", "other")
	require.False(t, ok)

	other := snapshotOf(liveSecret(), 3, at.Add(time.Hour), "req/other")
	require.True(t, sameSource(other, snap), "another operation's snapshot of the same source is the same state")

	tamper := []struct {
		name string
		edit func(s *corev1.Secret)
	}{
		{"data changed", func(s *corev1.Secret) { s.Data["tls.crt"] = []byte("x") }},
		{"key added", func(s *corev1.Secret) { s.Data["extra"] = nil }},
		{"not immutable", func(s *corev1.Secret) { no := false; s.Immutable = &no }},
		{"immutable unset", func(s *corev1.Secret) { s.Immutable = nil }},
		{"type", func(s *corev1.Secret) { s.Type = corev1.SecretTypeTLS }},
		{"source rv", func(s *corev1.Secret) { s.Annotations[AnnotationSourceResourceVersion] = "124" }},
		{"source rv label", func(s *corev1.Secret) { s.Labels[LabelSourceResourceVersion] = Hash("124") }},
		{"format", func(s *corev1.Secret) { s.Annotations[AnnotationFormat] = "uid-rv-v0" }},
		{"version", func(s *corev1.Secret) { s.Annotations[AnnotationVersion] = "4" }},
		{"name", func(s *corev1.Secret) { s.Annotations[AnnotationSourceName] = "db2" }},
		{"extra annotation", func(s *corev1.Secret) { s.Annotations["x"] = "y" }},
		{"extra label", func(s *corev1.Secret) { s.Labels["x"] = "y" }},
		{"owner", func(s *corev1.Secret) { s.OwnerReferences = []metav1.OwnerReference{{Name: "o"}} }},
		{"bad time", func(s *corev1.Secret) { s.Annotations[AnnotationSnapshotTime] = "yesterday" }},
		{"uid label only", func(s *corev1.Secret) { s.Annotations[AnnotationSourceUID] = "uid-9" }},
		{"another slot", func(s *corev1.Secret) { s.Name = SnapshotName("uid-1", 4) }},
		{"another source state, consistently labelled", func(s *corev1.Secret) {
			s.Annotations[AnnotationSourceResourceVersion] = "124"
			s.Labels[LabelSourceResourceVersion] = Hash("124")
		}},
	}
	for _, tc := range tamper {
		s := snapshotOf(liveSecret(), 3, at, "req/mut")
		tc.edit(s)
		require.False(t, sameSource(s, snap), tc.name)
	}
}

func TestReplacementKeepsLiveMetadata(t *testing.T) {
	t.Parallel()
	live := liveSecret()
	f := &family{cmd: &Command{Kind: command.KindSecretUpdate, Data: map[string][]byte{"tls.key": []byte("k")}, RemoveKeys: []string{"__proto__"}}}
	out := f.replacement(live, live.Data, 3)
	require.Equal(t, map[string][]byte{"tls.crt": []byte(canary), "tls.key": []byte("k")}, out.Data)
	require.Equal(t, "4", out.Annotations[AnnotationVersion])
	require.Equal(t, "x", out.Annotations["controller.example/owner"])
	require.Equal(t, live.OwnerReferences, out.OwnerReferences)
	require.Equal(t, live.Finalizers, out.Finalizers)
	require.Equal(t, live.UID, out.UID)
	require.Equal(t, live.ResourceVersion, out.ResourceVersion)
	require.Equal(t, corev1.SecretTypeTLS, out.Type)
	require.Equal(t, "3", live.Annotations[AnnotationVersion], "live is not modified")
	require.Contains(t, live.Data, "__proto__")

	restore := &family{cmd: &Command{Kind: command.KindSecretRestore}}
	target := map[string][]byte{"__proto__": {0xef, 0xbb, 0xbf, 0, 0xff}}
	require.Equal(t, target, restore.replacement(live, target, 3).Data)
}

func writeCommand(t *testing.T, body string, mode os.FileMode) *command.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cmd.json")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	require.NoError(t, os.Chmod(path, mode))
	f, err := command.Read(path, command.ReadOptions{})
	require.NoError(t, err)
	return f
}

func envelope(kind, spec string) string {
	return `{"apiVersion":"keyledger.dev/v1","kind":"` + kind + `","metadata":{"requestId":"r-1","mutationId":"m-1"},"spec":` + spec + `}`
}

func TestDecode(t *testing.T) {
	t.Parallel()
	b64 := "Q0FOQVJZLVZFUlNJT05FRC1WQUxVRQ==" // canary
	cases := []struct {
		name, kind, spec string
		mode             os.FileMode
		field, problem   string
	}{
		{name: "update", kind: "SecretUpdate", spec: `{"namespace":"shop","name":"db","expectedResourceVersion":"123","data":{"password":"` + b64 + `"},"removeKeys":["old"]}`},
		{name: "create", kind: "SecretUpdate", spec: `{"namespace":"shop","name":"db","expectedResourceVersion":"","data":{"password":"` + b64 + `"}}`},
		{name: "restore", kind: "SecretRestore", spec: `{"namespace":"shop","name":"db","version":3,"expectedResourceVersion":"130"}`},
		{name: "delete", kind: "SecretDelete", spec: `{"namespace":"shop","name":"db","expectedResourceVersion":"131","keepHistory":false}`},

		{name: "group readable", kind: "SecretUpdate", mode: 0o640, spec: `{"namespace":"shop","name":"db","expectedResourceVersion":"1","data":{"p":"` + b64 + `"}}`},
		{name: "world readable restore", kind: "SecretRestore", mode: 0o604, spec: `{"namespace":"shop","name":"db","version":3,"expectedResourceVersion":"130"}`},
		{name: "missing rv", kind: "SecretUpdate", spec: `{"namespace":"shop","name":"db","data":{"p":"` + b64 + `"}}`, field: "spec.expectedResourceVersion", problem: "required"},
		{name: "bad base64", kind: "SecretUpdate", spec: `{"namespace":"shop","name":"db","expectedResourceVersion":"1","data":{"p":"` + canary + `"}}`, field: `spec.data["p"]`},
		{name: "non-canonical base64", kind: "SecretUpdate", spec: `{"namespace":"shop","name":"db","expectedResourceVersion":"1","data":{"p":"QR=="}}`, field: `spec.data["p"]`},
		{name: "bad key", kind: "SecretUpdate", spec: `{"namespace":"shop","name":"db","expectedResourceVersion":"1","data":{"a/b":"QQ=="}}`, field: `spec.data["a/b"]`},
		{name: "nothing", kind: "SecretUpdate", spec: `{"namespace":"shop","name":"db","expectedResourceVersion":"1"}`, field: "spec"},
		{name: "remove on create", kind: "SecretUpdate", spec: `{"namespace":"shop","name":"db","expectedResourceVersion":"","data":{"p":"QQ=="},"removeKeys":["x"]}`, field: "spec.removeKeys"},
		{name: "remove and set", kind: "SecretUpdate", spec: `{"namespace":"shop","name":"db","expectedResourceVersion":"1","data":{"p":"QQ=="},"removeKeys":["p"]}`, field: "spec.removeKeys[0]"},
		{name: "remove twice", kind: "SecretUpdate", spec: `{"namespace":"shop","name":"db","expectedResourceVersion":"1","removeKeys":["p","p"]}`, field: "spec.removeKeys[1]"},
		{name: "unknown field", kind: "SecretUpdate", spec: `{"namespace":"shop","name":"db","expectedResourceVersion":"1","datas":{}}`, field: "spec.datas"},
		{name: "snapshot as live", kind: "SecretDelete", spec: `{"namespace":"shop","name":"keyledger-h-abc-v1","expectedResourceVersion":"1","keepHistory":true}`, field: "spec.name"},
		{name: "version zero", kind: "SecretRestore", spec: `{"namespace":"shop","name":"db","version":0,"expectedResourceVersion":"1"}`, field: "spec.version"},
		{name: "version fraction", kind: "SecretRestore", spec: `{"namespace":"shop","name":"db","version":1.5,"expectedResourceVersion":"1"}`, field: "spec.version"},
		{name: "restore without rv", kind: "SecretRestore", spec: `{"namespace":"shop","name":"db","version":2,"expectedResourceVersion":""}`, field: "spec.expectedResourceVersion"},
		{name: "delete without keepHistory", kind: "SecretDelete", spec: `{"namespace":"shop","name":"db","expectedResourceVersion":"1"}`, field: "spec.keepHistory", problem: "required"},
		{name: "rv with space", kind: "SecretDelete", spec: `{"namespace":"shop","name":"db","expectedResourceVersion":"1 2","keepHistory":true}`, field: "spec.expectedResourceVersion"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mode := tc.mode
			if mode == 0 {
				mode = 0o600
			}
			cmd, err := Decode(writeCommand(t, envelope(tc.kind, tc.spec), mode))
			if tc.mode != 0 {
				require.ErrorIs(t, err, &command.FileError{Reason: command.ReasonNotPrivate})
				return
			}
			if tc.field == "" {
				require.NoError(t, err)
				require.Equal(t, tc.kind, cmd.Kind)
				require.True(t, strings.HasPrefix(cmd.Digest, "sha256:"))
				if tc.name == "update" || tc.name == "create" {
					require.Equal(t, []byte(canary), cmd.Data["password"])
				}
				return
			}
			var ie *command.InvalidError
			require.ErrorAs(t, err, &ie, "%v", err)
			require.Equal(t, tc.field, ie.Field, "%v", err)
			if tc.problem != "" {
				require.Equal(t, tc.problem, ie.Problem)
			}
			require.NotContains(t, err.Error(), canary)
			require.NotContains(t, err.Error(), "QR==")
		})
	}
}

func TestAccessMatrixShape(t *testing.T) {
	t.Parallel()
	m := AccessMatrix("shop", "db")
	allowed := map[string]bool{}
	for _, c := range m {
		allowed[c.Verb+" "+c.Resource+"/"+c.Name] = c.Allowed
	}
	for _, k := range []string{"get secrets/db", "update secrets/db", "delete secrets/db", "list secrets/", "create secrets/", "get secrets/", "delete secrets/"} {
		require.True(t, allowed[k], k)
	}
	for _, k := range []string{"patch secrets/db", "watch secrets/", "deletecollection secrets/", "update secrets/keyledger-matrix-probe"} {
		v, ok := allowed[k]
		require.True(t, ok, k)
		require.False(t, v, k)
	}
	for _, c := range AccessMatrix("shop", "keyledger-matrix-probe") {
		if c.Verb == "update" && !c.Allowed {
			require.NotEqual(t, "keyledger-matrix-probe", c.Name)
		}
	}
}

// A SecretUpdate's journaled command digest changes with any value but
// cannot be recomputed from a guessed value with one hash: values enter it
// only through salted PBKDF2 verifiers.
func TestUpdateDigestHidesValues(t *testing.T) {
	t.Parallel()
	spec := func(password string) string {
		return `{"namespace":"shop","name":"db","expectedResourceVersion":"7","data":{"password":"` +
			base64.StdEncoding.EncodeToString([]byte(password)) + `"}}`
	}
	decode := func(password string) *Command {
		t.Helper()
		cmd, err := Decode(writeCommand(t, envelope(command.KindSecretUpdate, spec(password)), 0o600))
		require.NoError(t, err)
		return cmd
	}
	a, again, b := decode("hunter2"), decode("hunter2"), decode("hunter3")
	require.Equal(t, a.Digest, again.Digest, "deterministic: a rerun of the same command resumes")
	require.NotEqual(t, a.Digest, b.Digest, "another value is another command")

	f := writeCommand(t, envelope(command.KindSecretUpdate, spec("hunter2")), 0o600)
	doc, err := command.Decode[UpdateSpec](f)
	require.NoError(t, err)
	plain, err := doc.Digest()
	require.NoError(t, err)
	require.NotEqual(t, plain, a.Digest, "the digest over the raw document would confirm a guess with one hash")
	for _, leak := range []string{"hunter2", base64.StdEncoding.EncodeToString([]byte("hunter2")), fmt.Sprintf("%x", sha256.Sum256([]byte("hunter2")))} {
		require.NotContains(t, a.Digest, leak)
	}
}
