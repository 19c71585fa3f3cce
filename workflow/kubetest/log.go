package kubetest

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The request log and the write counts.

// Requests lists every request received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Count is the number of requests received of verb on gr and name (a zero
// gr or an empty name counts any).
func (s *Server) Count(verb Verb, gr schema.GroupResource, name string) int {
	return s.CountSince(0, verb, gr, name)
}

// Mark is the number of requests received so far, for CountSince.
func (s *Server) Mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// CountSince is Count over the requests after mark.
func (s *Server) CountSince(mark int, verb Verb, gr schema.GroupResource, name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := Request{Verb: verb, Resource: gr, Name: name}
	n := 0
	for _, r := range s.requests[mark:] {
		if want.matches(r) {
			n++
		}
	}
	return n
}

// Writes is the number of our requests that changed the object gr/name
// (creates, updates, patches and deletes alike).
func (s *Server) Writes(gr schema.GroupResource, name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes[key{gr, name}]
}

// AllWrites is Writes per name of resource gr (names never written are
// left out).
func (s *Server) AllWrites(gr schema.GroupResource) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, n := range s.writes {
		if k.gr == gr && n > 0 {
			out[k.name] = n
		}
	}
	return out
}

// Written lists each object our creates, updates and patches of gr/name
// stored, in order (copies).
func (s *Server) Written(gr schema.GroupResource, name string) []Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Object, 0, len(s.written[key{gr, name}]))
	for _, o := range s.written[key{gr, name}] {
		out = append(out, deepCopy(o))
	}
	return out
}

// wrote records our write of k that changed it (o: what it stored, nil for
// a delete).
func (s *Server) wrote(k key, o Object) {
	s.writes[k]++
	if o != nil {
		s.written[k] = append(s.written[k], deepCopy(o))
	}
}

// Calls is the number of requests received of verb, on any resource and
// name.
func (s *Server) Calls(verb Verb) int { return s.Count(verb, schema.GroupResource{}, "") }

// VerbCounts is the number of requests received per verb.
func (s *Server) VerbCounts() map[Verb]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[Verb]int{}
	for _, r := range s.requests {
		out[r.Verb]++
	}
	return out
}

// ResetCounts forgets the requests and writes received so far (to count
// one run's only); the objects and the scripted faults stay.
func (s *Server) ResetCounts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests, s.writes, s.written = nil, map[key]int{}, map[key][]Object{}
}

// WriteCount is the number of our writes that changed an object, over
// every object.
func (s *Server) WriteCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, w := range s.writes {
		n += w
	}
	return n
}
