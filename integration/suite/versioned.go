package suite

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/keyledger/keyledger/workflow/versioned"
)

// AddFinalizer adds a finalizer to a Secret as admin; removed at cleanup.
func (e *Env) AddFinalizer(name string) {
	e.T.Helper()
	c := e.Kube.Client().CoreV1().Secrets(e.NS)
	_, err := c.Patch(e.T.Context(), name, types.MergePatchType, []byte(`{"metadata":{"finalizers":["keyledger.test/hold"]}}`), metav1.PatchOptions{})
	require.NoError(e.T, err)
	e.T.Cleanup(func() { e.RemoveFinalizers(name) })
}

// DenyDelete makes the API server refuse every DELETE of the Secret name
// in this namespace (a ValidatingAdmissionPolicy), and waits until it
// does. The returned function lifts it and waits until deletes pass.
func (e *Env) DenyDelete(name string) (lift func()) {
	e.T.Helper()
	ctx, c := e.T.Context(), e.Kube.Client().AdmissionregistrationV1()
	policy := "keyledger-test-deny-" + e.NS
	fail := admissionv1.Fail
	_, err := c.ValidatingAdmissionPolicies().Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.NS}},
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Delete},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
				}}},
			},
			Validations: []admissionv1.Validation{{Expression: fmt.Sprintf("request.name != %q", name), Message: "held by a test policy"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(e.T, err)
	_, err = c.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}, metav1.CreateOptions{})
	require.NoError(e.T, err)
	denied := func() bool {
		err := e.Kube.Client().CoreV1().Secrets(e.NS).Delete(ctx, name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "held by a test policy")
	}
	require.Eventually(e.T, denied, time.Minute, 200*time.Millisecond, "the policy takes effect")
	lifted := false
	lift = func() {
		if lifted {
			return
		}
		lifted = true
		_ = c.ValidatingAdmissionPolicyBindings().Delete(ctx, policy, metav1.DeleteOptions{})
		_ = c.ValidatingAdmissionPolicies().Delete(ctx, policy, metav1.DeleteOptions{})
		require.Eventually(e.T, func() bool { return !denied() }, time.Minute, 200*time.Millisecond, "the policy is lifted")
	}
	e.T.Cleanup(lift)
	return lift
}

// VCanary returns a distinctive value that must never appear in any output.
func VCanary(tag string) []byte { return []byte("VCANARY-" + tag + "-7f3a9c") }

// VersionedRules are exactly the rights the versioned-writes family needs
// for the live Secret name, as the family declares them.
func VersionedRules(name string) []rbacv1.PolicyRule { return versioned.Rules(name) }

// AsWriter runs each command as a ServiceAccount holding exactly the
// family's rights on that command's live Secret: one identity per name,
// since update must reach no other Secret (the rules review refuses an
// identity that may update two). The names are the live Secrets the test
// will write; the option picks the identity from the command file's
// spec.name, or from the NAMESPACE/NAME argument of history.
func (e *Env) AsWriter(names ...string) RunOption {
	e.T.Helper()
	if e.Retirers == nil {
		e.Retirers = map[string]string{}
	}
	paths := map[string]string{}
	for _, name := range names {
		key := "writer:" + name
		if _, ok := e.Retirers[key]; !ok {
			e.Retirers[key] = e.ServiceAccountKubeconfig("writer-"+name, VersionedRules(name))
		}
		paths[name] = e.Retirers[key]
	}
	return func(c *exec.Cmd) {
		name := CommandTarget(c.Args[1:])
		path, ok := paths[name]
		if !ok {
			panic(fmt.Sprintf("asWriter: no identity for live Secret %q (have %v)", name, names))
		}
		c.Env = append(c.Env, "KUBECONFIG="+path)
	}
}

// CommandTarget is the live Secret a keyledger invocation acts on: spec.name
// of `run FILE`, or NAME of `history NAMESPACE/NAME`.
func CommandTarget(args []string) string {
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

// B64Map encodes each value in standard base64, as a command's data.
func B64Map(data map[string][]byte) map[string]string {
	out := map[string]string{}
	for k, v := range data {
		out[k] = base64.StdEncoding.EncodeToString(v)
	}
	return out
}

// VMeta is a versioned command's apiVersion, kind and metadata.
func VMeta(kind, mutation string) map[string]any {
	return map[string]any{
		"apiVersion": "keyledger.dev/v1", "kind": kind,
		"metadata": map[string]any{"requestId": "req-" + mutation, "mutationId": mutation},
	}
}

// UpdateCommand is a SecretUpdate of ns/name at rv writing data (and
// removing the keys remove).
func UpdateCommand(ns, name, rv, mutation string, data map[string][]byte, remove ...string) map[string]any {
	c := VMeta("SecretUpdate", mutation)
	spec := map[string]any{"namespace": ns, "name": name, "expectedResourceVersion": rv, "data": B64Map(data)}
	if len(remove) > 0 {
		spec["removeKeys"] = remove
	}
	c["spec"] = spec
	return c
}

// DeleteCommand is a SecretDelete of ns/name at rv.
func DeleteCommand(ns, name, rv, mutation string, keepHistory bool) map[string]any {
	c := VMeta("SecretDelete", mutation)
	c["spec"] = map[string]any{"namespace": ns, "name": name, "expectedResourceVersion": rv, "keepHistory": keepHistory}
	return c
}

// RunCmd writes cmd to a 0600 file named after its mutation and runs it.
func (e *Env) RunCmd(cmd map[string]any, opts ...RunOption) Result {
	e.T.Helper()
	mutation := cmd["metadata"].(map[string]any)["mutationId"].(string)
	return e.Keyledger([]string{"run", e.WriteCommand(mutation+".json", cmd)}, opts...)
}

// RequireOK checks a run exited 0 with the given outcome.
func RequireOK(t *testing.T, r Result, want string) map[string]any {
	t.Helper()
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out := Outcome(t, r)
	require.Equal(t, want, out["outcome"], "stdout %s", r.Stdout)
	return out
}

// RequireRefused checks a run exited 2 with reason.
func RequireRefused(t *testing.T, r Result, reason string) map[string]any {
	t.Helper()
	require.Equal(t, 2, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out := Outcome(t, r)
	require.Equal(t, reason, out["reason"], "stdout %s", r.Stdout)
	return out
}

// PlainSecret is an adopted Secret (no version counter).
func PlainSecret(name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeOpaque, Data: data}
}

// SnapshotsOf lists, as admin, every Secret labelled as history of uid,
// sorted by name (valid or not: tests look at what is really there).
func (e *Env) SnapshotsOf(uid types.UID) []corev1.Secret {
	e.T.Helper()
	list, err := e.Kube.Client().CoreV1().Secrets(e.NS).List(e.T.Context(), metav1.ListOptions{LabelSelector: versioned.SnapshotSelector(uid)})
	require.NoError(e.T, err)
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// VersionsOf returns the snapshot versions present for uid.
func (e *Env) VersionsOf(uid types.UID) []string {
	e.T.Helper()
	var out []string
	for _, s := range e.SnapshotsOf(uid) {
		out = append(out, s.Annotations[versioned.AnnotationVersion])
	}
	sort.Strings(out)
	return out
}

// RequireSnapshot checks that the snapshot of version n of live (as it was
// at source) exists in the documented format with source's exact bytes.
func (e *Env) RequireSnapshot(source *corev1.Secret, n int64, mutation string) *corev1.Secret {
	e.T.Helper()
	name := versioned.SnapshotName(source.UID, n)
	require.LessOrEqual(e.T, len(name), 60)
	s, err := e.Kube.Client().CoreV1().Secrets(e.NS).Get(e.T.Context(), name, metav1.GetOptions{})
	require.NoError(e.T, err, "snapshot v%d", n)
	require.Equal(e.T, corev1.SecretTypeOpaque, s.Type)
	require.NotNil(e.T, s.Immutable)
	require.True(e.T, *s.Immutable)
	require.Equal(e.T, source.Data, s.Data, "byte-for-byte copy")
	require.Empty(e.T, s.OwnerReferences)
	require.Empty(e.T, s.Finalizers)
	require.Equal(e.T, map[string]string{
		"keyledger.dev/managed-by": "keyledger", "keyledger.dev/kind": "history",
		"keyledger.dev/source-uid": versioned.Hash(string(source.UID)), "keyledger.dev/source-resource-version": versioned.Hash(source.ResourceVersion),
	}, s.Labels)
	a := s.Annotations
	require.Len(e.T, a, 9, "%v", a)
	require.Regexp(e.T, "^[0-9a-f]{32}$", a["keyledger.dev/nonce"], "the nonce journaled with the create")
	require.Equal(e.T, "uid-rv-v1", a["keyledger.dev/history-format"])
	require.Equal(e.T, string(source.UID), a["keyledger.dev/source-uid"])
	require.Equal(e.T, source.ResourceVersion, a["keyledger.dev/source-resource-version"])
	require.Equal(e.T, source.Name, a["keyledger.dev/source-name"])
	require.Equal(e.T, string(source.Type), a["keyledger.dev/source-type"])
	require.Equal(e.T, fmt.Sprint(n), a["keyledger.dev/version"])
	require.NotEmpty(e.T, a["keyledger.dev/snapshot-time"])
	if mutation != "" {
		require.Equal(e.T, "req-"+mutation+"/"+mutation, a["keyledger.dev/actor"])
	}
	return s
}

// RemoveFinalizers clears an object's finalizers (test cleanup).
func (e *Env) RemoveFinalizers(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*1e9)
	defer cancel()
	c := e.Kube.Client().CoreV1().Secrets(e.NS)
	_, _ = c.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
}

// AssertNoCanary fails when any canary appears in s.
func AssertNoCanary(t *testing.T, s string, canaries ...[]byte) {
	t.Helper()
	for _, c := range canaries {
		require.NotContains(t, s, string(c), "a value leaked")
		require.NotContains(t, s, base64.StdEncoding.EncodeToString(c), "a value leaked (base64)")
	}
}

// MaximalUpdate is the largest valid SecretUpdate: versioned.MaxUpdateKeys
// keys (plus extra more, to go over the bound), each name of the longest
// valid length, values filling the command file up to its 64 KiB limit.
func MaximalUpdate(ns, name, rv, mutation string, extra int) (map[string]any, map[string][]byte) {
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
		cmd := UpdateCommand(ns, name, rv, mutation, data)
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

// HistoryLoadSQL journals $3 finished versioned updates of Secret $2 in
// namespace $1 (live UID $4), each with its create-snapshot call on the
// snapshot slot $5 || n (n from 1) and the applied result answering the
// snapshot UID $4 || '-snap-' || n, as the owner in one statement.
const HistoryLoadSQL = `
	WITH ops AS (
	  INSERT INTO keyledger.operations (kind, mutation_id, request_id, command_digest, target_namespace, target_name)
	  SELECT 'SecretUpdate', $2 || '-update-' || g, 'req', 'sha256:' || repeat('0', 64), $1, $2
	  FROM generate_series(1, $3::int) g
	  RETURNING id, substring(mutation_id FROM '[0-9]+$')::int AS n)
	INSERT INTO keyledger.records (operation_id, kind, step, target, attempt, batch, uid, status)
	SELECT id, k.kind::keyledger.record_kind, 'create-snapshot', 'secret/' || $5 || n, k.attempt, k.attempt - 1,
	       CASE WHEN k.kind = 'authority_call' THEN $4 ELSE $4 || '-snap-' || n END, k.status
	FROM ops, (VALUES ('authority_call', 1, ''), ('authority_result', NULL, 'applied')) k(kind, attempt, status)
	ORDER BY id, k.kind`

// SeedSecrets creates n Secrets named prefix-0000... in the test's
// namespace (as admin, 8 at a time), each with annotate's annotations.
func (e *Env) SeedSecrets(prefix string, n int, annotate func(i int) map[string]string) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(e.T.Context(), 10*time.Minute)
	defer cancel()
	c := e.Kube.Client().CoreV1().Secrets(e.NS)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%04d", prefix, i), Annotations: annotate(i)},
				Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"k": []byte("v")}}
			if _, err := c.Create(ctx, s, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(e.T, err)
	}
}

// RunSummary is keyledger's "run finished" line from stderr.
func RunSummary(t *testing.T, r Result) map[string]any {
	t.Helper()
	s := Sample{}
	for _, line := range strings.Split(r.Stderr, "\n") {
		if strings.Contains(line, `"msg":"run finished"`) {
			s.Summary = map[string]any{}
			require.NoError(t, json.Unmarshal([]byte(line), &s.Summary))
		}
	}
	require.NotNil(t, s.Summary, "no run finished line: %s", r.Stderr)
	return s.Summary
}

// Planter is another identity in the namespace: it may create and get
// Secrets and nothing else, which is all a look-alike needs.
func (e *Env) Planter() kubernetes.Interface {
	e.T.Helper()
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "get"}}}
	ctx, c := e.T.Context(), e.Kube.Client()
	_, err := c.RbacV1().Roles(e.NS).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "planter"}, Rules: rules}, metav1.CreateOptions{})
	require.NoError(e.T, err)
	_, err = c.RbacV1().RoleBindings(e.NS).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "planter"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "planter"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "planter", Namespace: e.NS}},
	}, metav1.CreateOptions{})
	require.NoError(e.T, err)
	cfg, err := e.Kube.ServiceAccountConfig(ctx, e.NS, "planter", 600)
	require.NoError(e.T, err)
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(e.T, err)
	return client
}

// uidsOf maps each snapshot name of live to its UID and resourceVersion.
func (e *Env) ObjectsOf(uid types.UID) map[string]string {
	e.T.Helper()
	out := map[string]string{}
	for _, s := range e.SnapshotsOf(uid) {
		out[s.Name] = string(s.UID) + "@" + s.ResourceVersion
	}
	return out
}

// Update runs one SecretUpdate of name from its current state.
func (e *Env) Update(name, mutation string, value []byte, opts ...RunOption) Result {
	e.T.Helper()
	cur := e.GetSecret(name)
	return e.RunCmd(UpdateCommand(e.NS, name, cur.ResourceVersion, mutation, map[string][]byte{"k": value}), opts...)
}

// RestoreCommand is a SecretRestore of version of ns/name at rv.
func RestoreCommand(ns, name, rv, mutation string, version int64) map[string]any {
	c := VMeta("SecretRestore", mutation)
	c["spec"] = map[string]any{"namespace": ns, "name": name, "expectedResourceVersion": rv, "version": version}
	return c
}
