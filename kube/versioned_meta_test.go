package kube_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/keyledger/keyledger/kube"
)

// A snapshot's metadata read asks for PartialObjectMetadata only, reads the
// metadata back without data, refuses another name before sending, and
// classifies a 404 as not found; an answer that is not metadata is an
// error, never taken for it.
func TestVersionedSecretsGetSnapshotMeta(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var accepts []string
	answer := `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"keyledger-h-a-v1","namespace":"ns","uid":"u-1","resourceVersion":"9","finalizers":["x/y"],"managedFields":[{"manager":"m"}]}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		accepts = append(accepts, r.Method+" "+r.URL.Path+" "+r.Header.Get("Accept"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/namespaces/ns/secrets/keyledger-h-a-v1":
			_, _ = fmt.Fprint(w, answer)
		case "/api/v1/namespaces/ns/secrets/keyledger-h-a-v2":
			_, _ = fmt.Fprint(w, `{"kind":"Secret","apiVersion":"v1","metadata":{"name":"keyledger-h-a-v2"},"data":{"k":"dg=="}}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"not found"}`)
		}
	}))
	t.Cleanup(srv.Close)
	client, err := kube.NewClient(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	v := kube.NewVersionedSecrets(client, "ns", "db")

	m, err := v.GetSnapshotMeta(t.Context(), "keyledger-h-a-v1")
	require.NoError(t, err)
	require.Equal(t, "u-1", string(m.UID))
	require.Equal(t, "9", m.ResourceVersion)
	require.Equal(t, []string{"x/y"}, m.Finalizers)
	require.Empty(t, m.ManagedFields)

	_, err = v.GetSnapshotMeta(t.Context(), "keyledger-h-a-v2")
	require.ErrorContains(t, err, `answered "Secret"`, "a whole Secret is not taken for metadata")

	_, err = v.GetSnapshotMeta(t.Context(), "keyledger-h-a-v3")
	require.True(t, errors.Is(err, kube.ReasonNotFound), "%v", err)

	_, err = v.GetSnapshotMeta(t.Context(), "db")
	require.ErrorContains(t, err, "not a snapshot name")

	want := "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	require.Equal(t, []string{
		"GET /api/v1/namespaces/ns/secrets/keyledger-h-a-v1 " + want,
		"GET /api/v1/namespaces/ns/secrets/keyledger-h-a-v2 " + want,
		"GET /api/v1/namespaces/ns/secrets/keyledger-h-a-v3 " + want,
	}, accepts, "metadata only, and nothing sent for another name")
}
