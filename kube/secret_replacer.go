package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SecretReplacer is the key retirement's whole view of the API server: get
// and replace (update, with the object's resourceVersion as compare-and-set)
// of one named Secret. No list, watch, patch, create or delete exists here.
type SecretReplacer struct {
	secrets   Secrets
	namespace string
	name      string
}

// NewSecretReplacer binds the adapter to one Secret.
func NewSecretReplacer(client Interface, namespace, name string) *SecretReplacer {
	return &SecretReplacer{secrets: client.Secrets(namespace), namespace: namespace, name: name}
}

// Get reads the Secret.
func (r *SecretReplacer) Get(ctx context.Context) (*corev1.Secret, error) {
	return wrapped(r.secrets.Get(ctx, r.name, metav1.GetOptions{}))
}

// Replace sends s as a full replacement. s must be the bound Secret and carry
// the resourceVersion it was read at: the API server refuses it with 409 when
// the Secret changed since.
func (r *SecretReplacer) Replace(ctx context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	if s.Namespace != r.namespace || s.Name != r.name {
		return nil, fmt.Errorf("replace of %s/%s refused: adapter is bound to %s/%s", s.Namespace, s.Name, r.namespace, r.name)
	}
	if s.ResourceVersion == "" {
		return nil, fmt.Errorf("replace of %s/%s refused: no resourceVersion precondition", s.Namespace, s.Name)
	}
	return wrapped(r.secrets.Update(ctx, s, metav1.UpdateOptions{}))
}
