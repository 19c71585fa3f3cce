package kube

import (
	"fmt"
	"net/http"
	"time"

	typedauthorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	typedbatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	typedrbacv1 "k8s.io/client-go/kubernetes/typed/rbac/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ConfigOptions select the cluster.
type ConfigOptions struct {
	// Kubeconfig is an explicit kubeconfig path (--kubeconfig); empty means
	// the standard rules: $KUBECONFIG, ~/.kube/config, then in-cluster.
	Kubeconfig string
	// Timeout bounds every request (default 15s).
	Timeout time.Duration
	// Wrap, when set, wraps the transport (request counting, fault injection).
	Wrap func(http.RoundTripper) http.RoundTripper
}

// LoadConfig builds a rest.Config from in-cluster config or the standard
// kubeconfig rules.
func LoadConfig(o ConfigOptions) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading cluster configuration: %w", err)
	}
	cfg.Timeout = o.Timeout
	if cfg.Timeout == 0 {
		cfg.Timeout = 15 * time.Second
	}
	cfg.QPS, cfg.Burst = 100, 200
	cfg.UserAgent = "keyledger"
	cfg.WarningHandler = rest.NoWarnings{}
	if o.Wrap != nil {
		cfg.Wrap(o.Wrap)
	}
	return cfg, nil
}

// Interface is the part of the Kubernetes API keyledger calls: the four
// API groups its adapters use. A *kubernetes.Clientset satisfies it (tests
// pass one); NewClient builds only these groups' clients, so a run neither
// constructs nor pages in the fifty others a full clientset sets up.
type Interface interface {
	CoreV1() typedcorev1.CoreV1Interface
	AuthorizationV1() typedauthorizationv1.AuthorizationV1Interface
	RbacV1() typedrbacv1.RbacV1Interface
	BatchV1() typedbatchv1.BatchV1Interface
}

type clients struct {
	core  *typedcorev1.CoreV1Client
	authz *typedauthorizationv1.AuthorizationV1Client
	rbac  *typedrbacv1.RbacV1Client
	batch *typedbatchv1.BatchV1Client
}

func (c *clients) CoreV1() typedcorev1.CoreV1Interface { return c.core }
func (c *clients) AuthorizationV1() typedauthorizationv1.AuthorizationV1Interface {
	return c.authz
}
func (c *clients) RbacV1() typedrbacv1.RbacV1Interface    { return c.rbac }
func (c *clients) BatchV1() typedbatchv1.BatchV1Interface { return c.batch }

// NewClient builds the clients for cfg, sharing one HTTP client.
func NewClient(cfg *rest.Config) (Interface, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client: %w", err)
	}
	var c clients
	if c.core, err = typedcorev1.NewForConfigAndClient(cfg, httpClient); err == nil {
		if c.authz, err = typedauthorizationv1.NewForConfigAndClient(cfg, httpClient); err == nil {
			if c.rbac, err = typedrbacv1.NewForConfigAndClient(cfg, httpClient); err == nil {
				c.batch, err = typedbatchv1.NewForConfigAndClient(cfg, httpClient)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client: %w", err)
	}
	return &c, nil
}

// Scrub clears the bearer token and every credential reference held in cfg.
// Call it before exit so no credential outlives the run in memory longer than
// needed.
func Scrub(cfg *rest.Config) {
	if cfg == nil {
		return
	}
	cfg.BearerToken = ""
	cfg.BearerTokenFile = ""
	cfg.Username, cfg.Password = "", ""
	cfg.ExecProvider = nil
	cfg.AuthProvider = nil
	zero(cfg.TLSClientConfig.CertData)
	zero(cfg.TLSClientConfig.KeyData)
	cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData = nil, nil
	cfg.TLSClientConfig.CertFile, cfg.TLSClientConfig.KeyFile = "", ""
}

func zero(b []byte) {
	for i := range b {
		b[i] = 0
	}
}
