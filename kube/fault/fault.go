// Package fault is a fault-injecting HTTP transport for tests: it lets a
// matching request reach the API server and then drops the response (the
// write happened, the caller sees a timeout) or replaces it with a 503,
// answers a synthetic connection reset before anything is sent, or throttles
// (429) before anything is sent. The 429 and 503 answers may carry
// Retry-After, the header that makes client-go re-send a request on its own
// unless the client forbids it.
//
// The keyledger binary arms it from KEYLEDGER_FAULT only when built with the
// "failpoints" tag; tests in the same process use New directly.
package fault

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Env is the environment variable read by FromEnv.
const Env = "KEYLEDGER_FAULT"

// Mode is what happens to a matching request.
type Mode string

const (
	// DropResponse sends the request, reads and discards the response, and
	// returns a timeout error: the authority applied the request, the caller
	// never learns it.
	DropResponse Mode = "drop-response"
	// Reset returns a connection reset without sending anything.
	Reset Mode = "reset"
	// ServerError sends the request, discards the response and answers a
	// synthetic 503 Status instead: the authority applied the request, the
	// caller sees a server error.
	ServerError Mode = "server-error"
	// Unavailable is ServerError with "Retry-After: 1" on the 503.
	Unavailable Mode = "unavailable-retry-after"
	// Throttle answers 429 Too Many Requests with "Retry-After: 1" without
	// sending anything, as API Priority and Fairness does: nothing applied.
	Throttle Mode = "throttle"
)

func (m Mode) valid() bool {
	switch m {
	case DropResponse, Reset, ServerError, Unavailable, Throttle:
		return true
	}
	return false
}

// Rule selects requests: Method must match, PathContains must be a substring
// of the URL path (empty matches all), and the Nth matching request (1-based)
// is the one faulted; 0 faults every match.
type Rule struct {
	Mode         Mode
	Method       string
	PathContains string
	Nth          int
}

// Parse reads MODE:METHOD[:PATH-SUBSTRING][#N], for example
// "drop-response:PUT:/secrets/keyring#1".
func Parse(spec string) (Rule, error) {
	var r Rule
	if i := strings.LastIndexByte(spec, '#'); i > 0 {
		n, err := strconv.Atoi(spec[i+1:])
		if err != nil || n < 0 {
			return r, fmt.Errorf("fault %q: want #N with N >= 0", spec)
		}
		r.Nth, spec = n, spec[:i]
	}
	parts := strings.SplitN(spec, ":", 3)
	if len(parts) < 2 {
		return r, fmt.Errorf("fault %q: want MODE:METHOD[:PATH]", spec)
	}
	r.Mode, r.Method = Mode(parts[0]), strings.ToUpper(parts[1])
	if len(parts) == 3 {
		r.PathContains = parts[2]
	}
	if !r.Mode.valid() {
		return r, fmt.Errorf("fault %q: unknown mode %q", spec, r.Mode)
	}
	return r, nil
}

// Transport applies a rule to the requests it carries.
type Transport struct {
	rule Rule
	next http.RoundTripper

	mu      sync.Mutex
	matches int
	// Faulted counts the requests that were faulted.
	faulted int
}

// New wraps next with rule.
func New(rule Rule, next http.RoundTripper) *Transport { return &Transport{rule: rule, next: next} }

// Faulted is how many requests this transport has faulted.
func (t *Transport) Faulted() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.faulted
}

// ErrDropped is the error a dropped response surfaces as; it is a net.Error
// with Timeout() true, as a real lost response would be.
var ErrDropped = &droppedError{}

type droppedError struct{}

func (*droppedError) Error() string   { return "fault: response dropped after the request was applied" }
func (*droppedError) Timeout() bool   { return true }
func (*droppedError) Temporary() bool { return true }

var _ net.Error = ErrDropped

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.take(req) {
		return t.next.RoundTrip(req)
	}
	switch t.rule.Mode {
	case Reset:
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}
	case Throttle:
		if req.Body != nil {
			req.Body.Close()
		}
		return synthetic(req, http.StatusTooManyRequests, "TooManyRequests", "1"), nil
	case ServerError, Unavailable:
		resp, err := t.next.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		retryAfter := ""
		if t.rule.Mode == Unavailable {
			retryAfter = "1"
		}
		return synthetic(req, http.StatusServiceUnavailable, "ServiceUnavailable", retryAfter), nil
	default:
		resp, err := t.next.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, ErrDropped
	}
}

// synthetic is a Status answer with code and reason, and Retry-After when
// retryAfter is set.
func synthetic(req *http.Request, code int, reason, retryAfter string) *http.Response {
	body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"fault: synthetic %s","reason":%q,"code":%d}`,
		strings.ToLower(http.StatusText(code)), reason, code)
	header := http.Header{"Content-Type": []string{"application/json"}}
	if retryAfter != "" {
		header.Set("Retry-After", retryAfter)
	}
	return &http.Response{
		StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: header, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}
}

func (t *Transport) take(req *http.Request) bool {
	if req.Method != t.rule.Method || !strings.Contains(req.URL.Path, t.rule.PathContains) {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.matches++
	if t.rule.Nth != 0 && t.matches != t.rule.Nth {
		return false
	}
	t.faulted++
	return true
}

// IsDropped reports whether err is a dropped response.
func IsDropped(err error) bool { return errors.Is(err, ErrDropped) }
