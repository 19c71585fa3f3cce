package kube

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Counter counts the requests that go through a transport, by method and
// path shape. It never records bodies or headers.
type Counter struct {
	mu     sync.Mutex
	counts map[string]int
}

// Wrap returns a RoundTripper that counts every request before sending it.
func (c *Counter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		if c.counts == nil {
			c.counts = map[string]int{}
		}
		c.counts[verbOf(req)+" "+resourceOf(req.URL.Path)]++
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// Total is the number of requests counted.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.counts {
		n += v
	}
	return n
}

// Counts returns "METHOD resource" -> count, e.g. "PUT secrets": 1.
func (c *Counter) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// String lists the counts in a stable order.
func (c *Counter) String() string {
	counts := c.Counts()
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
		b.WriteString("=")
		b.WriteString(strconv.Itoa(counts[k]))
	}
	return b.String()
}

// verbOf is the request's method, except that a GET of a collection is
// counted as LIST (and WATCH when it watches).
func verbOf(req *http.Request) string {
	if req.Method != http.MethodGet || !isCollection(req.URL.Path) {
		return req.Method
	}
	if req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1" {
		return "WATCH"
	}
	return "LIST"
}

// isCollection reports whether path names a collection, not one object:
// /api/v1/namespaces/ns/secrets, /apis/g/v/namespaces/ns/things, /api/v1/nodes.
func isCollection(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return false
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		if len(parts) == 2 {
			return false // one namespace
		}
		parts = parts[2:]
	}
	return len(parts) == 1
}

// resourceOf turns /api/v1/namespaces/ns/secrets/name into "secrets" and
// /apis/authorization.k8s.io/v1/selfsubjectaccessreviews into
// "selfsubjectaccessreviews": the resource, without names.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// Skip the group/version prefix.
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return path
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return "namespaces"
	}
	if len(parts) >= 3 { // resource/name/subresource
		return parts[0] + "/" + parts[2]
	}
	return parts[0]
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
