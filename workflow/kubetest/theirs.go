package kubetest

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Someone else's writes: fixtures, edits, deletes and the garbage
// collector. None is a request or counts as a write.

// Seed stores o as someone else's create (a fixture): a new UID, creation
// timestamp and resourceVersion, replacing any object of its name. It
// returns the stored copy. Not a request, not counted as a write.
func (s *Server) Seed(gr schema.GroupResource, o Object) Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	o = deepCopy(o)
	o.SetNamespace(s.namespace)
	o.SetUID("")
	s.stamp(o, true)
	s.objs[key{gr, o.GetName()}] = o
	return deepCopy(o)
}

// SeedSecret is Seed of a Secret, typed.
func (s *Server) SeedSecret(secret *corev1.Secret) *corev1.Secret {
	return s.Seed(Secrets, secret).(*corev1.Secret)
}

// Edit is someone else's update of the stored object: change runs on it,
// and it gets a new resourceVersion when it changed. Editing an absent
// object is a test's mistake: it panics.
func (s *Server) Edit(gr schema.GroupResource, name string, change func(o Object)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.objs[key{gr, name}]
	if !ok {
		panic(fmt.Sprintf("kubetest: someone else's edit of absent %s/%s", gr, name))
	}
	next := deepCopy(cur)
	change(next)
	if !reflect.DeepEqual(next, cur) {
		s.stamp(next, false)
		s.objs[key{gr, name}] = next
	}
}

// Touch is someone else's write that changes nothing the family reads but
// the resourceVersion (a managedFields or status update).
func (s *Server) Touch(gr schema.GroupResource, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.objs[key{gr, name}]; ok {
		s.stamp(o, false)
	}
}

// Remove is someone else's delete of the object (finalizers ignored).
func (s *Server) Remove(gr schema.GroupResource, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objs, key{gr, name})
}

// Put stores o exactly as given, its UID and resourceVersion kept: what no
// real writer can do, for an API server whose answers contradict each
// other (an object deleted, then read back unchanged).
func (s *Server) Put(gr schema.GroupResource, o Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objs[key{gr, o.GetName()}] = deepCopy(o)
}

// Collect is the garbage collector releasing an orphaned object: every
// object it owns loses its owner reference to it (a write of theirs), and
// it is removed. It reports whether there was a terminating object to
// release.
func (s *Server) Collect(gr schema.GroupResource, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objs[key{gr, name}]
	if !ok || o.GetDeletionTimestamp() == nil {
		return false
	}
	for _, k := range slices.SortedFunc(maps.Keys(s.objs), byName) {
		dep := s.objs[k]
		refs := slices.DeleteFunc(slices.Clone(dep.GetOwnerReferences()), func(r metav1.OwnerReference) bool { return r.UID == o.GetUID() })
		if len(refs) != len(dep.GetOwnerReferences()) {
			if len(refs) == 0 {
				refs = nil
			}
			dep.SetOwnerReferences(refs)
			s.stamp(dep, false)
		}
	}
	delete(s.objs, key{gr, name})
	return true
}
