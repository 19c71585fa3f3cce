package kube

import (
	"context"
	"fmt"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// Interface is the part of the Kubernetes API keyledger calls, and only
// that: each resource's view has exactly the verbs some adapter of this
// package sends to it (Secrets: get, create, update, patch; Pods: get,
// delete; the credentials hook's kinds: get, create, delete; the two
// self-reviews: create), with client-go's typed clients' signatures, so a
// typed client (a fake clientset's, in tests: kube/kubefake) is one.
// CoreREST is the core/v1 REST client, for the requests a typed verb does
// not express (a metadata-only list, a delete whose answer is read).
//
// NewClient builds it without client-go's clientset, its scheme of every
// API group, or its discovery and apply-configuration packages: the binary
// neither links nor initializes them (TestBinaryLinksNoClientset).
type Interface interface {
	Secrets(namespace string) Secrets
	Pods(namespace string) Pods
	ServiceAccounts(namespace string) HookResource[*corev1.ServiceAccount]
	ConfigMaps(namespace string) HookResource[*corev1.ConfigMap]
	Roles(namespace string) HookResource[*rbacv1.Role]
	RoleBindings(namespace string) HookResource[*rbacv1.RoleBinding]
	NetworkPolicies(namespace string) HookResource[*networkingv1.NetworkPolicy]
	Jobs(namespace string) HookResource[*batchv1.Job]
	SelfSubjectAccessReviews() Creator[*authorizationv1.SelfSubjectAccessReview]
	SelfSubjectRulesReviews() Creator[*authorizationv1.SelfSubjectRulesReview]
	CoreREST() rest.Interface
}

// Getter reads one object by name.
type Getter[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
}

// Creator creates an object (POST).
type Creator[T any] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
}

// Updater replaces an object (PUT).
type Updater[T any] interface {
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// Patcher patches an object by name.
type Patcher[T any] interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// Deleter deletes an object by name.
type Deleter interface {
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Secrets is what keyledger sends to Secrets: get, create, update, patch.
type Secrets interface {
	Getter[*corev1.Secret]
	Creator[*corev1.Secret]
	Updater[*corev1.Secret]
	Patcher[*corev1.Secret]
}

// Pods is what keyledger sends to Pods: get and delete.
type Pods interface {
	Getter[*corev1.Pod]
	Deleter
}

// HookResource is what `keyledger apply-hook` sends to each of the
// credentials hook's kinds: get, create and delete.
type HookResource[T any] interface {
	Getter[T]
	Creator[T]
	Deleter
}

// The scheme of the types keyledger sends and reads, and nothing else:
// core/v1, authorization/v1, rbac/v1, batch/v1 and networking/v1 (each with
// meta/v1's options and Status), registered on first use so a command that
// talks to no cluster never builds it.
var clientScheme = sync.OnceValues(func() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, authorizationv1.AddToScheme, rbacv1.AddToScheme, batchv1.AddToScheme, networkingv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
})

// Client is keyledger's Kubernetes client: one REST client per API group
// it calls, all on one HTTP client (one connection pool, so one HTTP/2
// connection carries every request of a run), each speaking protobuf as
// client-go's typed clients do, and none re-sending a mutating request
// (see NoRetry); the permission check's reviews, which write nothing, are
// asked again after a 429 or 5xx with Retry-After, as a GET is.
type Client struct {
	core, authz, rbac, batch, net rest.Interface
	params                        runtime.ParameterCodec
}

// NewClient builds the clients for cfg, sharing one HTTP client. No
// mutating request is ever re-sent by client-go (see NoRetry). cfg's
// credentials move into the transport keyledger owns (see Scrub), if
// LoadConfig has not moved them already.
func NewClient(cfg *rest.Config) (*Client, error) {
	if err := own(cfg, false); err != nil {
		return nil, fmt.Errorf("building Kubernetes client: %w", err)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		// The message may name certificate or token files.
		return nil, fmt.Errorf("building Kubernetes client: %w: its TLS or credential files could not be loaded", ErrConfig)
	}
	scheme, err := clientScheme()
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client: %w", err)
	}
	// The clients speak protobuf, which every built-in type has: a keyring
	// Secret of 48 KiB is decoded in a third of the time JSON takes, on
	// both sides, and travels smaller. JSON stays accepted (an error a
	// proxy writes, say). Other clients made from cfg keep theirs.
	typed := rest.CopyConfig(cfg)
	typed.ContentType = runtime.ContentTypeProtobuf
	typed.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	typed.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, serializer.NewCodecFactory(scheme)).WithoutConversion()
	if typed.UserAgent == "" {
		typed.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	group := func(gv schema.GroupVersion) (*rest.RESTClient, error) {
		c := *typed
		c.GroupVersion = &gv
		c.APIPath = "/apis"
		if gv.Group == "" {
			c.APIPath = "/api"
		}
		return rest.RESTClientForConfigAndClient(&c, httpClient)
	}
	noRetry := func(gv schema.GroupVersion) (rest.Interface, error) {
		rc, err := group(gv)
		if err != nil {
			return nil, err
		}
		return NoRetry(rc), nil
	}
	c := Client{params: runtime.NewParameterCodec(scheme)}
	if c.core, err = noRetry(corev1.SchemeGroupVersion); err == nil {
		// The reviews of the permission check are POSTs that write nothing:
		// one answered 429 or 5xx with Retry-After (the API server's
		// concurrency limits, as when many runs start at once) is asked
		// again as client-go asks a GET again, at most 10 times, each
		// within the request timeout, instead of ending the run unavailable.
		if c.authz, err = group(authorizationv1.SchemeGroupVersion); err == nil {
			if c.rbac, err = noRetry(rbacv1.SchemeGroupVersion); err == nil {
				if c.batch, err = noRetry(batchv1.SchemeGroupVersion); err == nil {
					c.net, err = noRetry(networkingv1.SchemeGroupVersion)
				}
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client: %w", err)
	}
	return &c, nil
}

// Secrets are the namespace's Secrets.
func (c *Client) Secrets(namespace string) Secrets {
	return newResource(c.core, c.params, namespace, "secrets", func() *corev1.Secret { return &corev1.Secret{} })
}

// Pods are the namespace's Pods.
func (c *Client) Pods(namespace string) Pods {
	return newResource(c.core, c.params, namespace, "pods", func() *corev1.Pod { return &corev1.Pod{} })
}

// ServiceAccounts are the namespace's ServiceAccounts.
func (c *Client) ServiceAccounts(namespace string) HookResource[*corev1.ServiceAccount] {
	return newResource(c.core, c.params, namespace, "serviceaccounts", func() *corev1.ServiceAccount { return &corev1.ServiceAccount{} })
}

// ConfigMaps are the namespace's ConfigMaps.
func (c *Client) ConfigMaps(namespace string) HookResource[*corev1.ConfigMap] {
	return newResource(c.core, c.params, namespace, "configmaps", func() *corev1.ConfigMap { return &corev1.ConfigMap{} })
}

// Roles are the namespace's Roles.
func (c *Client) Roles(namespace string) HookResource[*rbacv1.Role] {
	return newResource(c.rbac, c.params, namespace, "roles", func() *rbacv1.Role { return &rbacv1.Role{} })
}

// RoleBindings are the namespace's RoleBindings.
func (c *Client) RoleBindings(namespace string) HookResource[*rbacv1.RoleBinding] {
	return newResource(c.rbac, c.params, namespace, "rolebindings", func() *rbacv1.RoleBinding { return &rbacv1.RoleBinding{} })
}

// NetworkPolicies are the namespace's NetworkPolicies.
func (c *Client) NetworkPolicies(namespace string) HookResource[*networkingv1.NetworkPolicy] {
	return newResource(c.net, c.params, namespace, "networkpolicies", func() *networkingv1.NetworkPolicy { return &networkingv1.NetworkPolicy{} })
}

// Jobs are the namespace's Jobs.
func (c *Client) Jobs(namespace string) HookResource[*batchv1.Job] {
	return newResource(c.batch, c.params, namespace, "jobs", func() *batchv1.Job { return &batchv1.Job{} })
}

// SelfSubjectAccessReviews asks what the identity may do (cluster-scoped).
func (c *Client) SelfSubjectAccessReviews() Creator[*authorizationv1.SelfSubjectAccessReview] {
	return newResource(c.authz, c.params, "", "selfsubjectaccessreviews", func() *authorizationv1.SelfSubjectAccessReview {
		return &authorizationv1.SelfSubjectAccessReview{}
	})
}

// SelfSubjectRulesReviews asks every rule the identity holds in a
// namespace (the namespace travels in the review's spec).
func (c *Client) SelfSubjectRulesReviews() Creator[*authorizationv1.SelfSubjectRulesReview] {
	return newResource(c.authz, c.params, "", "selfsubjectrulesreviews", func() *authorizationv1.SelfSubjectRulesReview {
		return &authorizationv1.SelfSubjectRulesReview{}
	})
}

// CoreREST is the core/v1 REST client (protobuf, NoRetry).
func (c *Client) CoreREST() rest.Interface { return c.core }

// object is what a resource sends and reads.
type object interface {
	runtime.Object
	metav1.Object
}

// resource sends one resource's requests exactly as client-go's generated
// typed clients (k8s.io/client-go/gentype) send them: the same paths,
// query parameters, bodies and content types.
type resource[T object] struct {
	client    rest.Interface
	params    runtime.ParameterCodec
	namespace string // "" for a cluster-scoped resource
	resource  string
	newObject func() T
}

func newResource[T object](client rest.Interface, params runtime.ParameterCodec, namespace, name string, newObject func() T) *resource[T] {
	return &resource[T]{client: client, params: params, namespace: namespace, resource: name, newObject: newObject}
}

func (r *resource[T]) request(req *rest.Request) *rest.Request {
	return req.UseProtobufAsDefault().NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.resource)
}

// Get reads the object name.
func (r *resource[T]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := r.newObject()
	err := r.request(r.client.Get()).Name(name).VersionedParams(&opts, r.params).Do(ctx).Into(out)
	return out, err
}

// Create sends obj as a new object.
func (r *resource[T]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := r.newObject()
	err := r.request(r.client.Post()).VersionedParams(&opts, r.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Update sends obj as a full replacement.
func (r *resource[T]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := r.newObject()
	err := r.request(r.client.Put()).Name(obj.GetName()).VersionedParams(&opts, r.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Patch sends a patch of type pt to the object name.
func (r *resource[T]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	out := r.newObject()
	err := r.request(r.client.Patch(pt)).Name(name).SubResource(subresources...).VersionedParams(&opts, r.params).
		Body(data).Do(ctx).Into(out)
	return out, err
}

// Delete deletes the object name.
func (r *resource[T]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.request(r.client.Delete()).Name(name).Body(&opts).Do(ctx).Error()
}
