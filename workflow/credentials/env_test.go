package credentials

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/kubetest"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// The plan the tables drive: two Secrets, the first adoptable from an
// ExternalSecret of its name with one retired generator, each with a server.
const (
	nsShop       = "shop"
	secretApp    = "shop-app"
	secretBus    = "shop-bus"
	generatorApp = "shop-app-password"
	podApp       = "shop-app-0"
	podBus       = "shop-bus-0"
)

// planSpec is a plan's spec; each table row starts from basePlan and may
// change it.
func basePlan() Spec {
	gen := func(n int) *Generate { return &Generate{Length: n, Alphabet: AlphabetAlphanumeric} }
	user := "bus"
	return Spec{
		Owner: "shop-orders", Namespace: nsShop,
		Secrets: []Secret{
			{Name: secretApp, Labels: map[string]string{"app.kubernetes.io/part-of": "shop"},
				Keys: []Key{{Name: "password", Generate: gen(32)}}},
			{Name: secretBus, Keys: []Key{{Name: "user", Value: &user}, {Name: "password", Generate: gen(16)}}},
		},
	}
}

// withAdoption lists the first Secret's ExternalSecret and its generator.
func withAdoption(s Spec) Spec {
	s.Adopt = []Adopt{{ExternalSecret: secretApp, Generators: []string{generatorApp}}}
	return s
}

// withServers names a Valkey server on the first Secret and a NATS server
// on the second.
func withServers(s Spec) Spec {
	s.Servers = []Server{
		{Protocol: ProtocolValkey, Pod: podApp, Port: 6379, Secret: secretApp, PasswordKey: "password"},
		{Protocol: ProtocolNATS, Pod: podBus, Port: 4222, Secret: secretBus, UserKey: "user", PasswordKey: "password"},
	}
	return s
}

// env is one namespace, one journal and one plan; each run is a new
// process (a new family, nothing in memory) on the same journal.
type env struct {
	t *testing.T
	k *credentialsAPI
	j *workflowtest.Journal
	// crash, when set, is asked before each transition commits (see
	// crashingStore).
	crash func(p store.TransitionParams) (commit bool, err error)
	cmd   *Command
	// random is crypto/rand until a row makes it fail.
	random *switchedRandom
	// died is the operation a first process left when it died (see
	// diedAt).
	died string
}

// switchedRandom reads crypto/rand until failing is set.
type switchedRandom struct{ failing atomic.Bool }

func (r *switchedRandom) Read(b []byte) (int, error) {
	if r.failing.Load() {
		return 0, errors.New("getrandom: no entropy")
	}
	return rand.Read(b)
}

func newEnv(t *testing.T, spec Spec) *env {
	t.Helper()
	raw, err := json.Marshal(spec)
	require.NoError(t, err)
	cmd, err := decode(t, `{"apiVersion":"keyledger.dev/v1","kind":"CredentialPlan","metadata":{"requestId":"r-1","mutationId":"m-1"},"spec":`+string(raw)+`}`)
	require.NoError(t, err)
	e := &env{t: t, k: newCredentialsAPI(), j: workflowtest.NewJournal(), cmd: cmd, random: &switchedRandom{}}
	e.k.serverSecret = func(pod string) (string, string) {
		for _, srv := range cmd.Spec.Servers {
			if srv.Pod == pod {
				return srv.Secret, srv.PasswordKey
			}
		}
		return "", ""
	}
	return e
}

// family is what Plan builds, on the double's seams.
func (e *env) family() *family {
	f := newFamily(e.cmd, e.k)
	f.probe, f.poll, f.reprobe, f.random = e.k.probe, pollAtOnce, pollAtOnce, e.random
	return f
}

// result is one run's end.
type result struct {
	res     *workflow.Result
	op      *store.Operation
	records []store.Record
	err     error
}

// run is one process running the plan (workflow.Operate, as Execute runs
// it once the permission matrix held): it resumes the newest run when it is
// unfinished, else starts the next one, and drives it.
func (e *env) run() result {
	e.t.Helper()
	ctx := context.Background()
	plan := e.plan()
	require.True(e.t, plan.Runs, "a plan is desired state")
	res, err := workflow.Operate(ctx, &crashingStore{Journal: e.j, crash: e.crash}, plan, nil)
	require.NotNil(e.t, res.Run, "prepared: %v", err)
	op, records, serr := e.j.Snapshot(ctx, "", res.Run.Op.MutationID)
	require.NoError(e.t, serr)
	return result{res: res, op: op, records: records, err: err}
}

// crashingStore is the in-memory journal with a process that can die at
// a transition: crash says whether the transition commits and what the
// caller sees (an error right before or right after the commit).
type crashingStore struct {
	*workflowtest.Journal
	crash func(p store.TransitionParams) (commit bool, err error)
}

var errCrash = errors.New("process killed")

func (c *crashingStore) Transition(ctx context.Context, p store.TransitionParams) (*store.Operation, error) {
	if c.crash == nil {
		return c.Journal.Transition(ctx, p)
	}
	commit, crashed := c.crash(p)
	if !commit {
		return nil, crashed
	}
	op, err := c.Journal.Transition(ctx, p)
	if err != nil || crashed != nil {
		return nil, errors.Join(err, crashed)
	}
	return op, nil
}

// plan is what Plan builds (its client never contacted), on the double's
// seams.
func (e *env) plan() workflow.Plan {
	plan, err := Plan(e.cmd, &rest.Config{Host: "https://127.0.0.1:6443"})
	require.NoError(e.t, err)
	plan.Family = e.family()
	return plan
}

// Ending is how the run ended, in workflowtest.Ending's spelling.
func (r result) Ending() string { return workflowtest.Ending(r.res, r.err) }

// Trail is the operation's journal in short: each record's kind (see
// kinds).
func (r result) Trail() []string { return kinds(r.records) }

// summary is the completion's (or refusal's) detail.
func (r result) summary() map[string]any {
	run := &workflow.Run{Op: r.op, Records: r.records}
	return workflowtest.Fields(run.Ending())
}

// trail lists the records of kind (and step, when given) as
// "step target status/reason".
func (r result) trail(kind store.RecordKind, step string) []string {
	var out []string
	for _, rec := range r.records {
		if rec.Kind == kind && (step == "" || rec.Step == step) {
			out = append(out, fmt.Sprintf("%s %s %s/%s", rec.Step, rec.Target, rec.Status, rec.Reason))
		}
	}
	return out
}

// calls lists the authority calls as "step target".
func (r result) calls() []string {
	var out []string
	for _, rec := range r.records {
		if rec.Kind == store.RecordAuthorityCall {
			out = append(out, rec.Step+" "+rec.Target.String())
		}
	}
	return out
}

// secretsCount is the completion summary's Secret counts, but for the
// count of unproven Secrets (unproven).
func (r result) secretsCount() map[string]any {
	s, _ := r.summary()["secrets"].(map[string]any)
	out := map[string]any{}
	for k, v := range s {
		if k != "unproven" {
			out[k] = v
		}
	}
	return out
}

// unproven is the completion summary's count of Secrets kept without proof
// of authorship (-1 when it has none).
func (r result) unproven() int {
	s, _ := r.summary()["secrets"].(map[string]any)
	n, ok := s["unproven"].(float64)
	if !ok {
		return -1
	}
	return int(n)
}

// authorship is the completion summary's authorship of each Secret.
func (r result) authorship() map[string]any {
	a, _ := r.summary()["authorship"].(map[string]any)
	return a
}

func counts(planned, created, patched, existing, unchanged int) map[string]any {
	return map[string]any{"planned": float64(planned), "created": float64(created), "patched": float64(patched),
		"existing": float64(existing), "unchanged": float64(unchanged)}
}

// Fixtures someone else wrote.

// theirSecret is a Secret someone else created, holding planned keys
// (values not keyledger's) and no keyledger annotations.
func theirSecret(name string, data map[string]string, mods ...func(*corev1.Secret)) *corev1.Secret {
	s := kubetest.NewSecret(name, kubetest.WithData())
	s.Namespace = nsShop
	for k, v := range data {
		kubetest.WithData(k, v)(s)
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

// generatorBackedES is an ExternalSecret whose data comes from a Password
// generator, writing the Secret of its own name.
func generatorBackedES(name string) *unstructured.Unstructured {
	es := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
		"metadata": map[string]any{"name": name, "namespace": nsShop},
		"spec": map[string]any{"dataFrom": []any{map[string]any{"sourceRef": map[string]any{"generatorRef": map[string]any{
			"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Password", "name": generatorApp}}}}},
	}}
	return es
}

// remoteES switches an ExternalSecret to a remote store.
func remoteES(es *unstructured.Unstructured) {
	_ = unstructured.SetNestedSlice(es.Object, []any{map[string]any{"secretKey": "password",
		"remoteRef": map[string]any{"key": "vault/shop"}}}, "spec", "data")
}

// ownedBy makes an ExternalSecret the controller owner of a Secret, with
// Argo CD's tracking metadata, as External Secrets and Argo CD leave it.
func ownedBy(es *unstructured.Unstructured) func(*corev1.Secret) {
	return func(s *corev1.Secret) {
		yes := true
		s.OwnerReferences = append(s.OwnerReferences, metav1.OwnerReference{APIVersion: "external-secrets.io/v1", Kind: "ExternalSecret",
			Name: es.GetName(), UID: es.GetUID(), Controller: &yes})
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[AnnotationArgoTracking] = "shop:/Secret:shop/" + s.Name
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[LabelArgoInstance] = "shop"
	}
}

// secret is the double's copy of a Secret (nil when absent).
func (e *env) secret(name string) *corev1.Secret {
	return e.k.Secret(name)
}

// planned asserts that a Secret holds exactly the plan's keys with values of
// the planned shapes, and the nonce of one of the run's create calls when
// created is true.
func (e *env) requirePlanned(name string, created bool) {
	e.t.Helper()
	s := e.secret(name)
	require.NotNil(e.t, s, "%s exists", name)
	plan := e.cmd.Spec.Secrets[slices.IndexFunc(e.cmd.Spec.Secrets, func(p Secret) bool { return p.Name == name })]
	for _, k := range plan.Keys {
		v, ok := s.Data[k.Name]
		require.True(e.t, ok, "%s holds %s", name, k.Name)
		if k.Generate != nil && created {
			require.Len(e.t, v, k.Generate.Length)
		}
	}
	_, nonce := s.Annotations[AnnotationNonce]
	require.Equal(e.t, created, nonce, "%s carries a create nonce", name)
}

// Run is one process running the plan (see run).
func (e *env) Run() result { return e.run() }

// Finish checks what every row of the family's tables requires: no patch
// overwrote a key (noOverwrite).
func (e *env) Finish(*testing.T) { e.noOverwrite() }

// noOverwrite asserts that no patch ever named an existing /data/<key>.
func (e *env) noOverwrite() {
	e.t.Helper()
	require.Empty(e.t, e.k.overwrites, "no patch operation's path is an existing /data/<key>")
}
