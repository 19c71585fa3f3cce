package app

import (
	"errors"
	"net/http"

	"k8s.io/client-go/rest"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow"
)

// kubeClient builds the Kubernetes client a command uses, from --kubeconfig
// (and --context) or the standard rules. wrap (may be nil) wraps its transport. Call release
// before returning: it clears the token and credential references held in
// the configuration.
// The configuration is returned for families that need other clients
// (dynamic, metadata) built from the same identity and transport.
func (c *commonFlags) kubeClient(wrap func(http.RoundTripper) http.RoundTripper) (cfg *rest.Config, client kube.Interface, release func(), err error) {
	cfg, err = kube.LoadConfig(kube.ConfigOptions{Kubeconfig: c.kubeconfig, Context: c.kubeContext, Wrap: wrap})
	if err != nil {
		return nil, nil, nil, configError(err)
	}
	client, err = kube.NewClient(cfg)
	if err != nil {
		kube.Scrub(cfg)
		return nil, nil, nil, configError(err)
	}
	return cfg, client, func() { kube.Scrub(cfg) }, nil
}

// configError maps a failure to build the client: a configuration that
// is missing, unreadable, malformed or unusable (kube.ErrConfig, whose
// messages name the cause and never a file) is the operator's to fix, a
// usage error (64); anything else is the cluster being unavailable (69).
func configError(err error) error {
	if errors.Is(err, kube.ErrConfig) {
		return &KubeconfigError{Err: err}
	}
	return &workflow.Unavailable{Dependency: "kubernetes", Err: err}
}

// KubeconfigError is a cluster configuration keyledger cannot use: exit 64,
// reason invalid-kubeconfig. Err says what is wrong, never which file.
type KubeconfigError struct{ Err error }

func (e *KubeconfigError) Error() string { return e.Err.Error() }
func (e *KubeconfigError) Unwrap() error { return e.Err }
