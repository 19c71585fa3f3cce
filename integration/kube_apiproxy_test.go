package integration

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/keyledger/keyledger/integration/suite"
)

// apiRecorder is a request recorder on the real transport: a TLS proxy on
// loopback in front of the test's API server that relays every request of
// a keyledger process unchanged (its own bearer token included) and keeps
// each request with its answer. after, when set, runs once the API server
// answered a request and before keyledger sees the answer: a test changes
// the cluster there at an exact point of a run.
type apiRecorder struct {
	t   *testing.T
	srv *httptest.Server

	mu    sync.Mutex
	reqs  []suite.APIRequest
	after func(r suite.APIRequest)
}

// newAPIRecorder starts a recording proxy in front of the test's API server.
func newAPIRecorder(e *env) *apiRecorder {
	e.T.Helper()
	admin := e.Kube.Config()
	target, err := url.Parse(admin.Host)
	require.NoError(e.T, err)
	pool := x509.NewCertPool()
	require.True(e.T, pool.AppendCertsFromPEM(admin.CAData), "the API server's CA")
	rec := &apiRecorder{t: e.T}
	proxy := &httputil.ReverseProxy{}
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: admin.ServerName, MinVersion: tls.VersionTLS12}}
	proxy.Rewrite = func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = target.Host
	}
	proxy.ModifyResponse = func(resp *http.Response) error {
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		req := suite.APIRequest{
			Method: resp.Request.Method, Path: resp.Request.URL.Path, Accept: resp.Request.Header.Get("Accept"),
			Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Kind: "protobuf",
		}
		if strings.HasPrefix(req.ContentType, "application/json") {
			var doc struct {
				Kind string          `json:"kind"`
				Data json.RawMessage `json:"data"`
			}
			if json.Unmarshal(body, &doc) == nil {
				req.Kind, req.HasData = doc.Kind, len(doc.Data) > 0
			}
		}
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, req)
		after := rec.after
		rec.mu.Unlock()
		if after != nil {
			after(req)
		}
		return nil
	}
	rec.srv = httptest.NewUnstartedServer(proxy)
	rec.srv.StartTLS()
	e.T.Cleanup(rec.srv.Close)
	return rec
}

// requests returns what was recorded since the last reset.
func (r *apiRecorder) requests() []suite.APIRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]suite.APIRequest(nil), r.reqs...)
}

// reset forgets what was recorded and sets the hook (nil for none).
func (r *apiRecorder) reset(after func(suite.APIRequest)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs, r.after = nil, after
}

// through runs as a ServiceAccount holding exactly rules, whose every
// request goes through the recorder: the kubeconfig names the proxy and
// trusts its certificate only.
func (r *apiRecorder) through(e *env, name string, rules []rbacv1.PolicyRule) suite.RunOption {
	e.T.Helper()
	cfg := e.ServiceAccountConfig(name, rules)
	cfg.Host = r.srv.URL
	cfg.TLSClientConfig.ServerName = ""
	cfg.TLSClientConfig.CAData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
	path, err := e.Kube.KubeconfigForConfig(cfg, e.T.TempDir())
	require.NoError(e.T, err)
	return suite.AsKubeconfig(path)
}
