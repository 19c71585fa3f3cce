package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/credentials"
)

// GeneratorBackedExternalSecret is an ExternalSecret whose data comes from a
// Password generator, with target name and owner creation as ESO sets them.
func GeneratorBackedExternalSecret(name, generator string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"refreshPolicy": "CreatedOnce",
			"target":        map[string]any{"name": name, "creationPolicy": "Owner"},
			"dataFrom": []any{map[string]any{"sourceRef": map[string]any{"generatorRef": map[string]any{
				"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Password", "name": generator}}}},
		},
	}}
}

func RemoteExternalSecret(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"secretStoreRef": map[string]any{"name": "vault", "kind": "SecretStore"},
			"target":         map[string]any{"name": name},
			"data": []any{map[string]any{"secretKey": "password",
				"remoteRef": map[string]any{"key": "shop/cache", "property": "password"}}},
		},
	}}
}

// DenySecretCreate installs a ValidatingAdmissionPolicy that makes the API
// server refuse the creation of the Secret called name in the test's
// namespace, and waits until it is enforced (a dry-run create is refused).
func (e *Env) DenySecretCreate(name string) {
	e.T.Helper()
	ctx, c := e.T.Context(), e.Kube.Client()
	policy := "deny-" + e.NS
	fail := admissionregistrationv1.Fail
	_, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name != '" + name + "'", Message: "denied by the test"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(e.T, err)
	e.T.Cleanup(func() {
		_ = c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), policy, metav1.DeleteOptions{})
		_ = c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), policy, metav1.DeleteOptions{})
	})
	_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.NS}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(e.T, err)
	require.Eventually(e.T, func() bool {
		_, err := c.CoreV1().Secrets(e.NS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil
	}, 30*time.Second, 100*time.Millisecond, "the admission policy is never enforced")
}

// SecretWritesSince counts, per name, every write the API server made to
// the namespace's Secrets after resourceVersion from (creates, updates,
// patches and deletes), up to now.
func (e *Env) SecretWritesSince(from string) map[string]int {
	e.T.Helper()
	writes := map[string]int{}
	for _, ev := range e.secretEventsSince(from) {
		writes[ev.Secret.Name]++
	}
	return writes
}

// ConcurrentPlanOutcome is the outcome of one of many concurrent runs of
// one plan, which must exit 0: the runs that arrive while another drives
// the run join it (its live lock), so none is refused run-resume-limit or
// ends attempts-exhausted.
func ConcurrentPlanOutcome(t *testing.T, i int, r Result) string {
	t.Helper()
	require.Equal(t, 0, r.Code, "run %d: stdout %s stderr %s", i, r.Stdout, r.Stderr)
	return fmt.Sprint(Outcome(t, r)["outcome"])
}

// Adoptable creates what External Secrets Operator leaves behind for one
// generator-backed Secret: the Password generator (when generator is not
// empty), the ExternalSecret (with finalizers, if any) and the Secret it
// owns. Without a generator to create, the ExternalSecret names
// <name>-password. It returns the ExternalSecret.
func (e *Env) Adoptable(name, generator string, finalizers ...string) *unstructured.Unstructured {
	e.T.Helper()
	InstallExternalSecretsCRDs(e.T)
	ctx, dyn := e.T.Context(), e.DynamicClient()
	if generator != "" {
		e.PasswordGenerator(generator)
	} else {
		generator = name + "-password"
	}
	obj := GeneratorBackedExternalSecret(name, generator)
	if len(finalizers) > 0 {
		obj.SetFinalizers(finalizers)
	}
	es, err := dyn.Resource(ExternalSecretsGVR).Namespace(e.NS).Create(ctx, obj, metav1.CreateOptions{})
	require.NoError(e.T, err)
	yes := true
	e.CreateSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "external-secrets.io/v1", Kind: "ExternalSecret", Name: name,
			UID: es.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}},
		Data: map[string][]byte{"password": []byte("CANARY-generated-by-eso-" + name)}})
	return es
}

func (e *Env) PasswordGenerator(name string) *unstructured.Unstructured {
	e.T.Helper()
	g, err := e.DynamicClient().Resource(PasswordsGVR).Namespace(e.NS).Create(e.T.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Password",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"length": int64(32), "allowRepeat": true, "noUpper": false},
	}}, metav1.CreateOptions{})
	require.NoError(e.T, err)
	return g
}

// PlanSecret is one planned Secret of a test plan.
type PlanSecret struct {
	Name   string
	Labels map[string]string
	Keys   []map[string]any
}

// Generated is a planned key with a generated value.
func Generated(name string, length int, alphabet string) map[string]any {
	return map[string]any{"name": name, "generate": map[string]any{"length": length, "alphabet": alphabet}}
}

// Literal is a planned key with a literal (non-secret) value.
func Literal(name, value string) map[string]any { return map[string]any{"name": name, "value": value} }

// StandardSecret has a generated password and a literal user name.
func StandardSecret(name string) PlanSecret {
	return PlanSecret{Name: name, Labels: map[string]string{"app.kubernetes.io/part-of": "shop"},
		Keys: []map[string]any{Generated("password", 32, "alphanumeric"), Literal("username", "app")}}
}

// CredentialPlan is a CredentialPlan command; opts change its spec.
func CredentialPlan(ns, mutation string, secrets []PlanSecret, opts ...func(spec map[string]any)) map[string]any {
	list := make([]any, len(secrets))
	for i, s := range secrets {
		entry := map[string]any{"name": s.Name, "keys": s.Keys}
		if len(s.Labels) > 0 {
			entry["labels"] = s.Labels
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

// SpecOf decodes a test plan's spec.
func SpecOf(t *testing.T, plan map[string]any) credentials.Spec {
	t.Helper()
	b, err := json.Marshal(plan["spec"])
	require.NoError(t, err)
	var s credentials.Spec
	require.NoError(t, json.Unmarshal(b, &s))
	return s
}

// AsCredentialRunner runs as a ServiceAccount holding exactly the rendered
// Role of the plan (credentials.Rules).
func (e *Env) AsCredentialRunner(plan map[string]any) RunOption {
	e.T.Helper()
	return AsKubeconfig(e.ServiceAccountKubeconfig("credentials-"+RandomSuffix(e.T), credentials.Rules(SpecOf(e.T, plan))))
}

// SecretsRV is a resourceVersion of the namespace's Secrets taken now: the
// starting point for counting writes to Secrets created later.
func (e *Env) SecretsRV() string {
	e.T.Helper()
	l, err := e.Kube.Client().CoreV1().Secrets(e.NS).List(e.T.Context(), metav1.ListOptions{Limit: 1})
	require.NoError(e.T, err)
	return l.ResourceVersion
}

// SecretValues returns every data value of the named Secrets (canaries for
// the output and journal checks).
func (e *Env) SecretValues(names ...string) [][]byte {
	e.T.Helper()
	var out [][]byte
	for _, n := range names {
		for _, v := range e.GetSecret(n).Data {
			if len(v) >= 8 { // literal user names are not secret
				out = append(out, v)
			}
		}
	}
	return out
}

// RequireNoValues checks that no value (nor its base64 form) appears in text.
func RequireNoValues(t *testing.T, text string, values [][]byte) {
	t.Helper()
	for _, v := range values {
		require.NotContains(t, text, string(v), "a Secret value leaked")
		b, _ := json.Marshal(v) // base64, as a JSON string
		require.NotContains(t, text, strings.Trim(string(b), `"`), "a Secret value leaked (base64)")
	}
}

// JournalText is every record of an operation as JSON, for leak checks.
func (e *Env) JournalText(mutation string) string {
	e.T.Helper()
	op, records := e.JournalOf(mutation)
	b, err := json.Marshal(map[string]any{"op": op, "records": records})
	require.NoError(e.T, err)
	return string(b)
}

// APIRequests parses "api_requests_by_verb" from a run's "run finished" line.
func APIRequests(t *testing.T, r Result) map[string]int {
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

// RecordsOf filters records by kind and step.
func RecordsOf(records []store.Record, kind store.RecordKind, step string) []store.Record {
	var out []store.Record
	for _, r := range records {
		if r.Kind == kind && (step == "" || r.Step == step) {
			out = append(out, r)
		}
	}
	return out
}

var (
	CRDOnce sync.Once
	CRDErr  error
)

// InstallExternalSecretsCRDs installs the published ExternalSecret and
// Password CRDs (integration/testdata/crds) once and waits until they serve.
func InstallExternalSecretsCRDs(t *testing.T) {
	t.Helper()
	CRDOnce.Do(func() { CRDErr = InstallCRDs(shared.kube) })
	require.NoError(t, CRDErr)
}

func InstallCRDs(k *platform.Kube) error {
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

// DynamicClient is an admin dynamic client.
func (e *Env) DynamicClient() dynamic.Interface {
	e.T.Helper()
	d, err := dynamic.NewForConfig(e.Kube.Config())
	require.NoError(e.T, err)
	return d
}

var (
	ExternalSecretsGVR = schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1", Resource: "externalsecrets"}
	PasswordsGVR       = schema.GroupVersionResource{Group: "generators.external-secrets.io", Version: "v1alpha1", Resource: "passwords"}
)

// RequireAlphabet checks a generated value's length and characters.
func RequireAlphabet(t *testing.T, v []byte, length int, chars string) {
	t.Helper()
	require.Len(t, v, length)
	for _, c := range v {
		require.True(t, strings.IndexByte(chars, c) >= 0, "character outside the alphabet")
	}
}

// SecretCreates counts, per name, the Secrets the API server created in the
// namespace after resourceVersion from (ADDED events), up to now.
func (e *Env) SecretCreates(from string) map[string]int {
	e.T.Helper()
	creates := map[string]int{}
	for _, ev := range e.secretEventsSince(from) {
		if ev.Type == watch.Added {
			creates[ev.Secret.Name]++
		}
	}
	return creates
}

// RunsOf reads every run of a plan as the schema owner, oldest first.
func (e *Env) RunsOf(mutation string) []*store.Operation {
	e.T.Helper()
	st, err := store.Open(e.T.Context(), e.Journal.OwnerURL)
	require.NoError(e.T, err)
	defer st.Close()
	runs, err := st.Runs(e.T.Context(), mutation)
	require.NoError(e.T, err)
	return runs
}

// Server is a real Valkey-protocol (redis-server) or NATS server process on
// a loopback address, playing the container of one pod.
//
// These repair tests keep the PlayKubelet stand-in on purpose: they need pod
// states a real node cannot give quickly or at all (a pod whose IP is a
// loopback address with a server that never answers, one that refuses
// forever, one whose replacement appears only when the test says). The
// repair as users get it, a StatefulSet's real pod restarted by the hook Job
// and recreated by the kubelet, is TestIntegrationNodeIncident316.
type Server struct {
	T          *testing.T
	Protocol   string
	Ip         string
	Port       int
	Dir        string
	Cmd        *exec.Cmd
	User       string
	ConfigFile string
}

func ServerBinary(protocol string) string {
	if protocol == "valkey" {
		return "redis-server"
	}
	return "nats-server"
}

// Start writes the server's configuration (mode 0600, so the password is
// in no process argument) and starts it, waiting until it listens.
func (s *Server) Start(password string) {
	s.T.Helper()
	s.ConfigFile = filepath.Join(s.Dir, "server.conf")
	var conf string
	if s.Protocol == "valkey" {
		conf = fmt.Sprintf("bind %s\nport %d\nrequirepass %s\nsave \"\"\nappendonly no\ndir %s\nprotected-mode no\n", s.Ip, s.Port, password, s.Dir)
	} else {
		conf = fmt.Sprintf("listen: %q\nauthorization { user: %q, password: %q }\n", net.JoinHostPort(s.Ip, strconv.Itoa(s.Port)), s.User, password)
	}
	require.NoError(s.T, os.WriteFile(s.ConfigFile, []byte(conf), 0o600))
	if s.Protocol == "valkey" {
		s.Cmd = exec.Command(ServerBinary(s.Protocol), s.ConfigFile)
	} else {
		s.Cmd = exec.Command(ServerBinary(s.Protocol), "-c", s.ConfigFile)
	}
	require.NoError(s.T, s.Cmd.Start())
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(s.Ip, strconv.Itoa(s.Port)), time.Second)
		if err == nil {
			c.Close()
			return
		}
		require.True(s.T, time.Now().Before(deadline), "%s did not start listening", s.Protocol)
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *Server) Stop() {
	if s.Cmd != nil && s.Cmd.Process != nil {
		_ = s.Cmd.Process.Kill()
		_ = s.Cmd.Wait()
		s.Cmd = nil
	}
}

// StatefulSet creates a one-replica StatefulSet; its controller creates the
// pod <name>-0 and replaces it when it is deleted.
func (e *Env) StatefulSet(name string) string {
	e.T.Helper()
	one := int32(1)
	labels := map[string]string{"app": name}
	_, err := e.Kube.Client().AppsV1().StatefulSets(e.NS).Create(e.T.Context(), &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{Replicas: &one, ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "server:test"}}}}},
	}, metav1.CreateOptions{})
	require.NoError(e.T, err)
	return name + "-0"
}

// PlayServerPod plays the kubelet for pod: the first incarnation is ready at
// s's address; when a replacement (new UID) appears, the server restarts
// with what the Secret holds now, as a real container would read it at
// start (restart(nil) keeps the wrong password), and only then is the
// replacement reported ready. It returns the first UID.
func (e *Env) PlayServerPod(ctx context.Context, pod string, s *Server, secret, userKey, passwordKey string, restartRight bool) types.UID {
	e.T.Helper()
	first, err := e.Kube.PlayKubelet(ctx, e.NS, pod, s.Ip)
	require.NoError(e.T, err)
	go func() {
		for ctx.Err() == nil {
			p, err := e.Kube.Client().CoreV1().Pods(e.NS).Get(ctx, pod, metav1.GetOptions{})
			if err == nil && p.UID != first.UID && p.DeletionTimestamp == nil {
				if restartRight {
					sec, err := e.Kube.Client().CoreV1().Secrets(e.NS).Get(ctx, secret, metav1.GetOptions{})
					if err != nil {
						continue
					}
					if userKey != "" {
						s.User = string(sec.Data[userKey])
					}
					s.Stop()
					s.Start(string(sec.Data[passwordKey]))
				}
				_, _ = e.Kube.PlayKubelet(ctx, e.NS, pod, s.Ip)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return first.UID
}

// AdoptingStatefulSet creates a one-replica StatefulSet (updateStrategy
// OnDelete) after someone planted a pod under its pod name name-0 with
// its selector's labels and identity: its controller adopts that pod (the
// pod's controller owner reference then carries the StatefulSet's UID,
// written by the controller itself), creates no pod of its own, and
// leaves it alone. It waits for the adoption.
func (e *Env) AdoptingStatefulSet(ctx context.Context, name string, containers []corev1.Container) *appsv1.StatefulSet {
	e.T.Helper()
	one := int32(1)
	labels := map[string]string{"app": name}
	sts, err := e.Kube.Client().AppsV1().StatefulSets(e.NS).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{Replicas: &one, ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: containers}}},
	}, metav1.CreateOptions{})
	require.NoError(e.T, err)
	require.NoError(e.T, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := e.Kube.Client().CoreV1().Pods(e.NS).Get(ctx, name+"-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ref := metav1.GetControllerOf(p)
		return ref != nil && ref.UID == sts.UID, nil
	}), "the StatefulSet's controller adopts the planted pod")
	return sts
}

// StatefulPodIdentity is what a StatefulSet's controller gives its pod
// set-<ordinal> (labels, hostname, subdomain): a pod planted with it is
// taken for one of its pods.
func StatefulPodIdentity(set string, ordinal int, spec corev1.PodSpec) (map[string]string, corev1.PodSpec) {
	name := set + "-" + strconv.Itoa(ordinal)
	spec.Hostname, spec.Subdomain = name, set
	return map[string]string{"app": set, "statefulset.kubernetes.io/pod-name": name, "apps.kubernetes.io/pod-index": strconv.Itoa(ordinal)}, spec
}

// AlphanumericChars is the alphabet of a generated alphanumeric password.
const AlphanumericChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
