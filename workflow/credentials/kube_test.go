package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow/kubetest"
)

// credentialsAPI is the family's authority seam over the test kit's API
// server, refusing before sending what kube.Credentials refuses (a patch
// whose first operation does not test the resourceVersion, a delete
// without preconditions), plus the namespace's controllers as the unit
// tables need them: the garbage collector releases an orphaned
// ExternalSecret on a read once its hold (gcHold) is over, and a deleted
// server pod's controller starts a replacement, which reads the password
// its Secret holds then; the servers answer the prober seam.
type credentialsAPI struct {
	*kubetest.Server
	mu sync.Mutex
	// accepts is the password each running server (by pod UID) accepts.
	accepts map[types.UID]string
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
	ips          int
	// sets are the StatefulSets by name as someone changed them (nil:
	// deleted); any other name is the one putPod made its pods for
	// (statefulSet). setErr fails every read of one; setReads counts them.
	sets     map[string]*appsv1.StatefulSet
	setErr   error
	setReads int
}

var (
	grExternal   = kube.ExternalSecrets.GroupResource()
	grGenerators = kube.PasswordGenerators.GroupResource()
	grNamespaces = schema.GroupResource{Resource: "namespaces"}
)

// opKind names an authority method for scripting and counting: its verb
// and resource.
type opKind struct {
	verb kubetest.Verb
	gr   schema.GroupResource
}

var (
	opGetSecret       = opKind{kubetest.Get, kubetest.Secrets}
	opCreateSecret    = opKind{kubetest.Create, kubetest.Secrets}
	opPatchSecret     = opKind{kubetest.Patch, kubetest.Secrets}
	opGetExternal     = opKind{kubetest.Get, grExternal}
	opOrphanExternal  = opKind{kubetest.Delete, grExternal}
	opGetGenerator    = opKind{kubetest.Get, grGenerators}
	opDeleteGenerator = opKind{kubetest.Delete, grGenerators}
	opGetPod          = opKind{kubetest.Get, kubetest.Pods}
	opDeletePod       = opKind{kubetest.Delete, kubetest.Pods}
)

func newCredentialsAPI() *credentialsAPI {
	k := &credentialsAPI{
		Server: kubetest.New(nsShop), accepts: map[types.UID]string{}, gcHold: map[string]int{},
		noReplacement: map[string]bool{}, probes: map[string][]ProbeResult{}, probed: map[string]int{},
		sets: map[string]*appsv1.StatefulSet{},
	}
	k.React(kubetest.Get, grExternal, k.collect)
	return k
}

var _ authority = (*credentialsAPI)(nil)

// count is the number of requests made for o on name.
func (k *credentialsAPI) count(o opKind, name string) int { return k.Count(o.verb, o.gr, name) }

// countSince is the number of requests for o on name after mark.
func (k *credentialsAPI) countSince(mark int, o opKind, name string) int {
	return k.CountSince(mark, o.verb, o.gr, name)
}

// their is someone else's write, with the whole double at hand.
func (k *credentialsAPI) their(write func(k *credentialsAPI)) func(*kubetest.Server) {
	return func(*kubetest.Server) { write(k) }
}

// written is the number of our writes that changed object, named as the
// journal names targets ("secret/name", "pod/", "password/",
// "externalsecret/").
func (k *credentialsAPI) written(object string) int {
	kind, name, _ := strings.Cut(object, "/")
	gr := map[string]schema.GroupResource{"secret": kubetest.Secrets, "pod": kubetest.Pods, "password": grGenerators, "externalsecret": grExternal}[kind]
	return k.Writes(gr, name)
}

// Fixtures, as someone else (not the family) writes them.

func (k *credentialsAPI) putSecret(s *corev1.Secret) *corev1.Secret {
	s = s.DeepCopy()
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	return k.SeedSecret(s)
}

func (k *credentialsAPI) putExternal(es *unstructured.Unstructured) *unstructured.Unstructured {
	return k.Seed(grExternal, es).(*unstructured.Unstructured)
}

func (k *credentialsAPI) putGenerator(name string) *unstructured.Unstructured {
	g := &unstructured.Unstructured{}
	g.SetAPIVersion("generators.external-secrets.io/v1alpha1")
	g.SetKind("Password")
	g.SetName(name)
	return k.Seed(grGenerators, g).(*unstructured.Unstructured)
}

// putPod starts a ready server pod accepting password.
func (k *credentialsAPI) putPod(name, password string) *corev1.Pod {
	k.mu.Lock()
	k.ips++
	ip := fmt.Sprintf("127.0.0.%d", k.ips+1)
	k.mu.Unlock()
	yes := true
	set, _, _ := strings.Cut(name, "-0") // every server pod of the tables is its StatefulSet's ordinal 0
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"controller-revision-hash": set + "-1", "app": set},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: set, UID: "uid-sts-" + types.UID(set), Controller: &yes}}},
		Spec: corev1.PodSpec{Containers: k.template(set)},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		}}
	p = k.Seed(kubetest.Pods, p).(*corev1.Pod)
	k.mu.Lock()
	k.accepts[p.UID] = password
	k.mu.Unlock()
	return p
}

// statefulSet is the StatefulSet putPod makes its pods for: the pods'
// owner UID, selector and containers.
func statefulSet(name string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nsShop, UID: "uid-sts-" + types.UID(name)},
		Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "server:1"}}}}}}
}

// template is the containers StatefulSet name's controller gives a new pod.
func (k *credentialsAPI) template(name string) []corev1.Container {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s := k.sets[name]; s != nil {
		return s.DeepCopy().Spec.Template.Spec.Containers
	}
	return statefulSet(name).Spec.Template.Spec.Containers
}

// editSet is someone else's change of StatefulSet name (nil deletes it).
func (k *credentialsAPI) editSet(name string, change func(s *appsv1.StatefulSet) *appsv1.StatefulSet) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cur, ok := k.sets[name]
	if !ok {
		cur = statefulSet(name)
	}
	k.sets[name] = change(cur)
}

// GetStatefulSet reads a server pod's controller.
func (k *credentialsAPI) GetStatefulSet(_ context.Context, name string) (*appsv1.StatefulSet, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.setReads++
	if k.setErr != nil {
		return nil, k.setErr
	}
	s, ok := k.sets[name]
	switch {
	case !ok:
		return statefulSet(name), nil
	case s == nil:
		return nil, kube.Wrap(kubetest.NotFound(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, name))
	}
	return s.DeepCopy(), nil
}

// pod is the stored pod name (nil when absent).
func (k *credentialsAPI) pod(name string) *corev1.Pod {
	p, _ := k.Object(kubetest.Pods, name).(*corev1.Pod)
	return p
}

// editSecret, editPod and editExternal are someone else's updates.
func (k *credentialsAPI) editSecret(name string, change func(s *corev1.Secret)) {
	k.Edit(kubetest.Secrets, name, kubetest.OnSecret(change))
}

func (k *credentialsAPI) editPod(name string, change func(p *corev1.Pod)) {
	k.Edit(kubetest.Pods, name, func(o kubetest.Object) { change(o.(*corev1.Pod)) })
}

func (k *credentialsAPI) editExternal(name string, change func(es *unstructured.Unstructured)) {
	k.Edit(grExternal, name, func(o kubetest.Object) { change(o.(*unstructured.Unstructured)) })
}

// Secrets.

func (k *credentialsAPI) GetSecret(_ context.Context, name string) (*corev1.Secret, error) {
	return kubetest.As[*corev1.Secret](k.Get(kubetest.Secrets, name))
}

func (k *credentialsAPI) CreateSecret(_ context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	return kubetest.As[*corev1.Secret](k.Create(kubetest.Secrets, s))
}

func (k *credentialsAPI) PatchSecret(_ context.Context, name string, patch []byte) (*corev1.Secret, error) {
	var ops []patchOp
	if err := json.Unmarshal(patch, &ops); err != nil || len(ops) == 0 || ops[0].Op != "test" || ops[0].Path != "/metadata/resourceVersion" {
		return nil, fmt.Errorf("patch of secret %q refused: its first operation must test /metadata/resourceVersion", name)
	}
	if cur := k.Secret(name); cur != nil {
		for _, op := range ops {
			key, isData := strings.CutPrefix(op.Path, "/data/")
			if _, ok := cur.Data[strings.ReplaceAll(strings.ReplaceAll(key, "~1", "/"), "~0", "~")]; op.Op == "add" && isData && ok {
				k.mu.Lock()
				k.overwrites = append(k.overwrites, name+" "+op.Path)
				k.mu.Unlock()
			}
		}
	}
	return kubetest.As[*corev1.Secret](k.Patch(kubetest.Secrets, name, patch))
}

// ExternalSecrets and generators.

func (k *credentialsAPI) GetExternalSecret(_ context.Context, name string) (*unstructured.Unstructured, error) {
	return kubetest.As[*unstructured.Unstructured](k.Get(grExternal, name))
}

// collect is the garbage collector's work for an orphaned ExternalSecret,
// before a read of it: once its hold is over, its dependents lose their
// owner references to it and it is removed.
func (k *credentialsAPI) collect(name string) {
	es := k.Object(grExternal, name)
	if es == nil || es.GetDeletionTimestamp() == nil {
		return
	}
	k.mu.Lock()
	hold := k.gcHold[name] > 0
	if hold {
		k.gcHold[name]--
	}
	k.mu.Unlock()
	if !hold {
		k.Collect(grExternal, name)
	}
}

func preconditions(what, name string, uid types.UID, resourceVersion string) (kubetest.Preconditions, error) {
	if uid == "" || resourceVersion == "" {
		return kubetest.Preconditions{}, fmt.Errorf("delete of %s %q refused: it needs UID and resourceVersion preconditions", what, name)
	}
	return kubetest.Preconditions{UID: uid, ResourceVersion: resourceVersion}, nil
}

func (k *credentialsAPI) OrphanExternalSecret(_ context.Context, name string, uid types.UID, resourceVersion string) error {
	pre, err := preconditions("externalsecret", name, uid, resourceVersion)
	if err != nil {
		return err
	}
	_, err = k.Delete(grExternal, name, pre, true)
	return err
}

func (k *credentialsAPI) GetPasswordGenerator(_ context.Context, name string) (*unstructured.Unstructured, error) {
	return kubetest.As[*unstructured.Unstructured](k.Get(grGenerators, name))
}

func (k *credentialsAPI) DeletePasswordGenerator(_ context.Context, name string, uid types.UID, resourceVersion string) error {
	pre, err := preconditions("password generator", name, uid, resourceVersion)
	if err != nil {
		return err
	}
	_, err = k.Delete(grGenerators, name, pre, false)
	return err
}

// Pods.

func (k *credentialsAPI) GetPod(_ context.Context, name string) (*corev1.Pod, error) {
	return kubetest.As[*corev1.Pod](k.Get(kubetest.Pods, name))
}

// DeletePod deletes the pod with uid; once it is gone (whether or not its
// answer arrives), its controller starts a replacement at once, whose
// server accepts the password its Secret holds now.
func (k *credentialsAPI) DeletePod(_ context.Context, name string, uid types.UID) error {
	_, err := k.Delete(kubetest.Pods, name, kubetest.Preconditions{UID: uid}, false)
	if k.pod(name) == nil && (err == nil || errors.Is(err, kube.ReasonLost)) {
		k.mu.Lock()
		delete(k.accepts, uid)
		k.mu.Unlock()
		k.replace(name)
	}
	return err
}

// replace is the pod's controller: a new pod of the same name reading its
// server's password from the Secret as it starts.
func (k *credentialsAPI) replace(name string) {
	k.mu.Lock()
	skip, serverSecret := k.noReplacement[name], k.serverSecret
	k.mu.Unlock()
	if skip {
		return
	}
	password := ""
	if serverSecret != nil {
		secret, key := serverSecret(name)
		if s := k.Secret(secret); s != nil {
			password = string(s.Data[key])
		}
	}
	k.putPod(name, password)
}

// probe is the prober seam: the pod at addr accepts the password its
// server read when it started, unless a probe answer is scripted.
func (k *credentialsAPI) probe(_ context.Context, protocol, addr string, user, password []byte) ProbeResult {
	host, _, _ := net.SplitHostPort(addr)
	for _, name := range k.Names(kubetest.Pods) {
		p := k.pod(name)
		if p == nil || p.Status.PodIP != host {
			continue
		}
		k.mu.Lock()
		defer k.mu.Unlock()
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

// scripted is a fault for the next requests of op on name.
type scripted struct {
	op    opKind
	name  string
	fault kubetest.Fault
}

func on(op opKind, name string, f kubetest.Fault) scripted { return scripted{op, name, f} }

// script scripts each fault for its requests, in order.
func (k *credentialsAPI) script(faults ...scripted) {
	for _, s := range faults {
		k.On(s.op.verb, s.op.gr, s.name, s.fault)
	}
}
