package app

import (
	"net/http"

	"k8s.io/client-go/rest"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow"
)

// kubeClient builds the Kubernetes client a command uses, from --kubeconfig
// or the standard rules. wrap (may be nil) wraps its transport. Call release
// before returning: it clears the token and credential references held in
// the configuration.
// The configuration is returned for families that need other clients
// (dynamic, metadata) built from the same identity and transport.
func (c *commonFlags) kubeClient(wrap func(http.RoundTripper) http.RoundTripper) (cfg *rest.Config, client kube.Interface, release func(), err error) {
	cfg, err = kube.LoadConfig(kube.ConfigOptions{Kubeconfig: c.kubeconfig, Wrap: wrap})
	if err != nil {
		return nil, nil, nil, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	client, err = kube.NewClient(cfg)
	if err != nil {
		kube.Scrub(cfg)
		return nil, nil, nil, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	return cfg, client, func() { kube.Scrub(cfg) }, nil
}
