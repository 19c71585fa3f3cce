package kube

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCounterNamesVerbsAndResources(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	var c Counter
	client := &http.Client{Transport: c.Wrap(http.DefaultTransport)}
	for _, req := range []struct{ method, path string }{
		{"GET", "/api/v1/namespaces/ns/secrets/keyring"},
		{"GET", "/api/v1/namespaces/ns/secrets"},
		{"GET", "/api/v1/namespaces/ns/secrets?watch=true"},
		{"PUT", "/api/v1/namespaces/ns/secrets/keyring"},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"},
		{"DELETE", "/api/v1/namespaces/ns/pods/p-0"},
		{"GET", "/api/v1/namespaces/ns"},
		{"POST", "/api/v1/namespaces/ns/serviceaccounts/sa/token"},
	} {
		r, err := http.NewRequest(req.method, srv.URL+req.path, nil)
		require.NoError(t, err)
		resp, err := client.Do(r)
		require.NoError(t, err)
		resp.Body.Close()
	}
	require.Equal(t, map[string]int{
		"GET secrets": 1, "LIST secrets": 1, "WATCH secrets": 1, "PUT secrets": 1,
		"POST selfsubjectaccessreviews": 1, "DELETE pods": 1, "GET namespaces": 1, "POST serviceaccounts/token": 1,
	}, c.Counts())
	require.Equal(t, 8, c.Total())
}
