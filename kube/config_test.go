package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// A mutating request answered with 429 or 503 and Retry-After is sent once:
// the answer is the call's result. (client-go alone re-sends it up to ten
// times.) Every client keyledger builds for writes is checked: the typed
// clients and the dynamic one.
func TestMutatingRequestsAreSentOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		code := http.StatusTooManyRequests
		if r.Method == http.MethodDelete {
			code = http.StatusServiceUnavailable
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":429}`))
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	client, err := NewClient(cfg)
	require.NoError(t, err)
	dyn, err := NewDynamic(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}}
	secrets := client.Secrets("ns")
	gvr := schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1", Resource: "externalsecrets"}
	calls := map[string]func() error{
		http.MethodPost: func() error { _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); return err },
		http.MethodPut:  func() error { _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); return err },
		http.MethodPatch: func() error {
			_, err := secrets.Patch(ctx, "s", types.JSONPatchType, []byte(`[]`), metav1.PatchOptions{})
			return err
		},
		http.MethodDelete: func() error { return dyn.Resource(gvr).Namespace("ns").Delete(ctx, "e", metav1.DeleteOptions{}) },
	}
	for method, call := range calls {
		require.Error(t, call(), method)
		mu.Lock()
		require.Equal(t, 1, seen[method], "%s sent once", method)
		mu.Unlock()
	}
	require.Error(t, client.Pods("ns").Delete(ctx, "p", metav1.DeleteOptions{}))
	mu.Lock()
	require.Equal(t, 2, seen[http.MethodDelete], "a typed delete is sent once too")
	mu.Unlock()
}

// The permission check's reviews write nothing: one answered 429 with
// Retry-After (the API server's concurrency limit, when many runs start at
// once) is asked again, as a GET is, and its answer is the second one. A
// Secret's create on the same client is still sent once.
func TestReviewsAreAskedAgainAfterTooManyRequests(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		n := seen[r.URL.Path]
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if n == 1 || strings.HasSuffix(r.URL.Path, "/secrets") {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":429}`))
			return
		}
		_, _ = w.Write([]byte(`{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","status":{"allowed":true}}`))
	}))
	defer srv.Close()
	client, err := NewClient(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	ctx := context.Background()
	review, err := client.SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.True(t, review.Status.Allowed)
	_, err = client.Secrets("ns").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
	require.Error(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{
		"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews": 2,
		"/api/v1/namespaces/ns/secrets":                          1,
	}, seen)
}

// No failure to load the cluster configuration names a file: not the
// kubeconfig given with --kubeconfig or $KUBECONFIG, not a certificate it
// references.
func TestConfigErrorsNameNoPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kubeconfig-canary-dir-5e1d")
	require.NoError(t, os.Mkdir(dir, 0o700))
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	garbage := write("garbage-canary", "{{{ not yaml")
	missingCert := write("cert-canary", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {client-certificate: `+dir+`/absent-cert-canary.pem, client-key: `+dir+`/absent-key-canary.pem}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`)
	for name, explicit := range map[string]string{
		"missing": filepath.Join(dir, "absent-canary"), "garbage": garbage, "missing-cert": missingCert,
	} {
		t.Setenv("KUBECONFIG", "")
		cfg, err := LoadConfig(ConfigOptions{Kubeconfig: explicit})
		if err == nil {
			_, err = NewClient(cfg)
		}
		require.Error(t, err, name)
		require.ErrorIs(t, err, ErrConfig, name)
		require.NotContains(t, err.Error(), "canary", "%s: %v", name, err)
		require.NotContains(t, err.Error(), dir, name)
	}
	t.Setenv("KUBECONFIG", garbage)
	_, err := LoadConfig(ConfigOptions{})
	require.ErrorIs(t, err, ErrConfig)
	require.NotContains(t, err.Error(), "canary", "$KUBECONFIG: %v", err)
}
