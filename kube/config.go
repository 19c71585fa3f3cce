package kube

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/kubernetes"
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

// NewClient builds a clientset for cfg.
func NewClient(cfg *rest.Config) (kubernetes.Interface, error) {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client: %w", err)
	}
	return c, nil
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
