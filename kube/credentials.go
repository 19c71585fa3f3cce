package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// The External Secrets resources a credential plan adopts from.
var (
	// ExternalSecrets is external-secrets.io/v1 externalsecrets (the storage
	// version since External Secrets 0.16).
	ExternalSecrets = schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1", Resource: "externalsecrets"}
	// PasswordGenerators is generators.external-secrets.io/v1alpha1 passwords.
	PasswordGenerators = schema.GroupVersionResource{Group: "generators.external-secrets.io", Version: "v1alpha1", Resource: "passwords"}
	// StatefulSets is apps/v1 statefulsets: a server pod's controller, read
	// to tie the pod to it before the pod is probed.
	StatefulSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
)

// CredentialScope is every name a credential plan may touch, in one namespace.
type CredentialScope struct {
	Namespace       string
	Secrets         []string
	ExternalSecrets []string
	Generators      []string
	Pods            []string
	// StatefulSets are the server pods' controllers (read only).
	StatefulSets []string
}

// Credentials is the create-once credentials family's whole view of the API
// server, and exactly the rights its rendered Role grants:
//
//   - Secrets: create; get and JSON patch (whose first operation must test
//     /metadata/resourceVersion) on the planned names.
//   - ExternalSecrets: get, and delete with propagationPolicy Orphan and UID
//     and resourceVersion preconditions, on the planned Secrets' names.
//   - Password generators: get, and delete with UID and resourceVersion
//     preconditions, on the retired names.
//   - Pods: get, and delete with a UID precondition, on the server pods.
//   - StatefulSets: get, on the server pods' controllers.
//
// No update, list or watch exists here; a name outside the scope is refused
// before any request.
type Credentials struct {
	scope      CredentialScope
	secrets    Secrets
	pods       Pods
	external   dynamic.ResourceInterface
	generators dynamic.ResourceInterface
	sets       dynamic.ResourceInterface
}

// NewCredentials builds the adapter from cfg (its transport wrappers, such as
// request counting, are kept). The clients get their own rate limiter sized
// for a plan of up to 64 Secrets.
func NewCredentials(cfg *rest.Config, scope CredentialScope) (*Credentials, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = 200, 400, nil
	typed, err := NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client: %w", err)
	}
	dyn, err := NewDynamic(cfg)
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client: %w", err)
	}
	return &Credentials{
		scope:      scope,
		secrets:    typed.Secrets(scope.Namespace),
		pods:       typed.Pods(scope.Namespace),
		external:   dyn.Resource(ExternalSecrets).Namespace(scope.Namespace),
		generators: dyn.Resource(PasswordGenerators).Namespace(scope.Namespace),
		sets:       dyn.Resource(StatefulSets).Namespace(scope.Namespace),
	}, nil
}

func inScope(what, name string, names []string) error {
	if !slices.Contains(names, name) {
		return fmt.Errorf("%s %q is not in the plan's scope", what, name)
	}
	return nil
}

// CreateSecret creates s (POST). It never replaces an existing Secret: the
// API server answers 409 AlreadyExists.
func (c *Credentials) CreateSecret(ctx context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	if err := inScope("secret", s.Name, c.scope.Secrets); err != nil {
		return nil, err
	}
	if s.Namespace != "" && s.Namespace != c.scope.Namespace {
		return nil, fmt.Errorf("secret namespace is not the plan's")
	}
	return wrapped(c.secrets.Create(ctx, s, metav1.CreateOptions{}))
}

// GetSecret reads a planned Secret.
func (c *Credentials) GetSecret(ctx context.Context, name string) (*corev1.Secret, error) {
	if err := inScope("secret", name, c.scope.Secrets); err != nil {
		return nil, err
	}
	return wrapped(c.secrets.Get(ctx, name, metav1.GetOptions{}))
}

// PatchSecret sends a JSON patch (RFC 6902) to a planned Secret. The patch's
// first operation must test /metadata/resourceVersion: it applies only to
// the Secret exactly as it was read, and a failed test answers 422.
func (c *Credentials) PatchSecret(ctx context.Context, name string, patch []byte) (*corev1.Secret, error) {
	if err := inScope("secret", name, c.scope.Secrets); err != nil {
		return nil, err
	}
	var ops []struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	dec := json.NewDecoder(bytes.NewReader(patch))
	if err := dec.Decode(&ops); err != nil || len(ops) == 0 ||
		ops[0].Op != "test" || ops[0].Path != "/metadata/resourceVersion" || ops[0].Value == "" {
		return nil, fmt.Errorf("patch of secret %q refused: its first operation must test /metadata/resourceVersion", name)
	}
	got, err := c.secrets.Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
	return got, wrapPatch(err)
}

// GetExternalSecret reads the ExternalSecret of a planned Secret's name.
func (c *Credentials) GetExternalSecret(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	if err := inScope("externalsecret", name, c.scope.ExternalSecrets); err != nil {
		return nil, err
	}
	return wrapped(c.external.Get(ctx, name, metav1.GetOptions{}))
}

// OrphanExternalSecret deletes the ExternalSecret exactly as it was read
// (UID and resourceVersion preconditions: any change since answers 409),
// leaving its Secret in place (propagationPolicy Orphan: the garbage
// collector removes the Secret's owner reference, then the ExternalSecret).
func (c *Credentials) OrphanExternalSecret(ctx context.Context, name string, uid types.UID, resourceVersion string) error {
	if err := inScope("externalsecret", name, c.scope.ExternalSecrets); err != nil {
		return err
	}
	if uid == "" || resourceVersion == "" {
		return fmt.Errorf("delete of externalsecret %q refused: it needs UID and resourceVersion preconditions", name)
	}
	orphan := metav1.DeletePropagationOrphan
	return wrap(c.external.Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: &orphan, Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &resourceVersion},
	}))
}

// GetPasswordGenerator reads a retired Password generator.
func (c *Credentials) GetPasswordGenerator(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	if err := inScope("password generator", name, c.scope.Generators); err != nil {
		return nil, err
	}
	return wrapped(c.generators.Get(ctx, name, metav1.GetOptions{}))
}

// DeletePasswordGenerator deletes a retired Password generator exactly as it
// was read (UID and resourceVersion preconditions).
func (c *Credentials) DeletePasswordGenerator(ctx context.Context, name string, uid types.UID, resourceVersion string) error {
	if err := inScope("password generator", name, c.scope.Generators); err != nil {
		return err
	}
	if uid == "" || resourceVersion == "" {
		return fmt.Errorf("delete of password generator %q refused: it needs UID and resourceVersion preconditions", name)
	}
	return wrap(c.generators.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &resourceVersion}}))
}

// GetPod reads a server pod.
func (c *Credentials) GetPod(ctx context.Context, name string) (*corev1.Pod, error) {
	if err := inScope("pod", name, c.scope.Pods); err != nil {
		return nil, err
	}
	return wrapped(c.pods.Get(ctx, name, metav1.GetOptions{}))
}

// DeletePod deletes the server pod with this UID (its controller replaces it).
func (c *Credentials) DeletePod(ctx context.Context, name string, uid types.UID) error {
	if err := inScope("pod", name, c.scope.Pods); err != nil {
		return err
	}
	return wrap(c.pods.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}))
}

// GetStatefulSet reads a server pod's controller.
func (c *Credentials) GetStatefulSet(ctx context.Context, name string) (*appsv1.StatefulSet, error) {
	if err := inScope("statefulset", name, c.scope.StatefulSets); err != nil {
		return nil, err
	}
	u, err := wrapped(c.sets.Get(ctx, name, metav1.GetOptions{}))
	if err != nil {
		return nil, err
	}
	var sts appsv1.StatefulSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sts); err != nil {
		return nil, fmt.Errorf("reading statefulset %q: %w", name, err)
	}
	return &sts, nil
}
