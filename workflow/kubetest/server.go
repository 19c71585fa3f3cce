package kubetest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/kube"
)

// Object is what the Server stores: a Kubernetes object with metadata.
type Object interface {
	metav1.Object
	runtime.Object
}

type key struct {
	gr   schema.GroupResource
	name string
}

// Server is an in-memory API server for one namespace (see the package
// documentation). Its methods are safe for concurrent use; someone else's
// writes (Theirs) run outside its lock, so they may call any method.
type Server struct {
	mu        sync.Mutex
	namespace string
	objs      map[key]Object
	rv, uid   int
	faults    []scripted
	requests  []Request
	// writes counts our writes that changed an object; written keeps
	// each object our creates, updates and patches stored.
	writes  map[key]int
	written map[key][]Object
	// reactions run before a request is served (see React).
	reactions map[Request][]func(name string)
}

func byName(a, b key) int { return cmp.Compare(a.name, b.name) }

type scripted struct {
	match Request
	fault *Fault
}

// New is an empty Server for namespace.
func New(namespace string) *Server {
	return &Server{namespace: namespace, objs: map[key]Object{}, writes: map[key]int{}, written: map[key][]Object{}}
}

// Namespace is the Server's namespace.
func (s *Server) Namespace() string { return s.namespace }

// On scripts faults, in order, for the next requests of verb on resource
// and name (a zero resource or an empty name matches any).
func (s *Server) On(verb Verb, gr schema.GroupResource, name string, faults ...Fault) *Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range faults {
		s.faults = append(s.faults, scripted{match: Request{Verb: verb, Resource: gr, Name: name}, fault: &f})
	}
	return s
}

// begin logs r and takes the first fault scripted for it, then runs its
// someone-else's write (outside the lock).
func (s *Server) begin(r Request) Fault {
	s.mu.Lock()
	s.requests = append(s.requests, r)
	var f Fault
	for i, sc := range s.faults {
		if !sc.match.matches(r) {
			continue
		}
		if sc.fault.after > 0 {
			sc.fault.after--
			break
		}
		f = *sc.fault
		if sc.fault.times >= 0 && sc.fault.times <= 1 {
			s.faults = slices.Delete(s.faults, i, i+1)
		} else if sc.fault.times > 1 {
			sc.fault.times--
		}
		break
	}
	s.mu.Unlock()
	if f.theirs != nil {
		f.theirs(s)
	}
	return f
}

// React makes fn run each time a request of verb on gr is about to be
// served, after its fault's someone-else's write and unless the fault
// refused it: a controller or the garbage collector moving on what the
// request will see. fn runs outside the lock.
func (s *Server) React(verb Verb, gr schema.GroupResource, fn func(name string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reactions == nil {
		s.reactions = map[Request][]func(string){}
	}
	r := Request{Verb: verb, Resource: gr}
	s.reactions[r] = append(s.reactions[r], fn)
}

// serve is what comes between a request's fault and its effect: the
// fault's refusal, if any, else the reactions to it.
func (s *Server) serve(r Request, f Fault) error {
	if err := f.refused(r); err != nil {
		return err
	}
	s.mu.Lock()
	fns := slices.Clone(s.reactions[Request{Verb: r.Verb, Resource: r.Resource}])
	s.mu.Unlock()
	for _, fn := range fns {
		fn(r.Name)
	}
	return nil
}

// refused is the error a fault answers before anything is applied, if any.
func (f Fault) refused(r Request) error {
	switch f.kind {
	case lostBefore:
		return kube.Wrap(errLost(r))
	case status:
		if r.Verb == Patch {
			return kube.WrapPatch(f.status)
		}
		return kube.Wrap(f.status)
	}
	return nil
}

// answered is what a request that was applied returns: got (changed by an
// Answer fault), or a lost answer.
func (f Fault) answered(r Request, got Object) (Object, error) {
	if f.kind == appliedLost {
		return nil, kube.Wrap(errLost(r))
	}
	if got != nil {
		got = deepCopy(got)
		if f.answer != nil {
			f.answer(got)
		}
	}
	return got, nil
}

func deepCopy(o Object) Object { return o.DeepCopyObject().(Object) }

// stamp gives o the next resourceVersion, and a UID and creation
// timestamp when it is new.
func (s *Server) stamp(o Object, create bool) {
	if create {
		s.uid++
		o.SetUID(types.UID(fmt.Sprintf("uid-%04d", s.uid)))
		o.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 1, 1, 0, 0, s.uid, 0, time.UTC)))
	}
	s.rv++
	o.SetResourceVersion(strconv.Itoa(s.rv))
}

// Object is a copy of the stored object (nil when absent).
func (s *Server) Object(gr schema.GroupResource, name string) Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.objs[key{gr, name}]; ok {
		return deepCopy(o)
	}
	return nil
}

// Secret is a copy of the stored Secret name (nil when absent).
func (s *Server) Secret(name string) *corev1.Secret {
	o, _ := s.Object(Secrets, name).(*corev1.Secret)
	return o
}

// Names lists the stored names of resource gr, sorted.
func (s *Server) Names(gr schema.GroupResource) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.objs {
		if k.gr == gr {
			out = append(out, k.name)
		}
	}
	slices.Sort(out)
	return out
}

// Get serves a read.
func (s *Server) Get(gr schema.GroupResource, name string) (Object, error) {
	r := Request{Verb: Get, Resource: gr, Name: name}
	f := s.begin(r)
	if err := s.serve(r, f); err != nil {
		return nil, err
	}
	s.mu.Lock()
	o, ok := s.objs[key{gr, name}]
	if ok {
		o = deepCopy(o)
	}
	s.mu.Unlock()
	if !ok {
		return nil, kube.Wrap(NotFound(gr, name))
	}
	return f.answered(r, o)
}

// List serves a list of resource gr: copies, sorted by name.
func (s *Server) List(gr schema.GroupResource) ([]Object, error) {
	r := Request{Verb: List, Resource: gr}
	f := s.begin(r)
	if err := s.serve(r, f); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Object
	for _, k := range slices.SortedFunc(maps.Keys(s.objs), byName) {
		if k.gr == gr {
			out = append(out, deepCopy(s.objs[k]))
		}
	}
	return out, nil
}

// Create serves a create of o.
func (s *Server) Create(gr schema.GroupResource, o Object) (Object, error) {
	r := Request{Verb: Create, Resource: gr, Name: o.GetName()}
	f := s.begin(r)
	if err := s.serve(r, f); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{gr, o.GetName()}
	if _, ok := s.objs[k]; ok {
		return nil, kube.Wrap(AlreadyExists(gr, k.name))
	}
	if o.GetUID() != "" || o.GetResourceVersion() != "" {
		return nil, kube.Wrap(apierrors.NewInvalid(schema.GroupKind{Kind: kindOf(o)}, k.name, nil))
	}
	o = deepCopy(o)
	o.SetNamespace(s.namespace)
	if f.admit != nil {
		f.admit(o)
	}
	s.stamp(o, true)
	s.objs[k] = o
	s.wrote(k, o)
	return f.answered(r, o)
}

// Update serves an update of o, with its UID and resourceVersion (when
// set) as preconditions.
func (s *Server) Update(gr schema.GroupResource, o Object) (Object, error) {
	r := Request{Verb: Update, Resource: gr, Name: o.GetName()}
	f := s.begin(r)
	if err := s.serve(r, f); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	got, err := s.update(gr, deepCopy(o), f)
	if err != nil {
		return nil, kube.Wrap(err)
	}
	return f.answered(r, got)
}

// Patch serves an RFC 6902 JSON patch of gr/name.
func (s *Server) Patch(gr schema.GroupResource, name string, patch []byte) (Object, error) {
	r := Request{Verb: Patch, Resource: gr, Name: name}
	f := s.begin(r)
	if err := s.serve(r, f); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.objs[key{gr, name}]
	if !ok {
		return nil, kube.WrapPatch(NotFound(gr, name))
	}
	next, err := applyPatch(cur, patch)
	if err != nil {
		return nil, kube.WrapPatch(err)
	}
	got, err := s.update(gr, next, f)
	if err != nil {
		return nil, kube.WrapPatch(err)
	}
	return f.answered(r, got)
}

// applyPatch is the API server's JSON patch of cur: a patch that does not
// decode is 400; one that does not apply (a test that does not hold, a
// path that is absent) is 422 naming no object.
func applyPatch(cur Object, patch []byte) (Object, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	doc, err := json.Marshal(cur)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		failed := TestFailed().(*apierrors.StatusError)
		failed.ErrStatus.Message = err.Error()
		return nil, failed
	}
	next := reflect.New(reflect.TypeOf(cur).Elem()).Interface().(Object)
	if err := json.Unmarshal(out, next); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return next, nil
}

// update is the API server's update of next over the stored object (the
// lock is held): 404 when absent, 409 when next's UID or resourceVersion
// (when set) is not the stored one, 422 when the data of an immutable
// Secret would change; admission (f) changes next first. An update that
// changes nothing keeps the resourceVersion and is not a write.
func (s *Server) update(gr schema.GroupResource, next Object, f Fault) (Object, error) {
	k := key{gr, next.GetName()}
	cur, ok := s.objs[k]
	switch {
	case !ok:
		return nil, NotFound(gr, k.name)
	case next.GetUID() != "" && next.GetUID() != cur.GetUID():
		return nil, preconditionFailed(gr, k.name, "UID", string(next.GetUID()), string(cur.GetUID()))
	case next.GetResourceVersion() != "" && next.GetResourceVersion() != cur.GetResourceVersion():
		return nil, Conflict(gr, k.name)
	}
	if f.admit != nil {
		f.admit(next)
	}
	if immutableChange(cur, next) {
		return nil, Immutable(k.name)
	}
	next.SetNamespace(s.namespace)
	next.SetUID(cur.GetUID())
	next.SetCreationTimestamp(cur.GetCreationTimestamp())
	next.SetDeletionTimestamp(cur.GetDeletionTimestamp())
	next.SetResourceVersion(cur.GetResourceVersion())
	next.SetManagedFields(cur.GetManagedFields())
	if reflect.DeepEqual(next, cur) {
		return cur, nil
	}
	s.stamp(next, false)
	s.objs[k] = next
	s.wrote(k, next)
	return next, nil
}

// preconditionFailed is the API server's 409 to a precondition on field
// that does not hold, in its words.
func preconditionFailed(gr schema.GroupResource, name, field, want, got string) error {
	return apierrors.NewConflict(gr, name,
		fmt.Errorf("Precondition failed: %s in precondition: %v, %s in object meta: %v", field, want, field, got)) //nolint:staticcheck // ST1005: the API server's own message
}

// immutableChange: cur is an immutable Secret and next changes its data or
// drops its immutability.
func immutableChange(cur, next Object) bool {
	c, ok := cur.(*corev1.Secret)
	if !ok || c.Immutable == nil || !*c.Immutable {
		return false
	}
	n := next.(*corev1.Secret)
	return !sameData(c.Data, n.Data) || n.Immutable == nil || !*n.Immutable
}

func sameData(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, func(x, y []byte) bool { return string(x) == string(y) })
}

func kindOf(o Object) string {
	if k := o.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return reflect.TypeOf(o).Elem().Name()
}

// Preconditions of a delete: an empty field is not checked.
type Preconditions struct {
	UID             types.UID
	ResourceVersion string
}

// Deleted says what a delete left.
type Deleted int

const (
	// Gone: the object is removed.
	Gone Deleted = iota + 1
	// Terminating: finalizers keep it, with a deletion timestamp.
	Terminating
)

// Delete serves a delete of gr/name with preconditions; orphan is the
// Orphan propagation policy (the orphan finalizer is added, so the object
// stays terminating until the garbage collector releases it: see Collect).
func (s *Server) Delete(gr schema.GroupResource, name string, pre Preconditions, orphan bool) (Deleted, error) {
	r := Request{Verb: Delete, Resource: gr, Name: name}
	f := s.begin(r)
	if err := s.serve(r, f); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{gr, name}
	cur, ok := s.objs[k]
	switch {
	case !ok:
		return 0, kube.Wrap(NotFound(gr, name))
	case pre.UID != "" && pre.UID != cur.GetUID():
		return 0, kube.Wrap(preconditionFailed(gr, name, "UID", string(pre.UID), string(cur.GetUID())))
	case pre.ResourceVersion != "" && pre.ResourceVersion != cur.GetResourceVersion():
		return 0, kube.Wrap(preconditionFailed(gr, name, "ResourceVersion", pre.ResourceVersion, cur.GetResourceVersion()))
	}
	changed := false
	if orphan && !slices.Contains(cur.GetFinalizers(), metav1.FinalizerOrphanDependents) {
		cur.SetFinalizers(append(cur.GetFinalizers(), metav1.FinalizerOrphanDependents))
		changed = true
	}
	gone := Gone
	if len(cur.GetFinalizers()) > 0 {
		gone = Terminating
		if cur.GetDeletionTimestamp() == nil {
			now := metav1.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
			cur.SetDeletionTimestamp(&now)
			changed = true
		}
		if changed {
			s.stamp(cur, false)
		}
	} else {
		delete(s.objs, k)
		changed = true
	}
	if changed {
		s.wrote(k, nil)
	}
	if _, err := f.answered(r, nil); err != nil {
		return 0, err
	}
	return gone, nil
}

// As is a served object's answer as its type: what an adapter returns.
func As[T Object](o Object, err error) (T, error) {
	var zero T
	if err != nil || o == nil {
		return zero, err
	}
	return o.(T), nil
}
