package versioned

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow/kubetest"
)

// secretsAPI is the family's secrets seam over the test kit's API server,
// bound to one live Secret as kube.VersionedSecrets is: it refuses before
// sending what the adapter refuses (another live name, a create carrying
// an identity, a replace or delete without preconditions, a snapshot that
// is not one), reads a delete's 404 as deleted and a deletion timestamp as
// pending, and lists claims as the adapter does (metadata only, at most
// max).
type secretsAPI struct {
	*kubetest.Server
	name string
	// snapshotReads counts the whole reads (values included) of snapshots:
	// GetSnapshot, never GetSnapshotMeta.
	snapshotReads *atomic.Int32
}

var _ secrets = secretsAPI{}

func newSecretsAPI(namespace, name string) secretsAPI {
	return secretsAPI{Server: kubetest.New(namespace), name: name, snapshotReads: &atomic.Int32{}}
}

func (a secretsAPI) get(name string) (*corev1.Secret, error) {
	return kubetest.As[*corev1.Secret](a.Get(kubetest.Secrets, name))
}

func (a secretsAPI) GetLive(context.Context) (*corev1.Secret, error) { return a.get(a.name) }

func isSnapshotName(name string) bool { return strings.HasPrefix(name, kube.SnapshotPrefix) }

func (a secretsAPI) GetSnapshot(_ context.Context, name string) (*corev1.Secret, error) {
	if !isSnapshotName(name) {
		return nil, fmt.Errorf("snapshot get of %s refused: not a snapshot name", name)
	}
	a.snapshotReads.Add(1)
	return a.get(name)
}

// GetSnapshotMeta reads a snapshot's metadata only, as the adapter's
// PartialObjectMetadata read does: what it returns carries no data.
func (a secretsAPI) GetSnapshotMeta(_ context.Context, name string) (*metav1.PartialObjectMetadata, error) {
	if !isSnapshotName(name) {
		return nil, fmt.Errorf("snapshot metadata get of %s refused: not a snapshot name", name)
	}
	s, err := a.get(name)
	if err != nil {
		return nil, err
	}
	m := s.ObjectMeta.DeepCopy()
	m.ManagedFields = nil
	return &metav1.PartialObjectMetadata{ObjectMeta: *m}, nil
}

func (a secretsAPI) bound(s *corev1.Secret, verb string) error {
	if s.Namespace != a.Namespace() || s.Name != a.name {
		return fmt.Errorf("%s of %s/%s refused: adapter is bound to %s/%s", verb, s.Namespace, s.Name, a.Namespace(), a.name)
	}
	return nil
}

func (a secretsAPI) CreateLive(_ context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	if err := a.bound(s, "create"); err != nil {
		return nil, err
	}
	if s.UID != "" || s.ResourceVersion != "" {
		return nil, fmt.Errorf("create of %s/%s refused: a new Secret carries no UID or resourceVersion", s.Namespace, s.Name)
	}
	return kubetest.As[*corev1.Secret](a.Create(kubetest.Secrets, s))
}

func (a secretsAPI) CreateSnapshot(_ context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	if s.Namespace != a.Namespace() || !isSnapshotName(s.Name) {
		return nil, fmt.Errorf("snapshot create of %s/%s refused: not a snapshot name in %s", s.Namespace, s.Name, a.Namespace())
	}
	if s.Immutable == nil || !*s.Immutable {
		return nil, fmt.Errorf("snapshot create of %s/%s refused: a snapshot is immutable", s.Namespace, s.Name)
	}
	return kubetest.As[*corev1.Secret](a.Create(kubetest.Secrets, s))
}

func (a secretsAPI) ReplaceLive(_ context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	if err := a.bound(s, "replace"); err != nil {
		return nil, err
	}
	if s.UID == "" || s.ResourceVersion == "" {
		return nil, fmt.Errorf("replace of %s/%s refused: no UID or resourceVersion precondition", s.Namespace, s.Name)
	}
	return kubetest.As[*corev1.Secret](a.Update(kubetest.Secrets, s))
}

func (a secretsAPI) del(name string, uid types.UID, rv string) (kube.Deletion, error) {
	if uid == "" || rv == "" {
		return kube.DeletionUnknown, fmt.Errorf("delete of %s refused: no UID or resourceVersion precondition", name)
	}
	left, err := a.Delete(kubetest.Secrets, name, kubetest.Preconditions{UID: uid, ResourceVersion: rv}, false)
	switch {
	case errors.Is(err, kube.ReasonNotFound):
		return kube.Deleted, nil
	case err != nil:
		return kube.DeletionUnknown, err
	case left == kubetest.Terminating:
		return kube.DeletionPending, nil
	}
	return kube.Deleted, nil
}

func (a secretsAPI) DeleteLive(_ context.Context, uid types.UID, rv string) (kube.Deletion, error) {
	return a.del(a.name, uid, rv)
}

func (a secretsAPI) DeleteSnapshot(_ context.Context, name string, uid types.UID, rv string) (kube.Deletion, error) {
	if !isSnapshotName(name) {
		return kube.DeletionUnknown, fmt.Errorf("snapshot delete of %s refused: not a snapshot name", name)
	}
	return a.del(name, uid, rv)
}

func (a secretsAPI) ListClaims(_ context.Context, keep func(*metav1.ObjectMeta) bool, max int) ([]metav1.PartialObjectMetadata, error) {
	all, err := a.List(kubetest.Secrets)
	if err != nil {
		return nil, err
	}
	out := []metav1.PartialObjectMetadata{}
	count := 0
	for _, o := range all {
		m := o.(*corev1.Secret).ObjectMeta.DeepCopy()
		m.ManagedFields = nil
		if !keep(m) {
			continue
		}
		if count++; count <= max {
			out = append(out, metav1.PartialObjectMetadata{ObjectMeta: *m})
		}
	}
	if count > max {
		return nil, &kube.TooManyClaimsError{Count: count, Max: max}
	}
	return out, nil
}

// edit is someone else's update of the stored Secret name.
func edit(d *kubetest.Server, name string, change func(s *corev1.Secret)) {
	d.Edit(kubetest.Secrets, name, kubetest.OnSecret(change))
}
