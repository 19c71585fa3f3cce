package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/credentials"
)

// planSecret is one planned Secret of a test plan.
type planSecret struct {
	name   string
	labels map[string]string
	keys   []map[string]any
}

// generated is a planned key with a generated value.
func generated(name string, length int, alphabet string) map[string]any {
	return map[string]any{"name": name, "generate": map[string]any{"length": length, "alphabet": alphabet}}
}

// literal is a planned key with a literal (non-secret) value.
func literal(name, value string) map[string]any { return map[string]any{"name": name, "value": value} }

// standardSecret has a generated password and a literal user name.
func standardSecret(name string) planSecret {
	return planSecret{name: name, labels: map[string]string{"app.kubernetes.io/part-of": "shop"},
		keys: []map[string]any{generated("password", 32, "alphanumeric"), literal("username", "app")}}
}

// credentialPlan is a CredentialPlan command; opts change its spec.
func credentialPlan(ns, mutation string, secrets []planSecret, opts ...func(spec map[string]any)) map[string]any {
	list := make([]any, len(secrets))
	for i, s := range secrets {
		entry := map[string]any{"name": s.name, "keys": s.keys}
		if len(s.labels) > 0 {
			entry["labels"] = s.labels
		}
		list[i] = entry
	}
	spec := map[string]any{"owner": "shop-orders-cache", "namespace": ns, "secrets": list}
	for _, o := range opts {
		o(spec)
	}
	return map[string]any{
		"apiVersion": "keyledger.dev/v1", "kind": "CredentialPlan",
		"metadata": map[string]any{"requestId": "req-" + mutation, "mutationId": mutation},
		"spec":     spec,
	}
}

// specOf decodes a test plan's spec.
func specOf(t *testing.T, plan map[string]any) credentials.Spec {
	t.Helper()
	b, err := json.Marshal(plan["spec"])
	require.NoError(t, err)
	var s credentials.Spec
	require.NoError(t, json.Unmarshal(b, &s))
	return s
}

// asCredentialRunner runs as a ServiceAccount holding exactly the rendered
// Role of the plan (credentials.Rules).
func (e *env) asCredentialRunner(plan map[string]any) runOption {
	e.t.Helper()
	return asKubeconfig(e.serviceAccountKubeconfig("credentials-"+randomSuffix(e.t), credentials.Rules(specOf(e.t, plan))))
}

// secretsRV is a resourceVersion of the namespace's Secrets taken now: the
// starting point for counting writes to Secrets created later.
func (e *env) secretsRV() string {
	e.t.Helper()
	l, err := e.kube.Client().CoreV1().Secrets(e.ns).List(e.t.Context(), metav1.ListOptions{Limit: 1})
	require.NoError(e.t, err)
	return l.ResourceVersion
}

// secretValues returns every data value of the named Secrets (canaries for
// the output and journal checks).
func (e *env) secretValues(names ...string) [][]byte {
	e.t.Helper()
	var out [][]byte
	for _, n := range names {
		for _, v := range e.getSecret(n).Data {
			if len(v) >= 8 { // literal user names are not secret
				out = append(out, v)
			}
		}
	}
	return out
}

// requireNoValues checks that no value (nor its base64 form) appears in text.
func requireNoValues(t *testing.T, text string, values [][]byte) {
	t.Helper()
	for _, v := range values {
		require.NotContains(t, text, string(v), "a Secret value leaked")
		b, _ := json.Marshal(v) // base64, as a JSON string
		require.NotContains(t, text, strings.Trim(string(b), `"`), "a Secret value leaked (base64)")
	}
}

// journalText is every record of an operation as JSON, for leak checks.
func (e *env) journalText(mutation string) string {
	e.t.Helper()
	op, records := e.journalOf(mutation)
	b, err := json.Marshal(map[string]any{"op": op, "records": records})
	require.NoError(e.t, err)
	return string(b)
}

// apiRequests parses "api_requests_by_verb" from a run's "run finished" line.
func apiRequests(t *testing.T, r result) map[string]int {
	t.Helper()
	for _, line := range strings.Split(r.Stderr, "\n") {
		if !strings.Contains(line, `"msg":"run finished"`) {
			continue
		}
		var m struct {
			ByVerb string `json:"api_requests_by_verb"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		out := map[string]int{}
		for _, kv := range strings.Split(m.ByVerb, ", ") {
			k, v, ok := strings.Cut(kv, "=")
			if ok {
				var n int
				fmt.Sscan(v, &n)
				out[k] = n
			}
		}
		return out
	}
	t.Fatalf("no run summary on stderr: %s", r.Stderr)
	return nil
}

// recordsOf filters records by kind and step.
func recordsOf(records []store.Record, kind store.RecordKind, step string) []store.Record {
	var out []store.Record
	for _, r := range records {
		if r.Kind == kind && (step == "" || r.Step == step) {
			out = append(out, r)
		}
	}
	return out
}

var (
	crdOnce sync.Once
	crdErr  error
)

// installExternalSecretsCRDs installs the published ExternalSecret and
// Password CRDs (integration/testdata/crds) once and waits until they serve.
func installExternalSecretsCRDs(t *testing.T) {
	t.Helper()
	crdOnce.Do(func() { crdErr = installCRDs(shared.kube) })
	require.NoError(t, crdErr)
}

func installCRDs(k *platform.Kube) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(k.Config())
	if err != nil {
		return err
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	paths, err := filepath.Glob(filepath.Join(platform.RepoRoot(), "integration", "testdata", "crds", "*.yaml"))
	if err != nil || len(paths) != 2 {
		return fmt.Errorf("want 2 CRD files, found %d (%v)", len(paths), err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(b, &obj); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		if _, err := crds.Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", u.GetName(), err)
		}
		for {
			got, err := crds.Get(ctx, u.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			established := false
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					established = true
				}
			}
			if established {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRD %s not established", u.GetName())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	// The API server serves a new CRD shortly after Established; wait until
	// a list answers.
	for _, gvr := range []schema.GroupVersionResource{
		{Group: "external-secrets.io", Version: "v1", Resource: "externalsecrets"},
		{Group: "generators.external-secrets.io", Version: "v1alpha1", Resource: "passwords"},
	} {
		for {
			if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s not served", gvr.Resource)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// dynamicClient is an admin dynamic client.
func (e *env) dynamicClient() dynamic.Interface {
	e.t.Helper()
	d, err := dynamic.NewForConfig(e.kube.Config())
	require.NoError(e.t, err)
	return d
}

var (
	externalSecretsGVR = schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1", Resource: "externalsecrets"}
	passwordsGVR       = schema.GroupVersionResource{Group: "generators.external-secrets.io", Version: "v1alpha1", Resource: "passwords"}
)

// requireAlphabet checks a generated value's length and characters.
func requireAlphabet(t *testing.T, v []byte, length int, chars string) {
	t.Helper()
	require.Len(t, v, length)
	for _, c := range v {
		require.True(t, strings.IndexByte(chars, c) >= 0, "character outside the alphabet")
	}
}

const alphanumericChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// rulesOf reads the rendered Role's rules.
func rulesOf(t *testing.T, dir string) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "2-role.yaml"))
	require.NoError(t, err)
	var role rbacv1.Role
	require.NoError(t, yaml.UnmarshalStrict(b, &role))
	return role.Rules
}

// rbacWider is one right the plan must not have.
func rbacWider() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}}
}

// secretCreates counts, per name, the Secrets the API server created in the
// namespace after resourceVersion from (ADDED events of its watch history),
// up to now: it writes a marker Secret and replays the history until the
// marker's creation.
func (e *env) secretCreates(from string) map[string]int {
	e.t.Helper()
	marker := e.createSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "zz-history-marker-" + randomSuffix(e.t)}})
	ctx, cancel := context.WithTimeout(e.t.Context(), 30*time.Second)
	defer cancel()
	w, err := e.kube.Client().CoreV1().Secrets(e.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: from})
	require.NoError(e.t, err, "opening watch")
	defer w.Stop()
	creates := map[string]int{}
	for {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(e.t, ok, "watch closed before the marker was seen")
			require.NotEqual(e.t, watch.Error, ev.Type, "watch error: %v", ev.Object)
			m, err := meta.Accessor(ev.Object)
			require.NoError(e.t, err)
			if m.GetName() == marker.Name {
				return creates
			}
			if ev.Type == watch.Added {
				creates[m.GetName()]++
			}
		case <-ctx.Done():
			e.t.Fatalf("the marker Secret never appeared in the watch history after %s", from)
		}
	}
}

// runsOf reads every run of a plan as the schema owner, oldest first.
func (e *env) runsOf(mutation string) []*store.Operation {
	e.t.Helper()
	st, err := store.Open(e.t.Context(), e.journal.OwnerURL)
	require.NoError(e.t, err)
	defer st.Close()
	runs, err := st.Runs(e.t.Context(), mutation)
	require.NoError(e.t, err)
	return runs
}
