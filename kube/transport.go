package kube

import (
	"bytes"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// ErrCredentialsCleared is the error of every request sent through a
// transport after Scrub cleared its credentials.
var ErrCredentialsCleared = errors.New("kubernetes: the credentials were cleared at exit; no request is sent")

// ownedTransport is the one transport every client built from a
// configuration shares, and the only holder of its credentials: the bearer
// token (or basic-auth pair) and the client certificate live here and
// nowhere else keyledger can reach, so Scrub can zero them, close the
// connections and make every later request fail. client-go's own transport
// would keep its copies (the bearer round tripper's token string, the TLS
// cache's certificates, shared process-wide) out of reach.
type ownedTransport struct {
	mu       sync.Mutex
	base     *http.Transport
	token    []byte
	user     []byte
	password []byte
	cert     *tls.Certificate
	cleared  bool
}

// RoundTrip adds the credentials to a copy of the request and sends it.
func (t *ownedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	if t.cleared {
		t.mu.Unlock()
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, ErrCredentialsCleared
	}
	base := t.base
	var auth string
	if req.Header.Get("Authorization") == "" {
		switch {
		case len(t.token) > 0:
			auth = "Bearer " + string(t.token)
		case len(t.user) > 0 || len(t.password) > 0:
			r := &http.Request{Header: http.Header{}}
			r.SetBasicAuth(string(t.user), string(t.password))
			auth = r.Header.Get("Authorization")
		}
	}
	t.mu.Unlock()
	if auth != "" {
		req = utilnet.CloneRequest(req)
		req.Header.Set("Authorization", auth)
	}
	return base.RoundTrip(req)
}

// clientCertificate is the TLS handshake's only way to the client
// certificate: after clear it offers none.
func (t *ownedTransport) clientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cert == nil || t.cleared {
		return &tls.Certificate{}, nil
	}
	return t.cert, nil
}

// CloseIdleConnections closes the base transport's idle connections.
func (t *ownedTransport) CloseIdleConnections() {
	t.mu.Lock()
	base := t.base
	t.mu.Unlock()
	if base != nil {
		base.CloseIdleConnections()
	}
}

// clear zeroes and drops every credential, closes the idle connections
// (with them the TLS sessions) and drops the base transport.
func (t *ownedTransport) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cleared {
		return
	}
	t.cleared = true
	zero(t.token)
	zero(t.user)
	zero(t.password)
	t.token, t.user, t.password = nil, nil, nil
	if t.cert != nil {
		for _, c := range t.cert.Certificate {
			zero(c)
		}
		if k, ok := t.cert.PrivateKey.(ed25519.PrivateKey); ok {
			zero(k)
		}
		*t.cert = tls.Certificate{}
		t.cert = nil
	}
	if t.base != nil {
		t.base.CloseIdleConnections()
		if t.base.TLSClientConfig != nil {
			t.base.TLSClientConfig.GetClientCertificate = nil
		}
		t.base = nil
	}
}

// own moves cfg's credentials into an ownedTransport set as cfg.Transport,
// once (a configuration already owned is left as it is). Afterwards cfg
// holds no token, password, certificate or key, nor the files they came
// from: every client client-go builds from cfg (typed, dynamic, any copy of
// cfg) sends through the one transport, which adds them. An exec plugin or
// an auth provider is refused: the credentials it caches inside client-go
// cannot be cleared at exit.
//
// zeroSource says whether cfg's credential bytes are keyledger's alone
// (LoadConfig built cfg from the kubeconfig): then they are zeroed where
// they lie. A config handed to NewClient or NewDynamic by a caller may share
// its byte slices with the caller's other copies (rest.CopyConfig shares
// them), so it is only emptied: its fields stop referring to a credential,
// and the caller's own copies are left as they are.
func own(cfg *rest.Config, zeroSource bool) error {
	if _, ok := cfg.Transport.(*ownedTransport); ok {
		return nil
	}
	if cfg.Transport != nil {
		return fmt.Errorf("%w: a custom transport is not supported", ErrConfig)
	}
	if cfg.ExecProvider != nil || cfg.AuthProvider != nil {
		return fmt.Errorf("%w: the kubeconfig's user authenticates with an exec plugin or auth provider, whose credentials keyledger cannot clear at exit; use a token or a client certificate", ErrConfig)
	}
	t := &ownedTransport{}
	switch {
	case cfg.BearerToken != "":
		t.token = []byte(cfg.BearerToken)
	case cfg.BearerTokenFile != "":
		b, err := os.ReadFile(cfg.BearerTokenFile)
		if err != nil {
			return fmt.Errorf("%w: the token file could not be read", ErrConfig)
		}
		t.token = trimSpace(b)
	}
	if cfg.Username != "" || cfg.Password != "" {
		if len(t.token) > 0 {
			return fmt.Errorf("%w: a bearer token and a username/password are both set", ErrConfig)
		}
		t.user, t.password = []byte(cfg.Username), []byte(cfg.Password)
	}
	// The TLS configuration without the client certificate: the server's
	// CA, name and the insecure flag, as client-go reads them.
	verify := rest.CopyConfig(cfg)
	verify.CertData, verify.KeyData, verify.CertFile, verify.KeyFile = nil, nil, "", ""
	tlsConfig, err := rest.TLSConfigFor(verify)
	if err != nil {
		return fmt.Errorf("%w: its TLS files could not be loaded", ErrConfig)
	}
	if certData, keyData, err := certAndKey(cfg); err != nil {
		return err
	} else if len(certData) > 0 || len(keyData) > 0 {
		pair, err := tls.X509KeyPair(certData, keyData)
		zero(keyData)
		if err != nil {
			return fmt.Errorf("%w: the client certificate or key is not valid", ErrConfig)
		}
		t.cert = &pair
		if tlsConfig == nil {
			tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	}
	if tlsConfig != nil {
		tlsConfig.GetClientCertificate = t.clientCertificate
	}
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	proxy := cfg.Proxy
	if proxy == nil {
		proxy = http.ProxyFromEnvironment
	}
	t.base = utilnet.SetTransportDefaults(&http.Transport{
		Proxy: proxy, TLSHandshakeTimeout: 10 * time.Second, TLSClientConfig: tlsConfig,
		MaxIdleConnsPerHost: 25, DialContext: dial, DisableCompression: cfg.DisableCompression,
	})
	// Nothing in cfg refers to a credential any more; what stays is the
	// address, the impersonation settings and the wrappers.
	clearCredentials(cfg, zeroSource)
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	cfg.Dial, cfg.Proxy = nil, nil
	cfg.Transport = t
	return nil
}

// certAndKey returns the client certificate and key cfg names (inline or
// from files), or none.
func certAndKey(cfg *rest.Config) (certData, keyData []byte, err error) {
	certData, keyData = bytes.Clone(cfg.CertData), bytes.Clone(cfg.KeyData)
	if len(certData) == 0 && cfg.CertFile != "" {
		if certData, err = os.ReadFile(cfg.CertFile); err != nil {
			return nil, nil, fmt.Errorf("%w: the client certificate file could not be read", ErrConfig)
		}
	}
	if len(keyData) == 0 && cfg.KeyFile != "" {
		if keyData, err = os.ReadFile(cfg.KeyFile); err != nil {
			return nil, nil, fmt.Errorf("%w: the client key file could not be read", ErrConfig)
		}
	}
	return certData, keyData, nil
}

// clearCredentials drops every credential field of cfg, zeroing the
// certificate and key bytes first when zeroSource is set (see own).
func clearCredentials(cfg *rest.Config, zeroSource bool) {
	cfg.BearerToken = ""
	cfg.BearerTokenFile = ""
	cfg.Username, cfg.Password = "", ""
	cfg.ExecProvider = nil
	cfg.AuthProvider = nil
	cfg.AuthConfigPersister = nil
	if zeroSource {
		zero(cfg.TLSClientConfig.CertData)
		zero(cfg.TLSClientConfig.KeyData)
	}
	cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData = nil, nil
	cfg.TLSClientConfig.CertFile, cfg.TLSClientConfig.KeyFile = "", ""
}

func trimSpace(b []byte) []byte {
	start, end := 0, len(b)
	for start < end && (b[start] == ' ' || b[start] == '\n' || b[start] == '\r' || b[start] == '\t') {
		start++
	}
	for end > start && (b[end-1] == ' ' || b[end-1] == '\n' || b[end-1] == '\r' || b[end-1] == '\t') {
		end--
	}
	out := append([]byte(nil), b[start:end]...)
	zero(b)
	return out
}
