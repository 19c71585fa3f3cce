package kube

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ConfigOptions select the cluster.
type ConfigOptions struct {
	// Kubeconfig is an explicit kubeconfig path (--kubeconfig); empty means
	// the standard rules: $KUBECONFIG, ~/.kube/config, then in-cluster.
	Kubeconfig string
	// Context is the kubeconfig context to use (--context); empty means the
	// kubeconfig's current context.
	Context string
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
	if err := checkKubeconfigFiles(rules); err != nil {
		return nil, err
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context})
	if o.Context != "" {
		raw, err := loader.RawConfig()
		if err != nil {
			return nil, configError(err)
		}
		if _, ok := raw.Contexts[o.Context]; !ok {
			return nil, fmt.Errorf("%w: the kubeconfig has no context %q", ErrConfig, o.Context)
		}
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, configError(err)
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
	if err := own(cfg, true); err != nil {
		Scrub(cfg)
		return nil, err
	}
	return cfg, nil
}

// ErrConfig is every failure to load the cluster configuration. Its
// messages say what kind of problem it is, never which file: the paths of
// kubeconfig files (from --kubeconfig, $KUBECONFIG or the home directory)
// and of the files they reference stay out of every output.
var ErrConfig = errors.New("cluster configuration")

// configError replaces a clientcmd error, whose message names files, with
// one that says only what kind of problem it is.
func configError(err error) error {
	var what string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		what = "a kubeconfig file does not exist"
	case errors.Is(err, fs.ErrPermission):
		what = "a kubeconfig file is not readable"
	case clientcmd.IsEmptyConfig(err):
		what = "no cluster configured (no in-cluster configuration, no kubeconfig)"
	case clientcmd.IsConfigurationInvalid(err):
		what = "the kubeconfig is invalid"
	default:
		what = "the kubeconfig could not be read"
	}
	return fmt.Errorf("%w: %s", ErrConfig, what)
}

// checkKubeconfigFiles reads each kubeconfig file the rules would load
// and says which kind of problem the first bad one has: clientcmd folds a
// file's read or parse error into a message with its path (%v, so the
// cause cannot be told apart afterwards). A file named by --kubeconfig
// must exist; a missing file of $KUBECONFIG or the home directory is
// skipped, as clientcmd skips it.
func checkKubeconfigFiles(rules *clientcmd.ClientConfigLoadingRules) error {
	for _, file := range rules.GetLoadingPrecedence() {
		data, err := os.ReadFile(file) //nolint:gosec // G304: reading the kubeconfig the operator named is the point; its path never reaches a message
		switch {
		case errors.Is(err, fs.ErrNotExist) && file != rules.ExplicitPath:
			continue
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%w: the kubeconfig file does not exist", ErrConfig)
		case errors.Is(err, fs.ErrPermission):
			return fmt.Errorf("%w: a kubeconfig file is not readable (permission denied)", ErrConfig)
		case err != nil:
			return fmt.Errorf("%w: a kubeconfig file could not be read (not a regular file?)", ErrConfig)
		}
		if _, err := clientcmd.Load(data); err != nil {
			// The parser's message may quote the file's content.
			return fmt.Errorf("%w: a kubeconfig file is malformed (not a kubeconfig in YAML or JSON)", ErrConfig)
		}
	}
	return nil
}

// NewDynamic builds a dynamic client for cfg whose mutating requests are
// never re-sent by client-go (see NoRetry).
func NewDynamic(cfg *rest.Config) (*dynamic.DynamicClient, error) {
	if err := own(cfg, false); err != nil {
		return nil, fmt.Errorf("building Kubernetes client: %w", err)
	}
	config := dynamic.ConfigFor(cfg)
	httpClient, err := rest.HTTPClientFor(config)
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client: %w: its TLS or credential files could not be loaded", ErrConfig)
	}
	// As dynamic.NewForConfigAndClient: the resource carries the path.
	config.GroupVersion = nil
	config.APIPath = "/if-you-see-this-search-for-the-break"
	rc, err := rest.UnversionedRESTClientForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client: %w", err)
	}
	return dynamic.New(NoRetry(rc)), nil
}

// NoRetry wraps a REST client so that every request other than GET is sent
// at most once: client-go otherwise re-sends a request answered with 429 or
// a 5xx carrying Retry-After, up to ten times, and the caller sees only the
// last answer. A journaled call is one request; its answer, whatever it is,
// is the call's result, and resolution decides from the durable facts.
// Reads keep client-go's retries: they change nothing.
func NoRetry(c rest.Interface) rest.Interface { return noRetry{c} }

type noRetry struct{ rest.Interface }

func (c noRetry) Verb(verb string) *rest.Request {
	r := c.Interface.Verb(verb)
	if verb != http.MethodGet {
		r.MaxRetries(0)
	}
	return r
}
func (c noRetry) Post() *rest.Request   { return c.Interface.Post().MaxRetries(0) }
func (c noRetry) Put() *rest.Request    { return c.Interface.Put().MaxRetries(0) }
func (c noRetry) Delete() *rest.Request { return c.Interface.Delete().MaxRetries(0) }
func (c noRetry) Patch(pt types.PatchType) *rest.Request {
	return c.Interface.Patch(pt).MaxRetries(0)
}

// Scrub clears the bearer token and every credential reference held in cfg
// and in what keyledger built from it: the transport every client of cfg
// shares zeroes its token (or password) and client certificate, closes its
// connections and refuses every later request (ErrCredentialsCleared).
// Call it before exit so no credential outlives the run in memory longer
// than needed.
func Scrub(cfg *rest.Config) {
	if cfg == nil {
		return
	}
	if t, ok := cfg.Transport.(*ownedTransport); ok {
		t.clear()
	}
	clearCredentials(cfg, true)
}

func zero(b []byte) {
	for i := range b {
		b[i] = 0
	}
}
