package kube

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Counter counts the requests that go through a transport, by method and
// path shape. It never records bodies or headers. Installed with
// rest.Config.Wrap it sits under client-go's retry loop: every HTTP request
// a client sends is counted once, a re-send again, so a test can compare
// the requests sent with the calls journaled (TestIntegrationOneCallOneRequest).
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
		c.counts[RequestName(req)]++
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// RequestName is how the counter names a request: its method (LIST for
// a GET of a collection) and resource, e.g. "PUT secrets"; no names.
func RequestName(req *http.Request) string { return verbOf(req) + " " + resourceOf(req.URL.Path) }

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
	if req.Method != http.MethodGet {
		return req.Method
	}
	if p, ok := parsePath(req.URL.Path); !ok || p.name != "" || p.resource == "namespaces" && p.namespaced {
		return req.Method
	}
	if w := req.URL.Query().Get("watch"); w == "true" || w == "1" {
		return "WATCH"
	}
	return "LIST"
}

// resourceOf turns /api/v1/namespaces/ns/secrets/name into "secrets",
// .../pods/p/status into "pods/status" and
// /apis/authorization.k8s.io/v1/selfsubjectaccessreviews into
// "selfsubjectaccessreviews": the resource, without names.
func resourceOf(path string) string {
	p, ok := parsePath(path)
	switch {
	case !ok:
		return path
	case p.subresource != "":
		return p.resource + "/" + p.subresource
	}
	return p.resource
}

// apiPath is an API request path taken apart.
type apiPath struct {
	resource, name, subresource string
	// namespaced is set for /namespaces/NS/...; resource "namespaces" with
	// namespaced set is the namespace NS itself.
	namespaced bool
}

// parsePath reads /api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]] and the
// same under /apis/GROUP/VERSION.
func parsePath(path string) (apiPath, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return apiPath{}, false
	}
	var p apiPath
	if len(parts) >= 2 && parts[0] == "namespaces" {
		p.namespaced = true
		if len(parts) == 2 {
			return apiPath{resource: "namespaces", name: parts[1], namespaced: true}, true
		}
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return apiPath{resource: "namespaces"}, true
	}
	p.resource = parts[0]
	if len(parts) >= 2 {
		p.name = parts[1]
	}
	if len(parts) >= 3 {
		p.subresource = parts[2]
	}
	return p, true
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
