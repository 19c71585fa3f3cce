package versioned

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/kube"
)

// apiDouble is a scripted, in-memory API server for one namespace behind
// the family's seam (secrets). It keeps what the API server keeps for a
// Secret: a UID per object, a resourceVersion that changes on every write,
// compare-and-set on UID and resourceVersion (update: 409 Conflict; delete
// preconditions: 409 Conflict), 409 AlreadyExists to a create of an existing
// name, 404 to a read or update of an absent one, 422 to a change of an
// immutable Secret's data, and finalizers that keep a deleted object
// terminating. Its errors are what kube.VersionedSecrets returns: a
// *kube.Error over a real *apierrors.StatusError (or over a transport
// error), and a delete's 404 is Deleted, as the adapter reads it.
//
// Faults are scripted per verb and object name and consumed in order (see
// fault); every call is counted per verb.
type apiDouble struct {
	mu        sync.Mutex
	namespace string
	name      string
	objs      map[string]*corev1.Secret
	rv, uid   int
	faults    map[string][]fault // verb + " " + name ("" matches any name)
	calls     map[string]int     // verb, and verb + " " + name -> calls
	writes    map[string]int     // name -> writes that took effect
	// admit, when set for a name, changes every object created or
	// replaced under that name before it is stored (a mutating admission
	// webhook).
	admit map[string]func(s *corev1.Secret)
}

// The verbs of the double, as counted and scripted.
const (
	verbGet    = "get"
	verbList   = "list"
	verbCreate = "create"
	verbUpdate = "update"
	verbDelete = "delete"
)

// faultKind says what a scripted fault does to one call.
type faultKind int

const (
	// faultAppliedLost: the call takes effect, then the answer is lost
	// (transport error).
	faultAppliedLost faultKind = iota + 1
	// faultLostBefore: the request never reaches the server (transport
	// error, no effect).
	faultLostBefore
	// faultAnswer: the server answers status, with no effect.
	faultAnswer
	// faultBefore: the call proceeds normally (after the hook).
	faultBefore
)

// fault is what happens to one call: hook, when set, runs first (someone
// else's write just before the call, or scripting a later fault), then
// kind.
type fault struct {
	kind   faultKind
	status error
	hook   func(d *apiDouble)
}

func newAPIDouble(namespace, name string) *apiDouble {
	return &apiDouble{namespace: namespace, name: name, objs: map[string]*corev1.Secret{},
		faults: map[string][]fault{}, calls: map[string]int{}, writes: map[string]int{}, admit: map[string]func(*corev1.Secret){}}
}

var _ secrets = (*apiDouble)(nil)

// on scripts f for the next call of verb on name ("" for any name).
func (d *apiDouble) on(verb, name string, f fault) {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := verb + " " + name
	d.faults[key] = append(d.faults[key], f)
}

// onLocked is on for a hook (the lock is held).
func (d *apiDouble) onLocked(verb, name string, f fault) {
	key := verb + " " + name
	d.faults[key] = append(d.faults[key], f)
}

// next pops the fault scripted for verb on name, if any.
func (d *apiDouble) next(verb, name string) (fault, bool) {
	d.calls[verb]++
	d.calls[verb+" "+name]++
	for _, key := range []string{verb + " " + name, verb + " "} {
		if fs := d.faults[key]; len(fs) > 0 {
			d.faults[key] = fs[1:]
			return fs[0], true
		}
	}
	return fault{}, false
}

// begin counts the call and runs its scripted fault: a hook runs now,
// under the double's lock (hooks change d.objs through seedLocked, edit and
// remove); done is true when the call must end with err without taking
// effect; lostAfter when it must take effect and then lose its answer.
func (d *apiDouble) begin(verb, name string) (done, lostAfter bool, err error) {
	f, ok := d.next(verb, name)
	if !ok {
		return false, false, nil
	}
	if f.hook != nil {
		f.hook(d)
	}
	switch f.kind {
	case faultAppliedLost:
		return false, true, nil
	case faultLostBefore:
		return true, false, errLost()
	case faultAnswer:
		return true, false, kerr(f.status)
	}
	return false, false, nil
}

func errLost() error {
	err := errors.New("read tcp 127.0.0.1:6443: connection reset by peer")
	return &kube.Error{Failure: kube.Classify(err), Err: err}
}

var secretsResource = schema.GroupResource{Resource: "secrets"}

func statusNotFound(name string) error { return apierrors.NewNotFound(secretsResource, name) }
func statusConflict(name, msg string) error {
	return apierrors.NewConflict(secretsResource, name, errors.New(msg))
}
func statusExists(name string) error { return apierrors.NewAlreadyExists(secretsResource, name) }
func statusInvalid(name string) error {
	return apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, name, nil)
}
func statusServer() error {
	return apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
}

func kerr(status error) error { return &kube.Error{Failure: kube.Classify(status), Err: status} }

// put stores s as a write that took effect: a new resourceVersion, and a
// new UID when it is created.
func (d *apiDouble) put(s *corev1.Secret, create bool) *corev1.Secret {
	s = s.DeepCopy()
	s.Namespace = d.namespace
	if create {
		d.uid++
		s.UID = types.UID(fmt.Sprintf("uid-%04d", d.uid))
		s.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, d.uid, 0, time.UTC))
	}
	d.rv++
	s.ResourceVersion = strconv.Itoa(d.rv)
	d.objs[s.Name] = s
	d.writes[s.Name]++
	return s.DeepCopy()
}

// seed stores s directly (someone else's create, or a fixture): a new UID
// and resourceVersion. It returns the stored copy.
func (d *apiDouble) seed(s *corev1.Secret) *corev1.Secret {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seedLocked(s)
}

func (d *apiDouble) seedLocked(s *corev1.Secret) *corev1.Secret {
	out := d.put(s, true)
	d.writes[s.Name]-- // fixtures are not counted as writes
	return out
}

// edit changes the stored object name in place as someone else's write
// would (a new resourceVersion).
func (d *apiDouble) edit(name string, change func(s *corev1.Secret)) {
	s := d.objs[name]
	change(s)
	d.rv++
	s.ResourceVersion = strconv.Itoa(d.rv)
}

// remove deletes name as someone else would (finalizers ignored).
func (d *apiDouble) remove(name string) { delete(d.objs, name) }

// obj returns a copy of the stored object name (nil when absent).
func (d *apiDouble) obj(name string) *corev1.Secret {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.objs[name]; ok {
		return s.DeepCopy()
	}
	return nil
}

// names lists the stored names, sorted.
func (d *apiDouble) names() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(maps.Keys(d.objs))
}

func (d *apiDouble) get(name string) (*corev1.Secret, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if done, _, err := d.begin(verbGet, name); done {
		return nil, err
	}
	s, ok := d.objs[name]
	if !ok {
		return nil, kerr(statusNotFound(name))
	}
	return s.DeepCopy(), nil
}

func (d *apiDouble) GetLive(_ context.Context) (*corev1.Secret, error) { return d.get(d.name) }

func (d *apiDouble) GetSnapshot(_ context.Context, name string) (*corev1.Secret, error) {
	return d.get(name)
}

func (d *apiDouble) create(s *corev1.Secret) (*corev1.Secret, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	done, lost, err := d.begin(verbCreate, s.Name)
	if done {
		return nil, err
	}
	if _, ok := d.objs[s.Name]; ok {
		return nil, kerr(statusExists(s.Name))
	}
	s = s.DeepCopy()
	if admit := d.admit[s.Name]; admit != nil {
		admit(s)
	}
	got := d.put(s, true)
	if lost {
		return nil, errLost()
	}
	return got, nil
}

func (d *apiDouble) CreateLive(_ context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	if s.Name != d.name || s.UID != "" || s.ResourceVersion != "" {
		return nil, fmt.Errorf("double: create of %s refused as the adapter would", s.Name)
	}
	return d.create(s)
}

func (d *apiDouble) CreateSnapshot(_ context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	if s.Immutable == nil || !*s.Immutable || len(s.Name) < len(kube.SnapshotPrefix) || s.Name[:len(kube.SnapshotPrefix)] != kube.SnapshotPrefix {
		return nil, fmt.Errorf("double: snapshot create of %s refused as the adapter would", s.Name)
	}
	return d.create(s)
}

func (d *apiDouble) ReplaceLive(_ context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.Name != d.name || s.UID == "" || s.ResourceVersion == "" {
		return nil, fmt.Errorf("double: replace of %s refused as the adapter would", s.Name)
	}
	done, lost, err := d.begin(verbUpdate, s.Name)
	if done {
		return nil, err
	}
	cur, ok := d.objs[s.Name]
	switch {
	case !ok:
		return nil, kerr(statusNotFound(s.Name))
	case cur.UID != s.UID:
		return nil, kerr(statusConflict(s.Name, "Precondition failed: UID in precondition: "+string(s.UID)+", UID in object meta: "+string(cur.UID)))
	case cur.ResourceVersion != s.ResourceVersion:
		return nil, kerr(statusConflict(s.Name, "the object has been modified; please apply your changes to the latest version and try again"))
	case cur.Immutable != nil && *cur.Immutable && !sameData(cur.Data, s.Data):
		return nil, kerr(statusInvalid(s.Name))
	}
	next := s.DeepCopy()
	next.CreationTimestamp, next.DeletionTimestamp = cur.CreationTimestamp, cur.DeletionTimestamp
	if admit := d.admit[s.Name]; admit != nil {
		admit(next)
	}
	got := d.put(next, false)
	if lost {
		return nil, errLost()
	}
	return got, nil
}

func (d *apiDouble) del(name string, uid types.UID, rv string) (kube.Deletion, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if uid == "" || rv == "" {
		return kube.DeletionUnknown, fmt.Errorf("double: delete of %s without preconditions refused as the adapter would", name)
	}
	done, lost, err := d.begin(verbDelete, name)
	if done {
		if errors.Is(err, kube.ReasonNotFound) {
			return kube.Deleted, nil // the adapter reads a 404 as deleted
		}
		return kube.DeletionUnknown, err
	}
	cur, ok := d.objs[name]
	switch {
	case !ok:
		return kube.Deleted, nil
	case cur.UID != uid:
		return kube.DeletionUnknown, kerr(statusConflict(name, "Precondition failed: UID in precondition: "+string(uid)+", UID in object meta: "+string(cur.UID)))
	case cur.ResourceVersion != rv:
		return kube.DeletionUnknown, kerr(statusConflict(name, "Precondition failed: ResourceVersion in precondition: "+rv+", ResourceVersion in object meta: "+cur.ResourceVersion))
	}
	gone := kube.Deleted
	if len(cur.Finalizers) > 0 {
		gone = kube.DeletionPending
		if cur.DeletionTimestamp == nil {
			now := metav1.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
			cur.DeletionTimestamp = &now
			d.rv++
			cur.ResourceVersion = strconv.Itoa(d.rv)
		}
	} else {
		delete(d.objs, name)
	}
	d.writes[name]++
	if lost {
		return kube.DeletionUnknown, errLost()
	}
	return gone, nil
}

func (d *apiDouble) DeleteLive(_ context.Context, uid types.UID, rv string) (kube.Deletion, error) {
	return d.del(d.name, uid, rv)
}

func (d *apiDouble) DeleteSnapshot(_ context.Context, name string, uid types.UID, rv string) (kube.Deletion, error) {
	return d.del(name, uid, rv)
}

func (d *apiDouble) ListClaims(_ context.Context, keep func(*metav1.ObjectMeta) bool, max int) ([]metav1.PartialObjectMetadata, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if done, _, err := d.begin(verbList, ""); done {
		return nil, err
	}
	out := []metav1.PartialObjectMetadata{}
	count := 0
	for _, name := range slices.Sorted(maps.Keys(d.objs)) {
		m := d.objs[name].ObjectMeta.DeepCopy()
		m.ManagedFields = nil
		if !keep(m) {
			continue
		}
		if count++; count <= max {
			out = append(out, metav1.PartialObjectMetadata{ObjectMeta: *m})
		}
	}
	if count > max {
		return nil, &kube.TooManyClaimsError{Count: count, Max: max}
	}
	return out, nil
}
