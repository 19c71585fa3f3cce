package kubetest

import (
	"errors"
	"net/http"
	"net/url"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Verb is what a request does.
type Verb string

// The verbs the Server serves.
const (
	Get    Verb = "get"
	List   Verb = "list"
	Create Verb = "create"
	Update Verb = "update"
	Patch  Verb = "patch"
	Delete Verb = "delete"
)

// Resources the families touch.
var (
	Secrets = schema.GroupResource{Resource: "secrets"}
	Pods    = schema.GroupResource{Resource: "pods"}
)

// Request is one request the Server received, or (in On) the requests a
// fault matches: a zero Resource or an empty Name matches any.
type Request struct {
	Verb     Verb
	Resource schema.GroupResource
	Name     string
}

// String is "verb resource/name".
func (r Request) String() string { return string(r.Verb) + " " + r.Resource.String() + "/" + r.Name }

func (r Request) matches(got Request) bool {
	return r.Verb == got.Verb && (r.Resource.Empty() || r.Resource == got.Resource) && (r.Name == "" || r.Name == got.Name)
}

// faultKind is what a fault does to the request once its Theirs write has
// run: nothing (served normally), or one of the failures below.
type faultKind int

const (
	served faultKind = iota
	appliedLost
	lostBefore
	status
)

// Fault is what happens to one request (or to Times requests, after After
// untouched ones). The zero Fault serves the request normally.
type Fault struct {
	kind   faultKind
	status error
	// theirs is someone else's write, made right before the request
	// reaches the server.
	theirs func(s *Server)
	// admit changes the object we write before it is stored.
	admit func(o Object)
	// answer changes the object returned (not the one stored).
	answer       func(o Object)
	times, after int
}

// Pass serves the request normally (a placeholder in a sequence).
func Pass() Fault { return Fault{} }

// AppliedLost: the request takes effect, then its answer is lost (no
// status: kube.ReasonLost).
func AppliedLost() Fault { return Fault{kind: appliedLost} }

// LostBefore: the request never reaches the server (no effect, no status).
func LostBefore() Fault { return Fault{kind: lostBefore} }

// Status: the server answers err (an *apierrors.StatusError, see the
// status builders below) and applies nothing.
func Status(err error) Fault { return Fault{kind: status, status: err} }

// Theirs: someone else's write right before ours, which is then served.
func Theirs(write func(s *Server)) Fault { return Fault{theirs: write} }

// Admission: a mutating admission webhook changes what we write (create,
// update, patch) before it is stored.
func Admission(change func(o Object)) Fault { return Fault{admit: change} }

// Answer: the server stores what it should but answers with an object
// change has altered.
func Answer(change func(o Object)) Fault { return Fault{answer: change} }

// First makes someone else's write run right before f.
func (f Fault) First(write func(s *Server)) Fault { f.theirs = write; return f }

// Times makes f apply to n matching requests (n < 0: every one).
func (f Fault) Times(n int) Fault { f.times = n; return f }

// After lets n matching requests pass untouched before f applies.
func (f Fault) After(n int) Fault { f.after = n; return f }

// Always is Times(-1).
func (f Fault) Always() Fault { return f.Times(-1) }

// The statuses the API server answers, as real *apierrors.StatusError
// values.

// Conflict is 409 Conflict: the object changed since it was read.
func Conflict(gr schema.GroupResource, name string) error {
	return apierrors.NewConflict(gr, name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}

// NotFound is 404.
func NotFound(gr schema.GroupResource, name string) error { return apierrors.NewNotFound(gr, name) }

// AlreadyExists is 409 AlreadyExists.
func AlreadyExists(gr schema.GroupResource, name string) error {
	return apierrors.NewAlreadyExists(gr, name)
}

// Invalid is 422 naming the object, as a validating admission policy or
// the API server's validation answers.
func Invalid(kind, name string) error {
	return apierrors.NewInvalid(schema.GroupKind{Kind: kind}, name, field.ErrorList{
		field.Invalid(field.NewPath("metadata", "annotations"), "x", "rejected by a validating admission policy"),
	})
}

// Immutable is 422 to a change of an immutable Secret's data.
func Immutable(name string) error {
	return apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, name, field.ErrorList{
		field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"),
	})
}

// TestFailed is 422 naming no object: a JSON patch's test operation that
// did not hold.
func TestFailed() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity,
		Reason: metav1.StatusReasonInvalid, Message: "the server rejected our request due to an error in our request"}}
}

// ServerError is 500.
func ServerError() error {
	return apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
}

// Forbidden is 403, as authorization or a validating admission policy
// answers.
func Forbidden(gr schema.GroupResource, name string) error {
	return apierrors.NewForbidden(gr, name, errors.New("denied by a validating admission policy"))
}

// errLost is what client-go returns when the connection drops before an
// answer: no status, so kube.Classify says lost.
func errLost(r Request) error {
	return &url.Error{Op: string(r.Verb), URL: "https://127.0.0.1:6443/api/v1/namespaces/ns/" + r.Resource.Resource + "/" + r.Name, Err: syscall.ECONNRESET}
}
