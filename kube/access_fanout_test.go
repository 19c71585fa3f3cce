package kube

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// The permission matrix and the rules review go out on one connection,
// one TLS handshake, however many reviews there are (a new client sending
// them all at once would dial one connection per review), and answer the
// same mismatches in the same order: the matrix's, then the rules review's.
func TestCheckAccessAndRulesShareOneConnection(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	handshakes, requests := 0, 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // the first answer is slow: the others must not wait for it
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/selfsubjectrulesreviews") {
			_, _ = w.Write([]byte(`{"kind":"SelfSubjectRulesReview","apiVersion":"authorization.k8s.io/v1","status":{"resourceRules":[],"nonResourceRules":[],"incomplete":false}}`))
			return
		}
		_, _ = w.Write([]byte(`{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","status":{"allowed":true}}`))
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			handshakes++
			mu.Unlock()
		}
	}
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, BearerToken: "t", Timeout: 10 * time.Second,
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}
	client, err := NewClient(cfg)
	require.NoError(t, err)
	defer Scrub(cfg)

	var checks []AccessCheck
	for i := range 10 {
		checks = append(checks, SecretCheck("get", "ns", OtherSecretName()+strings.Repeat("x", i), i%2 == 0))
	}
	rights := &Rights{Namespace: "ns", Rules: nil}
	mismatches, err := CheckAccessAndRules(context.Background(), client, checks, rights)
	require.NoError(t, err)
	var want []string
	for i, c := range checks {
		if i%2 == 1 {
			want = append(want, c.String()+": allowed")
		}
	}
	require.Equal(t, want, mismatches, "every allowed check that should be denied, in the matrix's order")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 11, requests, "ten access reviews and one rules review")
	require.Equal(t, 1, handshakes, "one connection for all eleven reviews")
}
