package kubetest

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SecretOption changes a Secret a builder makes.
type SecretOption func(s *corev1.Secret)

// NewSecret is an Opaque Secret name, changed by opts.
func NewSecret(name string, opts ...SecretOption) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeOpaque}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Data sets the Secret's data from key, value pairs.
func Data(kv ...string) map[string][]byte {
	out := make(map[string][]byte, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = []byte(kv[i+1])
	}
	return out
}

// WithData adds key, value pairs to the Secret's data.
func WithData(kv ...string) SecretOption {
	return func(s *corev1.Secret) {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		for k, v := range Data(kv...) {
			s.Data[k] = v
		}
	}
}

// WithLabels adds key, value pairs to the labels.
func WithLabels(kv ...string) SecretOption {
	return func(s *corev1.Secret) { s.Labels = with(s.Labels, kv) }
}

// WithAnnotations adds key, value pairs to the annotations.
func WithAnnotations(kv ...string) SecretOption {
	return func(s *corev1.Secret) { s.Annotations = with(s.Annotations, kv) }
}

// Frozen makes the Secret immutable.
func Frozen(s *corev1.Secret) {
	yes := true
	s.Immutable = &yes
}

// Held gives the Secret a finalizer that keeps it terminating when it is
// deleted.
func Held(s *corev1.Secret) { s.Finalizers = append(s.Finalizers, "example.com/hold") }

// Annotate is someone else's harmless-looking edit: an unrelated
// annotation (an Edit change).
func Annotate(o Object) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a["example.com/touched"] = "yes"
	o.SetAnnotations(a)
}

func with(m map[string]string, kv []string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// OnSecret is a change of a Secret as a change of an Object (for
// Admission, Answer and Edit).
func OnSecret(change func(s *corev1.Secret)) func(o Object) {
	return func(o Object) { change(o.(*corev1.Secret)) }
}

// BeingDeleted makes the Secret one being deleted that a finalizer holds.
func BeingDeleted(s *corev1.Secret) {
	at := metav1.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
	s.DeletionTimestamp = &at
	Held(s)
}
