package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/kube"
)

// fakeKube is a scripted API server behind the family's authority seam, for
// unit tests of the decision logic only (integration/ proves every claim
// about the real one). Objects have UIDs and resourceVersions that change on
// every write; deletes check UID and resourceVersion preconditions and a
// JSON patch its test operations, answering 409 and 422 as the API server
// does; failures are real *apierrors.StatusError values wrapped as the kube
// adapters wrap them (*kube.Error), so errors.Is and kube.Classify read them.
//
// Faults are scripted per operation and name (see fault); the garbage
// collector releases an orphaned ExternalSecret on its next read, and a
// deleted server pod's controller starts a replacement, which reads the
// password its Secret holds then.
type fakeKube struct {
	mu         sync.Mutex
	rv, uid    int
	secrets    map[string]*corev1.Secret
	external   map[string]*unstructured.Unstructured
	generators map[string]*unstructured.Unstructured
	pods       map[string]*corev1.Pod
	// accepts is the password each running server (by pod UID) accepts.
	accepts map[types.UID]string
	faults  []*fault
	// writes counts applied writes per object ("secret/name"), creates,
	// patches and deletes alike.
	writes map[string]int
	// requests lists every request in order ("create-secret/name").
	requests []string
	// overwrites lists every patch operation whose path was an existing
	// /data/<key>: the family must never send one.
	overwrites []string
	// gcHold is how many more reads see an orphaned ExternalSecret still
	// terminating before the garbage collector releases it.
	gcHold map[string]int
	// noReplacement: the deleted pod's controller starts nothing (for a
	// replacement that never becomes ready).
	noReplacement map[string]bool
	// probes scripts the next probe answers per pod, before the server's
	// own reading of the password; probed counts probes per pod.
	probes map[string][]ProbeResult
	probed map[string]int
	// probeLog lists each probe as "protocol pod port user=..." (never
	// the password).
	probeLog []string
	// serverSecret names the Secret and key a pod's server reads its
	// password from when it starts.
	serverSecret func(pod string) (secret, key string)
}

// The operations a fault can name: the authority methods, by verb and kind.
const (
	opGetSecret       = "get-secret"
	opCreateSecret    = "create-secret"
	opPatchSecret     = "patch-secret"
	opGetExternal     = "get-external-secret"
	opOrphanExternal  = "orphan-external-secret"
	opGetGenerator    = "get-generator"
	opDeleteGenerator = "delete-generator"
	opGetPod          = "get-pod"
	opDeletePod       = "delete-pod"
)

type faultKind int

const (
	// faultApplyThenLose: the request is applied, its answer lost (a
	// transport error).
	faultApplyThenLose faultKind = iota + 1
	// faultLoseBefore: the request never reaches the server.
	faultLoseBefore
	// faultAnswer: the server answers err without applying anything.
	faultAnswer
)

// fault is one scripted failure of the next matching request. before, when
// set, is someone else's write, made right before the request reaches the
// server (with or without a failure kind).
type fault struct {
	op, name string
	kind     faultKind
	err      error
	before   func(k *fakeKube)
	// times is how many matching requests it applies to (default 1).
	times int
	// after is how many matching requests pass untouched first.
	after int
}

func newFakeKube() *fakeKube {
	return &fakeKube{
		secrets: map[string]*corev1.Secret{}, external: map[string]*unstructured.Unstructured{},
		generators: map[string]*unstructured.Unstructured{}, pods: map[string]*corev1.Pod{},
		accepts: map[types.UID]string{}, writes: map[string]int{}, gcHold: map[string]int{},
		noReplacement: map[string]bool{}, probes: map[string][]ProbeResult{}, probed: map[string]int{},
	}
}

var _ authority = (*fakeKube)(nil)

func (k *fakeKube) script(fs ...*fault) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.faults = append(k.faults, fs...)
}

// begin logs a request and takes the first fault scripted for it; it runs
// the fault's someone-else's write. The caller holds k.mu.
func (k *fakeKube) begin(op, name string) *fault {
	k.requests = append(k.requests, op+"/"+name)
	for i, f := range k.faults {
		if f.op != op || f.name != name {
			continue
		}
		if f.after > 0 {
			f.after--
			return nil
		}
		if f.times <= 1 {
			k.faults = append(k.faults[:i:i], k.faults[i+1:]...)
		} else {
			f.times--
		}
		if f.before != nil {
			f.before(k)
		}
		return f
	}
	return nil
}

// outcome returns what a request whose effect was applied (or not) answers,
// given its fault: the error for a fault, else err.
func outcome(f *fault, err error) error {
	if f == nil || f.kind == 0 {
		return err
	}
	switch f.kind {
	case faultApplyThenLose, faultLoseBefore:
		return wrapKube(errLost)
	}
	return wrapKube(f.err)
}

// skip: the fault stops the request before it is applied.
func skip(f *fault) bool { return f != nil && (f.kind == faultLoseBefore || f.kind == faultAnswer) }

// count is the number of requests made for op on name.
func (k *fakeKube) count(op, name string) int { return k.countSince(0, op, name) }

// mark is the number of requests made so far.
func (k *fakeKube) mark() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.requests)
}

// countSince is the number of requests for op on name after mark.
func (k *fakeKube) countSince(mark int, op, name string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, r := range k.requests[mark:] {
		if r == op+"/"+name {
			n++
		}
	}
	return n
}

func (k *fakeKube) written(object string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.writes[object]
}

// errLost is a transport failure: the answer never arrived.
var errLost = &url.Error{Op: "Post", URL: "https://127.0.0.1:6443/api", Err: io.ErrUnexpectedEOF}

// wrapKube wraps err as the kube adapters do (kube.wrap).
func wrapKube(err error) error {
	if err == nil {
		return nil
	}
	return &kube.Error{Failure: kube.Classify(err), Err: err}
}

var (
	grSecrets    = schema.GroupResource{Resource: "secrets"}
	grPods       = schema.GroupResource{Resource: "pods"}
	grExternal   = kube.ExternalSecrets.GroupResource()
	grGenerators = kube.PasswordGenerators.GroupResource()
)

// Status errors as the API server answers them.
func errNotFound(gr schema.GroupResource, name string) error { return apierrors.NewNotFound(gr, name) }
func errExists(gr schema.GroupResource, name string) error {
	return apierrors.NewAlreadyExists(gr, name)
}

func errConflict(gr schema.GroupResource, name string) error {
	return apierrors.NewConflict(gr, name, errors.New("precondition failed"))
}
func errServer() error { return apierrors.NewInternalError(errors.New("etcd timeout")) }
func errInvalid(kind, name string) error {
	return apierrors.NewInvalid(schema.GroupKind{Kind: kind}, name, nil)
}

// errTestFailed is the API server's answer to a JSON patch whose test
// operation does not hold: 422 naming no object.
func errTestFailed() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity,
		Reason: metav1.StatusReasonInvalid, Message: "the server rejected our request due to an error in our request"}}
}

// wrapPatchKube wraps a patch's failure as kube.PatchSecret does.
func wrapPatchKube(err error) error {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		st := status.Status()
		if st.Code == http.StatusUnprocessableEntity && (st.Details == nil || st.Details.Kind == "" && st.Details.Name == "") {
			return &kube.Error{Failure: kube.Failure{Code: http.StatusUnprocessableEntity, Reason: kube.ReasonTestFailed}, Err: err}
		}
	}
	return wrapKube(err)
}

// stamp gives a new or written object its next resourceVersion (and a UID
// when it has none).
func (k *fakeKube) stamp(m metav1.Object) {
	k.rv++
	m.SetResourceVersion(strconv.Itoa(k.rv))
	if m.GetUID() == "" {
		k.uid++
		m.SetUID(types.UID(fmt.Sprintf("uid-%d", k.uid)))
	}
}

// Fixtures, as someone else (not the family) writes them.

func (k *fakeKube) putSecret(s *corev1.Secret) *corev1.Secret {
	s = s.DeepCopy()
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	k.stamp(s)
	k.secrets[s.Name] = s
	return s.DeepCopy()
}

func (k *fakeKube) putExternal(es *unstructured.Unstructured) *unstructured.Unstructured {
	es = es.DeepCopy()
	k.stamp(es)
	k.external[es.GetName()] = es
	return es.DeepCopy()
}

func (k *fakeKube) putGenerator(name string) *unstructured.Unstructured {
	g := &unstructured.Unstructured{}
	g.SetAPIVersion("generators.external-secrets.io/v1alpha1")
	g.SetKind("Password")
	g.SetName(name)
	k.stamp(g)
	k.generators[name] = g
	return g.DeepCopy()
}

// putPod starts a ready server pod accepting password.
func (k *fakeKube) putPod(name, password string) *corev1.Pod {
	ip := fmt.Sprintf("127.0.0.%d", len(k.pods)+k.uid%200+2)
	yes := true
	set, _, _ := strings.Cut(name, "-0") // every server pod of the tables is its StatefulSet's ordinal 0
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"controller-revision-hash": set + "-1"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: set, UID: "uid-sts-" + types.UID(set), Controller: &yes}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "server:1"}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		}}
	k.stamp(p)
	k.pods[name] = p
	k.accepts[p.UID] = password
	return p.DeepCopy()
}

// Secrets.

func (k *fakeKube) GetSecret(_ context.Context, name string) (*corev1.Secret, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f := k.begin(opGetSecret, name)
	if skip(f) {
		return nil, outcome(f, nil)
	}
	s, ok := k.secrets[name]
	if !ok {
		return nil, outcome(f, wrapKube(errNotFound(grSecrets, name)))
	}
	return s.DeepCopy(), outcome(f, nil)
}

func (k *fakeKube) CreateSecret(_ context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f := k.begin(opCreateSecret, s.Name)
	if skip(f) {
		return nil, outcome(f, nil)
	}
	if _, ok := k.secrets[s.Name]; ok {
		return nil, outcome(f, wrapKube(errExists(grSecrets, s.Name)))
	}
	if s.UID != "" || s.ResourceVersion != "" {
		return nil, wrapKube(errInvalid("Secret", s.Name))
	}
	created := s.DeepCopy()
	k.stamp(created)
	k.secrets[s.Name] = created
	k.writes["secret/"+s.Name]++
	return created.DeepCopy(), outcome(f, nil)
}

func (k *fakeKube) PatchSecret(_ context.Context, name string, patch []byte) (*corev1.Secret, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f := k.begin(opPatchSecret, name)
	if skip(f) {
		if f.kind == faultAnswer {
			return nil, wrapPatchKube(f.err)
		}
		return nil, outcome(f, nil)
	}
	s, ok := k.secrets[name]
	if !ok {
		return nil, outcome(f, wrapKube(errNotFound(grSecrets, name)))
	}
	var ops []patchOp
	if err := json.Unmarshal(patch, &ops); err != nil {
		return nil, wrapKube(apierrors.NewBadRequest(err.Error()))
	}
	doc, err := toDoc(s)
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		if op.Op == "add" && strings.HasPrefix(op.Path, "/data/") {
			if _, ok := s.Data[unescape(strings.TrimPrefix(op.Path, "/data/"))]; ok {
				k.overwrites = append(k.overwrites, name+" "+op.Path)
			}
		}
		if doc, err = applyOp(doc, op); err != nil {
			if errors.Is(err, errTest) {
				return nil, outcome(f, wrapPatchKube(errTestFailed()))
			}
			return nil, outcome(f, wrapPatchKube(errInvalid("Secret", name)))
		}
	}
	var patched corev1.Secret
	if err := fromDoc(doc, &patched); err != nil {
		return nil, wrapPatchKube(errInvalid("Secret", name))
	}
	if s.Immutable != nil && *s.Immutable && !equalData(s.Data, patched.Data) {
		return nil, outcome(f, wrapPatchKube(errInvalid("Secret", name)))
	}
	patched.UID, patched.Name = s.UID, s.Name
	k.stamp(&patched)
	k.secrets[name] = &patched
	k.writes["secret/"+name]++
	return patched.DeepCopy(), outcome(f, nil)
}

func equalData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for key, v := range a {
		if string(b[key]) != string(v) {
			return false
		}
	}
	return true
}

// ExternalSecrets and generators.

func (k *fakeKube) GetExternalSecret(_ context.Context, name string) (*unstructured.Unstructured, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f := k.begin(opGetExternal, name)
	if skip(f) {
		return nil, outcome(f, nil)
	}
	k.collect(name)
	es, ok := k.external[name]
	if !ok {
		return nil, outcome(f, wrapKube(errNotFound(grExternal, name)))
	}
	return es.DeepCopy(), outcome(f, nil)
}

// collect is the garbage collector's work for an orphaned ExternalSecret:
// once its hold is over, its dependents lose their owner references to it
// and it is removed.
func (k *fakeKube) collect(name string) {
	es, ok := k.external[name]
	if !ok || es.GetDeletionTimestamp() == nil {
		return
	}
	if k.gcHold[name] > 0 {
		k.gcHold[name]--
		return
	}
	for _, s := range k.secrets {
		var keep []metav1.OwnerReference
		for _, o := range s.OwnerReferences {
			if o.UID != es.GetUID() {
				keep = append(keep, o)
			}
		}
		if len(keep) != len(s.OwnerReferences) {
			s.OwnerReferences = keep
			k.stamp(s)
		}
	}
	delete(k.external, name)
}

func (k *fakeKube) OrphanExternalSecret(_ context.Context, name string, uid types.UID, resourceVersion string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	f := k.begin(opOrphanExternal, name)
	if skip(f) {
		return outcome(f, nil)
	}
	es, ok := k.external[name]
	switch {
	case !ok:
		return outcome(f, wrapKube(errNotFound(grExternal, name)))
	case es.GetUID() != uid || es.GetResourceVersion() != resourceVersion:
		return outcome(f, wrapKube(errConflict(grExternal, name)))
	}
	now := metav1.Now()
	es.SetDeletionTimestamp(&now)
	es.SetFinalizers(append(es.GetFinalizers(), metav1.FinalizerOrphanDependents))
	k.stamp(es)
	k.writes["externalsecret/"+name]++
	return outcome(f, nil)
}

func (k *fakeKube) GetPasswordGenerator(_ context.Context, name string) (*unstructured.Unstructured, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f := k.begin(opGetGenerator, name)
	if skip(f) {
		return nil, outcome(f, nil)
	}
	g, ok := k.generators[name]
	if !ok {
		return nil, outcome(f, wrapKube(errNotFound(grGenerators, name)))
	}
	return g.DeepCopy(), outcome(f, nil)
}

func (k *fakeKube) DeletePasswordGenerator(_ context.Context, name string, uid types.UID, resourceVersion string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	f := k.begin(opDeleteGenerator, name)
	if skip(f) {
		return outcome(f, nil)
	}
	g, ok := k.generators[name]
	switch {
	case !ok:
		return outcome(f, wrapKube(errNotFound(grGenerators, name)))
	case g.GetUID() != uid || g.GetResourceVersion() != resourceVersion:
		return outcome(f, wrapKube(errConflict(grGenerators, name)))
	}
	delete(k.generators, name)
	k.writes["password/"+name]++
	return outcome(f, nil)
}

// Pods.

func (k *fakeKube) GetPod(_ context.Context, name string) (*corev1.Pod, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f := k.begin(opGetPod, name)
	if skip(f) {
		return nil, outcome(f, nil)
	}
	p, ok := k.pods[name]
	if !ok {
		return nil, outcome(f, wrapKube(errNotFound(grPods, name)))
	}
	return p.DeepCopy(), outcome(f, nil)
}

// DeletePod deletes the pod with uid; its controller starts a replacement
// at once, whose server accepts the password its Secret holds now.
func (k *fakeKube) DeletePod(_ context.Context, name string, uid types.UID) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	f := k.begin(opDeletePod, name)
	if skip(f) {
		return outcome(f, nil)
	}
	p, ok := k.pods[name]
	switch {
	case !ok:
		return outcome(f, wrapKube(errNotFound(grPods, name)))
	case p.UID != uid:
		return outcome(f, wrapKube(errConflict(grPods, name)))
	}
	delete(k.pods, name)
	delete(k.accepts, p.UID)
	k.writes["pod/"+name]++
	k.replace(name)
	return outcome(f, nil)
}

// replace is the pod's controller: a new pod of the same name reading its
// server's password from the Secret as it starts.
func (k *fakeKube) replace(name string) {
	if k.noReplacement[name] {
		return
	}
	password := ""
	if k.serverSecret != nil {
		secret, key := k.serverSecret(name)
		if s, ok := k.secrets[secret]; ok {
			password = string(s.Data[key])
		}
	}
	k.putPod(name, password)
}

// probe is the prober seam: the pod at addr accepts the password its
// server read when it started, unless a probe answer is scripted.
func (k *fakeKube) probe(_ context.Context, protocol, addr string, user, password []byte) ProbeResult {
	k.mu.Lock()
	defer k.mu.Unlock()
	host, _, _ := net.SplitHostPort(addr)
	for name, p := range k.pods {
		if p.Status.PodIP != host {
			continue
		}
		k.probed[name]++
		k.probeLog = append(k.probeLog, fmt.Sprintf("%s %s %s user=%q", protocol, name, addr[len(host)+1:], user))
		if script := k.probes[name]; len(script) > 0 {
			k.probes[name] = script[1:]
			return script[0]
		}
		if string(password) == k.accepts[p.UID] {
			return ProbeResult{Status: ProbeAccepted, Reason: "ok"}
		}
		return ProbeResult{Status: ProbeRefused, Reason: "wrongpass"}
	}
	return ProbeResult{Status: ProbeUnknown, Reason: "connection-refused"}
}

// pollAtOnce is the waiter seam: it looks up to three times, never
// sleeping (each look is a read of the double, whose garbage collector and
// controllers move on reads), then gives up as the bound passing would.
func pollAtOnce(ctx context.Context, cond func(ctx context.Context) (bool, error)) (bool, error) {
	for range 3 {
		done, err := cond(ctx)
		if err != nil || done {
			return done, err
		}
	}
	return false, nil
}

// A minimal RFC 6902 for the operations the family sends (test, add,
// remove) on a Secret's JSON: objects and array indices.

var errTest = errors.New("test operation failed")

func toDoc(s *corev1.Secret) (any, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var doc any
	return doc, json.Unmarshal(b, &doc)
}

func fromDoc(doc any, s *corev1.Secret) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, s)
}

func unescape(token string) string {
	return strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")
}

// applyOp applies one operation to doc and returns the new document.
func applyOp(doc any, op patchOp) (any, error) {
	tokens := strings.Split(op.Path, "/")[1:]
	for i := range tokens {
		tokens[i] = unescape(tokens[i])
	}
	value, err := roundTrip(op.Value)
	if err != nil {
		return nil, err
	}
	return applyAt(doc, tokens, op.Op, value)
}

func roundTrip(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(b, &out)
}

func applyAt(node any, tokens []string, op string, value any) (any, error) {
	last := len(tokens) == 1
	switch n := node.(type) {
	case map[string]any:
		child, ok := n[tokens[0]]
		if !last {
			if !ok {
				return nil, fmt.Errorf("path member %q absent", tokens[0])
			}
			next, err := applyAt(child, tokens[1:], op, value)
			if err != nil {
				return nil, err
			}
			n[tokens[0]] = next
			return n, nil
		}
		switch op {
		case "test":
			if !ok || fmt.Sprint(child) != fmt.Sprint(value) {
				return nil, errTest
			}
		case "add":
			n[tokens[0]] = value
		case "remove":
			if !ok {
				return nil, fmt.Errorf("remove of absent member %q", tokens[0])
			}
			delete(n, tokens[0])
		default:
			return nil, fmt.Errorf("operation %q not supported", op)
		}
		return n, nil
	case []any:
		i, err := strconv.Atoi(tokens[0])
		if err != nil || i < 0 || i >= len(n) {
			return nil, fmt.Errorf("index %q out of range", tokens[0])
		}
		if !last {
			next, err := applyAt(n[i], tokens[1:], op, value)
			if err != nil {
				return nil, err
			}
			n[i] = next
			return n, nil
		}
		if op != "remove" {
			return nil, fmt.Errorf("operation %q on an array element not supported", op)
		}
		return append(n[:i:i], n[i+1:]...), nil
	}
	return nil, fmt.Errorf("path %v does not resolve", tokens)
}

var grNamespaces = schema.GroupResource{Resource: "namespaces"}

func metav1Now() metav1.Time { return metav1.Now() }

func setNested(obj map[string]any, value string, fields ...string) error {
	return unstructured.SetNestedField(obj, value, fields...)
}
