package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/workflow/versioned"
)

// vCanary returns a distinctive value that must never appear in any output.
func vCanary(tag string) []byte { return []byte("VCANARY-" + tag + "-7f3a9c") }

// versionedRules are exactly the rights the versioned-writes family needs
// for the live Secret name, as the family declares them.
func versionedRules(name string) []rbacv1.PolicyRule { return versioned.Rules(name) }

// asWriter runs each command as a ServiceAccount holding exactly the
// family's rights on that command's live Secret: one identity per name,
// since update must reach no other Secret (the rules review refuses an
// identity that may update two). The names are the live Secrets the test
// will write; the option picks the identity from the command file's
// spec.name, or from the NAMESPACE/NAME argument of history.
func (e *env) asWriter(names ...string) runOption {
	e.t.Helper()
	if e.retirers == nil {
		e.retirers = map[string]string{}
	}
	paths := map[string]string{}
	for _, name := range names {
		key := "writer:" + name
		if _, ok := e.retirers[key]; !ok {
			e.retirers[key] = e.serviceAccountKubeconfig("writer-"+name, versionedRules(name))
		}
		paths[name] = e.retirers[key]
	}
	return func(c *exec.Cmd) {
		name := commandTarget(c.Args[1:])
		path, ok := paths[name]
		if !ok {
			panic(fmt.Sprintf("asWriter: no identity for live Secret %q (have %v)", name, names))
		}
		c.Env = append(c.Env, "KUBECONFIG="+path)
	}
}

// commandTarget is the live Secret a keyledger invocation acts on: spec.name
// of `run FILE`, or NAME of `history NAMESPACE/NAME`.
func commandTarget(args []string) string {
	if len(args) >= 2 && args[0] == "run" {
		var cmd struct {
			Spec struct {
				Name string `json:"name"`
			} `json:"spec"`
		}
		if b, err := os.ReadFile(args[1]); err == nil && json.Unmarshal(b, &cmd) == nil {
			return cmd.Spec.Name
		}
	}
	if len(args) >= 2 && args[0] == "history" {
		_, name, _ := strings.Cut(args[1], "/")
		return name
	}
	return ""
}

func b64map(data map[string][]byte) map[string]string {
	out := map[string]string{}
	for k, v := range data {
		out[k] = base64.StdEncoding.EncodeToString(v)
	}
	return out
}

func vMeta(kind, mutation string) map[string]any {
	return map[string]any{
		"apiVersion": "keyledger.dev/v1", "kind": kind,
		"metadata": map[string]any{"requestId": "req-" + mutation, "mutationId": mutation},
	}
}

func updateCommand(ns, name, rv, mutation string, data map[string][]byte, remove ...string) map[string]any {
	c := vMeta("SecretUpdate", mutation)
	spec := map[string]any{"namespace": ns, "name": name, "expectedResourceVersion": rv, "data": b64map(data)}
	if len(remove) > 0 {
		spec["removeKeys"] = remove
	}
	c["spec"] = spec
	return c
}

func restoreCommand(ns, name, rv, mutation string, version int64) map[string]any {
	c := vMeta("SecretRestore", mutation)
	c["spec"] = map[string]any{"namespace": ns, "name": name, "expectedResourceVersion": rv, "version": version}
	return c
}

func deleteCommand(ns, name, rv, mutation string, keepHistory bool) map[string]any {
	c := vMeta("SecretDelete", mutation)
	c["spec"] = map[string]any{"namespace": ns, "name": name, "expectedResourceVersion": rv, "keepHistory": keepHistory}
	return c
}

// runCmd writes cmd to a 0600 file named after its mutation and runs it.
func (e *env) runCmd(cmd map[string]any, opts ...runOption) result {
	e.t.Helper()
	mutation := cmd["metadata"].(map[string]any)["mutationId"].(string)
	return e.keyledger([]string{"run", e.writeCommand(mutation+".json", cmd)}, opts...)
}

// requireOK checks a run exited 0 with the given outcome.
func requireOK(t *testing.T, r result, want string) map[string]any {
	t.Helper()
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out := outcome(t, r)
	require.Equal(t, want, out["outcome"], "stdout %s", r.Stdout)
	return out
}

// requireRefused checks a run exited 2 with reason.
func requireRefused(t *testing.T, r result, reason string) map[string]any {
	t.Helper()
	require.Equal(t, 2, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out := outcome(t, r)
	require.Equal(t, reason, out["reason"], "stdout %s", r.Stdout)
	return out
}

// plainSecret is an adopted Secret (no version counter).
func plainSecret(name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeOpaque, Data: data}
}

// snapshotsOf lists, as admin, every Secret labelled as history of uid,
// sorted by name (valid or not: tests look at what is really there).
func (e *env) snapshotsOf(uid types.UID) []corev1.Secret {
	e.t.Helper()
	list, err := e.kube.Client().CoreV1().Secrets(e.ns).List(e.t.Context(), metav1.ListOptions{LabelSelector: versioned.SnapshotSelector(uid)})
	require.NoError(e.t, err)
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// versionsOf returns the snapshot versions present for uid.
func (e *env) versionsOf(uid types.UID) []string {
	e.t.Helper()
	var out []string
	for _, s := range e.snapshotsOf(uid) {
		out = append(out, s.Annotations[versioned.AnnotationVersion])
	}
	sort.Strings(out)
	return out
}

// requireSnapshot checks that the snapshot of version n of live (as it was
// at source) exists in the documented format with source's exact bytes.
func (e *env) requireSnapshot(source *corev1.Secret, n int64, mutation string) *corev1.Secret {
	e.t.Helper()
	name := versioned.SnapshotName(source.UID, n)
	require.LessOrEqual(e.t, len(name), 60)
	s, err := e.kube.Client().CoreV1().Secrets(e.ns).Get(e.t.Context(), name, metav1.GetOptions{})
	require.NoError(e.t, err, "snapshot v%d", n)
	require.Equal(e.t, corev1.SecretTypeOpaque, s.Type)
	require.NotNil(e.t, s.Immutable)
	require.True(e.t, *s.Immutable)
	require.Equal(e.t, source.Data, s.Data, "byte-for-byte copy")
	require.Empty(e.t, s.OwnerReferences)
	require.Empty(e.t, s.Finalizers)
	require.Equal(e.t, map[string]string{
		"keyledger.dev/managed-by": "keyledger", "keyledger.dev/kind": "history",
		"keyledger.dev/source-uid": versioned.Hash(string(source.UID)), "keyledger.dev/source-resource-version": versioned.Hash(source.ResourceVersion),
	}, s.Labels)
	a := s.Annotations
	require.Len(e.t, a, 9, "%v", a)
	require.Regexp(e.t, "^[0-9a-f]{32}$", a["keyledger.dev/nonce"], "the nonce journaled with the create")
	require.Equal(e.t, "uid-rv-v1", a["keyledger.dev/history-format"])
	require.Equal(e.t, string(source.UID), a["keyledger.dev/source-uid"])
	require.Equal(e.t, source.ResourceVersion, a["keyledger.dev/source-resource-version"])
	require.Equal(e.t, source.Name, a["keyledger.dev/source-name"])
	require.Equal(e.t, string(source.Type), a["keyledger.dev/source-type"])
	require.Equal(e.t, fmt.Sprint(n), a["keyledger.dev/version"])
	require.NotEmpty(e.t, a["keyledger.dev/snapshot-time"])
	if mutation != "" {
		require.Equal(e.t, "req-"+mutation+"/"+mutation, a["keyledger.dev/actor"])
	}
	return s
}

// removeFinalizers clears an object's finalizers (test cleanup).
func (e *env) removeFinalizers(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*1e9)
	defer cancel()
	c := e.kube.Client().CoreV1().Secrets(e.ns)
	_, _ = c.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
}

// assertNoCanary fails when any canary appears in s.
func assertNoCanary(t *testing.T, s string, canaries ...[]byte) {
	t.Helper()
	for _, c := range canaries {
		require.NotContains(t, s, string(c), "a value leaked")
		require.NotContains(t, s, base64.StdEncoding.EncodeToString(c), "a value leaked (base64)")
	}
}

// maximalUpdate is the largest valid SecretUpdate: versioned.MaxUpdateKeys
// keys (plus extra more, to go over the bound), each name of the longest
// valid length, values filling the command file up to its 64 KiB limit.
func maximalUpdate(ns, name, rv, mutation string, extra int) (map[string]any, map[string][]byte) {
	keys := versioned.MaxUpdateKeys + extra
	build := func(size int) (map[string]any, map[string][]byte, int) {
		data := map[string][]byte{}
		for i := range keys {
			v := make([]byte, size)
			for j := range v {
				v[j] = byte('a' + (i+j)%26)
			}
			data[fmt.Sprintf("k%02d-", i)+strings.Repeat("x", 253-4)] = v
		}
		cmd := updateCommand(ns, name, rv, mutation, data)
		b, _ := json.Marshal(cmd)
		return cmd, data, len(b)
	}
	size := 0
	for {
		if _, _, n := build(size + 3); n > 64<<10 {
			break
		}
		size += 3
	}
	cmd, data, _ := build(size)
	return cmd, data
}
