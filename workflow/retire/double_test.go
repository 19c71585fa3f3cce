package retire

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/keyledger/keyledger/kube"
)

// apiDouble stands in for the API server behind the family's secrets seam,
// for one Secret, the way kube.SecretReplacer sees it: Get and Replace, with
// the API server's compare-and-set (a stale resourceVersion or another UID
// is 409 Conflict, an absent Secret 404, changed data of an immutable Secret
// 422), a new resourceVersion on every write that changes the object, and
// errors wrapped as the adapter wraps them (*kube.Error around the client's
// error, so errors.Is(err, kube.ReasonNotFound) and kube.Classify work).
//
// Each call takes the next fault scripted for its verb (none: served
// normally). Writes made by this operation's Replace are kept in replaced;
// someone else's writes (hooks) only move the stored object.
type apiDouble struct {
	t               testing.TB
	namespace, name string
	// stored is the Secret as the API server holds it; nil when absent.
	stored *corev1.Secret
	// rv is the last resourceVersion handed out; uids counts UIDs.
	rv, uids int
	// gets and replaces count the calls received.
	gets, replaces int
	// replaced holds each object a Replace of this operation stored.
	replaced []*corev1.Secret
	// foreign counts someone else's writes (updates, deletes, creates).
	foreign int
	script  map[verb][]fault
}

type verb string

const (
	verbGet     verb = "get"
	verbReplace verb = "replace"
)

// fault scripts one call. The zero fault serves the call normally.
type fault struct {
	// before runs right before the call reaches the API server: someone
	// else's move.
	before func(d *apiDouble)
	// err answers the call without serving it: a lost request, or an
	// error status the API server returns before applying anything.
	err error
	// admit changes the object sent before it is stored: a mutating
	// admission webhook.
	admit func(s *corev1.Secret)
	// lostAfterApply serves the call, then loses the answer.
	lostAfterApply bool
	// answer changes the object returned (not the one stored).
	answer func(s *corev1.Secret)
}

var secretsResource = schema.GroupResource{Resource: "secrets"}

// newAPIDouble holds s (created now: a UID and a resourceVersion).
func newAPIDouble(t testing.TB, s *corev1.Secret) *apiDouble {
	d := &apiDouble{t: t, namespace: s.Namespace, name: s.Name, script: map[verb][]fault{}}
	d.create(s)
	d.foreign = 0
	return d
}

// on scripts the next calls of v, in order.
func (d *apiDouble) on(v verb, faults ...fault) *apiDouble {
	d.script[v] = append(d.script[v], faults...)
	return d
}

func (d *apiDouble) next(v verb) fault {
	q := d.script[v]
	if len(q) == 0 {
		return fault{}
	}
	d.script[v] = q[1:]
	return q[0]
}

// adapterError wraps a client error as kube's adapters do.
func adapterError(err error) error {
	return &kube.Error{Failure: kube.Classify(err), Err: err}
}

// Get reads the Secret.
func (d *apiDouble) Get(context.Context) (*corev1.Secret, error) {
	d.gets++
	f := d.next(verbGet)
	if f.before != nil {
		f.before(d)
	}
	if f.err != nil {
		return nil, adapterError(f.err)
	}
	if d.stored == nil {
		return nil, adapterError(apierrors.NewNotFound(secretsResource, d.name))
	}
	got := d.stored.DeepCopy()
	if f.answer != nil {
		f.answer(got)
	}
	return got, nil
}

// Replace is an update of the Secret with s's resourceVersion as
// compare-and-set; like kube.SecretReplacer it refuses another Secret and a
// missing precondition before sending.
func (d *apiDouble) Replace(_ context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	d.replaces++
	if s.Namespace != d.namespace || s.Name != d.name {
		return nil, fmt.Errorf("replace of %s/%s refused: adapter is bound to %s/%s", s.Namespace, s.Name, d.namespace, d.name)
	}
	if s.ResourceVersion == "" {
		return nil, fmt.Errorf("replace of %s/%s refused: no resourceVersion precondition", s.Namespace, s.Name)
	}
	f := d.next(verbReplace)
	if f.before != nil {
		f.before(d)
	}
	if f.err != nil {
		return nil, adapterError(f.err)
	}
	if f.admit != nil {
		s = s.DeepCopy()
		f.admit(s)
	}
	rv := d.rv
	got, err := d.update(s)
	if err != nil {
		return nil, adapterError(err)
	}
	if d.rv != rv {
		d.replaced = append(d.replaced, got.DeepCopy())
	}
	if f.lostAfterApply {
		return nil, adapterError(errLost("PUT"))
	}
	if f.answer != nil {
		f.answer(got)
	}
	return got, nil
}

// update is the API server's update of a Secret: 404 when absent, 409 when
// the object's UID or resourceVersion is not the stored one, 422 when the
// data of an immutable Secret would change; an update that changes nothing
// keeps the resourceVersion.
func (d *apiDouble) update(s *corev1.Secret) (*corev1.Secret, error) {
	cur := d.stored
	switch {
	case cur == nil:
		return nil, apierrors.NewNotFound(secretsResource, s.Name)
	case s.UID != "" && s.UID != cur.UID:
		return nil, apierrors.NewConflict(secretsResource, s.Name,
			fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", cur.UID, s.UID))
	case s.ResourceVersion != "" && s.ResourceVersion != cur.ResourceVersion:
		return nil, apierrors.NewConflict(secretsResource, s.Name,
			errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	case cur.Immutable != nil && *cur.Immutable && (!reflect.DeepEqual(cur.Data, s.Data) || s.Immutable == nil || !*s.Immutable):
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, s.Name, field.ErrorList{
			field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"),
		})
	}
	next := s.DeepCopy()
	next.UID, next.CreationTimestamp, next.ResourceVersion = cur.UID, cur.CreationTimestamp, cur.ResourceVersion
	next.ManagedFields = cur.ManagedFields
	if reflect.DeepEqual(next, cur) {
		return cur.DeepCopy(), nil
	}
	d.rv++
	next.ResourceVersion = strconv.Itoa(d.rv)
	d.stored = next
	return next.DeepCopy(), nil
}

// create stores s as a new object: a fresh UID and resourceVersion.
func (d *apiDouble) create(s *corev1.Secret) {
	d.uids++
	d.rv++
	c := s.DeepCopy()
	c.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", d.uids))
	c.ResourceVersion = strconv.Itoa(d.rv)
	c.CreationTimestamp = metav1.Unix(1_780_000_000, 0)
	d.stored = c
	d.foreign++
}

// theirUpdate is someone else's update of the stored Secret: mutate runs on
// a copy, which is written with the stored resourceVersion.
func (d *apiDouble) theirUpdate(mutate func(s *corev1.Secret)) {
	d.t.Helper()
	c := d.stored.DeepCopy()
	mutate(c)
	if _, err := d.update(c); err != nil {
		d.t.Fatalf("someone else's update: %v", err)
	}
	d.foreign++
}

// theirDelete is someone else's delete of the Secret.
func (d *apiDouble) theirDelete() {
	d.stored = nil
	d.foreign++
}

// now is the stored Secret (a copy), nil when absent.
func (d *apiDouble) now() *corev1.Secret {
	if d.stored == nil {
		return nil
	}
	return d.stored.DeepCopy()
}

// errLost is what client-go returns when the connection drops before an
// answer: no status, so kube.Classify says lost.
func errLost(method string) error {
	return &url.Error{Op: method, URL: "https://127.0.0.1:6443/api/v1/namespaces/ns/secrets/keyring", Err: syscall.ECONNRESET}
}

// Scripted faults.
var (
	lostBefore = fault{err: errLost("PUT")}
	lostAfter  = fault{lostAfterApply: true}
	conflict   = fault{err: apierrors.NewConflict(secretsResource, "keyring",
		errors.New("the object has been modified; please apply your changes to the latest version and try again"))}
	notFound = fault{err: apierrors.NewNotFound(secretsResource, "keyring")}
	invalid  = fault{err: apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "keyring", field.ErrorList{
		field.Invalid(field.NewPath("metadata", "annotations"), "x", "rejected by a validating admission policy"),
	})}
	serverError = fault{err: apierrors.NewInternalError(errors.New("etcdserver: request timed out"))}
	forbidden   = fault{err: apierrors.NewForbidden(secretsResource, "keyring", errors.New("denied by a validating admission policy"))}
)

// theirs is a fault in which someone else moves right before the call.
func theirs(move func(d *apiDouble)) fault { return fault{before: move} }

// annotate is someone else's harmless-looking edit: an unrelated annotation.
func annotate(d *apiDouble) {
	d.theirUpdate(func(s *corev1.Secret) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations["example.com/touched"] = "yes"
	})
}
