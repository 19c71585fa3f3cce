package kube

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// After Scrub, nothing keyledger built from a configuration (the
// configuration, the typed clients, the dynamic client, their transport)
// holds the bearer token or the client key any more, and a request sent
// through any of them fails before it leaves the process.
func TestScrubReachesTheTransport(t *testing.T) {
	t.Parallel()
	const token = "kube-token-canary-7f3a91"
	var mu sync.Mutex
	var auths []string
	var peerCerts []int
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		peerCerts = append(peerCerts, len(r.TLS.PeerCertificates))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s","namespace":"ns"}}`))
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()

	certPEM, keyPEM, seed := clientCertificate(t)
	cfg := &rest.Config{Host: srv.URL, BearerToken: token, Timeout: 10 * time.Second,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
			CertData: certPEM, KeyData: keyPEM,
		}}
	client, err := NewClient(cfg)
	require.NoError(t, err)
	dyn, err := NewDynamic(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	get := func() error {
		_, err := client.Secrets("ns").Get(ctx, "s", metav1.GetOptions{})
		return err
	}
	getDynamic := func() error {
		_, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace("ns").Get(ctx, "s", metav1.GetOptions{})
		return err
	}
	require.NoError(t, get())
	require.NoError(t, getDynamic())
	mu.Lock()
	require.Equal(t, []string{"Bearer " + token, "Bearer " + token}, auths)
	require.Equal(t, []int{1, 1}, peerCerts, "the client certificate is presented")
	mu.Unlock()

	roots := []any{cfg, client, dyn}
	needles := map[string][]byte{"token": []byte(token), "key seed": seed}
	// The walk sees what it looks for: before Scrub the token is reachable.
	require.NotEmpty(t, reachable(roots, needles), "the walk must find the live credentials")

	Scrub(cfg)
	require.Empty(t, reachable(roots, needles), "a credential is still reachable after Scrub")
	require.ErrorIs(t, get(), ErrCredentialsCleared)
	require.ErrorIs(t, getDynamic(), ErrCredentialsCleared)
	mu.Lock()
	require.Len(t, auths, 2, "no request reached the server after Scrub")
	mu.Unlock()
}

// clientCertificate makes a self-signed ed25519 client certificate; seed is
// the private key's secret half.
func clientCertificate(t *testing.T) (certPEM, keyPEM, seed []byte) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	require.NoError(t, err)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(priv)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), append([]byte(nil), priv.Seed()...)
}

// reachable walks every value reachable from roots (unexported fields,
// pointers, interfaces, maps, slices; not closures or channels) and names
// each needle found in a string or byte slice.
func reachable(roots []any, needles map[string][]byte) []string {
	w := &walker{needles: needles, seen: map[visit]bool{}, found: map[string]bool{}}
	for _, r := range roots {
		v := reflect.New(reflect.TypeOf(r)).Elem()
		v.Set(reflect.ValueOf(r))
		w.walk(v, 0)
	}
	var out []string
	for name := range w.found {
		out = append(out, name)
	}
	return out
}

type visit struct {
	ptr uintptr
	typ reflect.Type
}

type walker struct {
	needles map[string][]byte
	seen    map[visit]bool
	found   map[string]bool
}

var reflectType = reflect.TypeOf((*reflect.Type)(nil)).Elem()

func (w *walker) check(b []byte) {
	for name, n := range w.needles {
		if bytes.Contains(b, n) {
			w.found[name] = true
		}
	}
}

func (w *walker) walk(v reflect.Value, depth int) {
	if depth > 200 || !v.IsValid() {
		return
	}
	switch v.Kind() {
	case reflect.String:
		w.check([]byte(v.String()))
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		k := visit{v.Pointer(), v.Type()}
		if w.seen[k] {
			return
		}
		w.seen[k] = true
		w.walk(v.Elem(), depth+1)
	case reflect.Interface:
		if v.IsNil() || v.Type() == reflectType {
			return
		}
		e := v.Elem()
		c := reflect.New(e.Type()).Elem()
		c.Set(e)
		w.walk(c, depth+1)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(reflect.Value{}) {
			return
		}
		for i := range v.NumField() {
			f := v.Field(i)
			if f.CanAddr() {
				f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
			}
			w.walk(f, depth+1)
		}
	case reflect.Slice:
		if v.IsNil() {
			return
		}
		k := visit{v.Pointer(), v.Type()}
		if w.seen[k] {
			return
		}
		w.seen[k] = true
		if v.Type().Elem().Kind() == reflect.Uint8 {
			w.check(v.Bytes())
			return
		}
		for i := range v.Len() {
			w.walk(v.Index(i), depth+1)
		}
	case reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 && v.CanAddr() {
			w.check(v.Bytes())
			return
		}
		for i := range v.Len() {
			w.walk(v.Index(i), depth+1)
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		k := visit{v.Pointer(), v.Type()}
		if w.seen[k] {
			return
		}
		w.seen[k] = true
		it := v.MapRange()
		for it.Next() {
			for _, x := range []reflect.Value{it.Key(), it.Value()} {
				c := reflect.New(x.Type()).Elem()
				c.Set(x)
				w.walk(c, depth+1)
			}
		}
	}
}

// A configuration handed to NewClient or NewDynamic may share its
// certificate and key bytes with the caller's other copies (rest.CopyConfig
// shares them): building a client empties the copy it was given and leaves
// every other copy able to build clients again. (The integration harness
// hands each test a copy of one admin configuration; zeroing the shared key
// in place broke every test after the first client was built.)
func TestNewClientLeavesTheCallersCopiesIntact(t *testing.T) {
	t.Parallel()
	certPEM, keyPEM, _ := clientCertificate(t)
	original := &rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: rest.TLSClientConfig{
		Insecure: true, CertData: certPEM, KeyData: keyPEM}}
	want := bytes.Clone(keyPEM)
	for range 2 {
		c := rest.CopyConfig(original)
		_, err := NewClient(c)
		require.NoError(t, err)
		require.Nil(t, c.KeyData, "the copy given to NewClient refers to no key any more")
		d := rest.CopyConfig(original)
		_, err = NewDynamic(d)
		require.NoError(t, err)
		require.Equal(t, want, original.KeyData, "the caller's own copy is left as it was")
	}
}
