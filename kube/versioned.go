package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// SnapshotPrefix starts the name of every history snapshot Secret; the
// adapter refuses to create, read or delete any other name as a snapshot.
const SnapshotPrefix = "keyledger-h-"

// VersionedSecrets is the versioned-writes family's whole view of the API
// server, in one namespace:
//
//   - on the one live Secret it is bound to: get, create, replace (update
//     carrying UID and resourceVersion) and delete with UID and
//     resourceVersion preconditions;
//   - on history snapshots (names starting with SnapshotPrefix): create, get
//     (whole, or metadata only), delete with UID and resourceVersion
//     preconditions;
//   - the metadata of every Secret in the namespace (PartialObjectMetadataList:
//     no values cross the wire).
//
// No patch, watch or deletecollection exists here, and no other name can be
// written.
type VersionedSecrets struct {
	secrets   Secrets
	rest      rest.Interface
	namespace string
	name      string
}

// NewVersionedSecrets binds the adapter to the live Secret namespace/name.
func NewVersionedSecrets(client Interface, namespace, name string) *VersionedSecrets {
	return &VersionedSecrets{
		secrets: client.Secrets(namespace), rest: client.CoreREST(),
		namespace: namespace, name: name,
	}
}

// Namespace is the bound namespace.
func (v *VersionedSecrets) Namespace() string { return v.namespace }

// Name is the bound live Secret's name.
func (v *VersionedSecrets) Name() string { return v.name }

// GetLive reads the live Secret.
func (v *VersionedSecrets) GetLive(ctx context.Context) (*corev1.Secret, error) {
	return wrapped(v.secrets.Get(ctx, v.name, metav1.GetOptions{}))
}

// CreateLive creates the live Secret; the API server refuses it with 409
// when a Secret of that name exists.
func (v *VersionedSecrets) CreateLive(ctx context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	if err := v.bound(s, "create"); err != nil {
		return nil, err
	}
	if s.ResourceVersion != "" || s.UID != "" {
		return nil, fmt.Errorf("create of %s/%s refused: a new Secret carries no UID or resourceVersion", s.Namespace, s.Name)
	}
	return wrapped(v.secrets.Create(ctx, s, metav1.CreateOptions{}))
}

// ReplaceLive sends s as a full replacement of the live Secret. s must carry
// the UID and resourceVersion it was read at: the API server refuses it
// (409) when the Secret changed or was recreated since.
func (v *VersionedSecrets) ReplaceLive(ctx context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	if err := v.bound(s, "replace"); err != nil {
		return nil, err
	}
	if s.ResourceVersion == "" || s.UID == "" {
		return nil, fmt.Errorf("replace of %s/%s refused: no UID or resourceVersion precondition", s.Namespace, s.Name)
	}
	return wrapped(v.secrets.Update(ctx, s, metav1.UpdateOptions{}))
}

// DeleteLive deletes the live Secret if it still has uid and
// resourceVersion.
func (v *VersionedSecrets) DeleteLive(ctx context.Context, uid types.UID, resourceVersion string) (Deletion, error) {
	return v.delete(ctx, v.name, uid, resourceVersion)
}

// CreateSnapshot creates an immutable snapshot Secret.
func (v *VersionedSecrets) CreateSnapshot(ctx context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	if s.Namespace != v.namespace || !strings.HasPrefix(s.Name, SnapshotPrefix) {
		return nil, fmt.Errorf("snapshot create of %s/%s refused: not a snapshot name in %s", s.Namespace, s.Name, v.namespace)
	}
	if s.Immutable == nil || !*s.Immutable {
		return nil, fmt.Errorf("snapshot create of %s/%s refused: a snapshot is immutable", s.Namespace, s.Name)
	}
	return wrapped(v.secrets.Create(ctx, s, metav1.CreateOptions{}))
}

// GetSnapshot reads one snapshot Secret.
func (v *VersionedSecrets) GetSnapshot(ctx context.Context, name string) (*corev1.Secret, error) {
	if !strings.HasPrefix(name, SnapshotPrefix) {
		return nil, fmt.Errorf("snapshot get of %s refused: not a snapshot name", name)
	}
	return wrapped(v.secrets.Get(ctx, name, metav1.GetOptions{}))
}

// metadataAccept asks the API server for an object's metadata only
// (PartialObjectMetadata): no data crosses the wire.
const metadataAccept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

// GetSnapshotMeta reads one snapshot Secret's metadata only, as a
// PartialObjectMetadata: the API server sends no data. It is what a
// cleanup (a prune or purge delete) is settled with.
func (v *VersionedSecrets) GetSnapshotMeta(ctx context.Context, name string) (*metav1.PartialObjectMetadata, error) {
	if !strings.HasPrefix(name, SnapshotPrefix) {
		return nil, fmt.Errorf("snapshot metadata get of %s refused: not a snapshot name", name)
	}
	body, err := v.rest.Get().Namespace(v.namespace).Resource("secrets").Name(name).
		SetHeader("Accept", metadataAccept).DoRaw(ctx)
	if err != nil {
		return nil, wrap(err)
	}
	var out metav1.PartialObjectMetadata
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("decoding secret metadata: %w", err)
	}
	if out.Kind != "PartialObjectMetadata" {
		return nil, fmt.Errorf("secret metadata: the API server answered %q", out.Kind)
	}
	out.ManagedFields = nil
	return &out, nil
}

// DeleteSnapshot deletes one snapshot Secret if it still has uid and
// resourceVersion.
func (v *VersionedSecrets) DeleteSnapshot(ctx context.Context, name string, uid types.UID, resourceVersion string) (Deletion, error) {
	if !strings.HasPrefix(name, SnapshotPrefix) {
		return DeletionUnknown, fmt.Errorf("snapshot delete of %s refused: not a snapshot name", name)
	}
	return v.delete(ctx, name, uid, resourceVersion)
}

// ListPageSize is the page size of ListClaims. Each page is decoded from
// the response stream one object at a time, filtered and dropped, so a
// list's peak memory follows one object's metadata (the API server allows
// 256 KiB of annotations per object) and the claimants kept, never the
// number or the size of the other Secrets in the namespace.
const ListPageSize = 50

// TooManyClaimsError: more Secrets than the caller's cap matched its
// filter. Count is how many matched in all (the list is read to its end,
// keeping none past the cap).
type TooManyClaimsError struct{ Count, Max int }

func (e *TooManyClaimsError) Error() string {
	return fmt.Sprintf("%d Secrets in the namespace claim to be history of this Secret; at most %d are read", e.Count, e.Max)
}

// ListClaims lists the metadata (names, UIDs, resourceVersions, labels,
// annotations, finalizers, deletion state) of every Secret in the
// namespace, as PartialObjectMetadataLists (the API server sends no data),
// ListPageSize at a time, and keeps only the objects keep returns true for,
// without their managedFields; keep may trim what it keeps. More than max
// kept is *TooManyClaimsError. A look-alike snapshot needs no label to
// occupy a slot, so the family looks at every name, never at a selector's
// answer alone.
func (v *VersionedSecrets) ListClaims(ctx context.Context, keep func(*metav1.ObjectMeta) bool, max int) ([]metav1.PartialObjectMetadata, error) {
	var out []metav1.PartialObjectMetadata
	count := 0
	cont := ""
	for {
		req := v.rest.Get().Namespace(v.namespace).Resource("secrets").Param("limit", strconv.Itoa(ListPageSize)).
			SetHeader("Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
		if cont != "" {
			req = req.Param("continue", cont)
		}
		next, err := streamPage(ctx, req, func(item *metav1.PartialObjectMetadata) {
			m := &item.ObjectMeta
			m.ManagedFields = nil
			if !keep(m) {
				return
			}
			if count++; count <= max {
				out = append(out, *item)
			}
		})
		if err != nil {
			return nil, err
		}
		cont = next
		if cont == "" {
			break
		}
	}
	if count > max {
		return nil, &TooManyClaimsError{Count: count, Max: max}
	}
	return out, nil
}

// streamPage reads one PartialObjectMetadataList from req's response body
// one item at a time (json.Decoder over the stream), handing each to fn
// and dropping it: a page's memory is one object's metadata, not the page.
// It returns the list's continue token.
func streamPage(ctx context.Context, req *rest.Request, fn func(*metav1.PartialObjectMetadata)) (cont string, err error) {
	body, err := req.Stream(ctx)
	if err != nil {
		return "", wrap(err)
	}
	defer body.Close()
	dec := json.NewDecoder(body)
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("decoding secret metadata list: %w", err)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fail(fmt.Errorf("not a JSON object (%v)", err))
	}
	kind := ""
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		switch key, _ := tok.(string); key {
		case "kind":
			if err := dec.Decode(&kind); err != nil {
				return fail(err)
			}
		case "metadata":
			var lm metav1.ListMeta
			if err := dec.Decode(&lm); err != nil {
				return fail(err)
			}
			cont = lm.Continue
		case "items":
			if tok, err := dec.Token(); err != nil {
				return fail(err)
			} else if tok == nil {
				continue // "items": null
			} else if tok != json.Delim('[') {
				return fail(errors.New("items is not an array"))
			}
			for dec.More() {
				var item metav1.PartialObjectMetadata
				if err := dec.Decode(&item); err != nil {
					return fail(err)
				}
				fn(&item)
			}
			if _, err := dec.Token(); err != nil { // ]
				return fail(err)
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fail(err)
			}
		}
	}
	if kind != "PartialObjectMetadataList" {
		return "", fmt.Errorf("secret metadata list: the API server answered %q", kind)
	}
	return cont, nil
}

// Deletion is what the API server's answer to a delete says about the object.
type Deletion string

const (
	// DeletionUnknown: no usable answer.
	DeletionUnknown Deletion = ""
	// Deleted: the object is gone (deleted now, or already absent: 404).
	Deleted Deletion = "deleted"
	// DeletionPending: the object still exists with a deletionTimestamp
	// (finalizers hold it).
	DeletionPending Deletion = "pending"
)

// delete sends one DELETE with UID and resourceVersion preconditions and
// reads the answer's body: the API server returns the object, carrying a
// deletionTimestamp when finalizers keep it. A 404 is Deleted.
func (v *VersionedSecrets) delete(ctx context.Context, name string, uid types.UID, resourceVersion string) (Deletion, error) {
	if uid == "" || resourceVersion == "" {
		return DeletionUnknown, fmt.Errorf("delete of %s refused: no UID or resourceVersion precondition", name)
	}
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &resourceVersion}}
	obj, err := v.rest.Delete().Namespace(v.namespace).Resource("secrets").Name(name).
		Body(&opts).Do(ctx).Get()
	if err != nil {
		if err = wrap(err); errors.Is(err, ReasonNotFound) {
			return Deleted, nil
		}
		return DeletionUnknown, err
	}
	if s, ok := obj.(*corev1.Secret); ok && s.DeletionTimestamp != nil {
		return DeletionPending, nil
	}
	return Deleted, nil
}

func (v *VersionedSecrets) bound(s *corev1.Secret, verb string) error {
	if s.Namespace != v.namespace || s.Name != v.name {
		return fmt.Errorf("%s of %s/%s refused: adapter is bound to %s/%s", verb, s.Namespace, s.Name, v.namespace, v.name)
	}
	return nil
}
