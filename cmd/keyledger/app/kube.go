package app

import (
	"errors"
	"io/fs"
	"net/http"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

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
		return nil, nil, nil, &workflow.Unavailable{Dependency: "kubernetes", Err: configError(err)}
	}
	client, err = kube.NewClient(cfg)
	if err != nil {
		kube.Scrub(cfg)
		return nil, nil, nil, &workflow.Unavailable{Dependency: "kubernetes", Err: configError(err)}
	}
	return cfg, client, func() { kube.Scrub(cfg) }, nil
}

// configError says what was wrong with the cluster configuration without
// its file paths (client-go's messages name them).
func configError(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("the kubeconfig file does not exist")
	case errors.Is(err, fs.ErrPermission):
		return errors.New("the kubeconfig file is not readable")
	case clientcmd.IsEmptyConfig(err):
		return errors.New("no cluster configuration: not in a cluster and no kubeconfig")
	case clientcmd.IsConfigurationInvalid(err):
		return errors.New("the cluster configuration is not valid")
	case errors.Is(err, kube.ErrConfig):
		// kube's own messages say what kind of problem it is, never a path.
		return err
	default:
		return errors.New("the cluster configuration could not be loaded")
	}
}
