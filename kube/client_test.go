package kube_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/kube/kubefake"
)

// sent is one request as the API server sees it.
type sent struct {
	Method, URL, ContentType, Accept, UserAgent string
	Body                                        []byte
}

// recorder answers every request 404 (a Status in JSON) and keeps it.
func recorder(t *testing.T) (*httptest.Server, func() []sent) {
	t.Helper()
	var mu sync.Mutex
	var got []sent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, sent{r.Method, r.URL.RequestURI(), r.Header.Get("Content-Type"), r.Header.Get("Accept"), r.Header.Get("User-Agent"), body})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"not found","details":{"name":"x"}}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []sent {
		mu.Lock()
		defer mu.Unlock()
		return append([]sent(nil), got...)
	}
}

// exercise sends every verb of every view once, with the options
// keyledger's adapters use, and returns each answer's error text.
func exercise(ctx context.Context, c kube.Interface) []string {
	uid, rv := types.UID("u-1"), "7"
	pre := &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}
	background, orphan := metav1.DeletePropagationBackground, metav1.DeletePropagationOrphan
	meta := metav1.ObjectMeta{Name: "x", Namespace: "ns", ResourceVersion: rv, UID: uid}
	immutable := true
	secret := &corev1.Secret{ObjectMeta: meta, Immutable: &immutable, Data: map[string][]byte{"k": []byte("v")}}
	var errs []string
	note := func(err error) {
		errs = append(errs, fmt.Sprintf("%v notFound=%v", err, apierrors.IsNotFound(err)))
	}
	_, err := c.Secrets("ns").Get(ctx, "x", metav1.GetOptions{})
	note(err)
	_, err = c.Secrets("ns").Create(ctx, secret, metav1.CreateOptions{})
	note(err)
	_, err = c.Secrets("ns").Update(ctx, secret, metav1.UpdateOptions{})
	note(err)
	_, err = c.Secrets("ns").Patch(ctx, "x", types.JSONPatchType, []byte(`[{"op":"test","path":"/metadata/resourceVersion","value":"7"}]`), metav1.PatchOptions{})
	note(err)
	_, err = c.Pods("ns").Get(ctx, "x", metav1.GetOptions{})
	note(err)
	note(c.Pods("ns").Delete(ctx, "x", metav1.DeleteOptions{Preconditions: pre}))
	hook := func(get func() error, create func() error, del func() error) {
		note(get())
		note(create())
		note(del())
	}
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	sa, role, binding := c.ServiceAccounts("ns"), c.Roles("ns"), c.RoleBindings("ns")
	cm, np, job := c.ConfigMaps("ns"), c.NetworkPolicies("ns"), c.Jobs("ns")
	hook(func() error { _, err := sa.Get(ctx, "x", metav1.GetOptions{}); return err },
		func() error {
			_, err := sa.Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta}, metav1.CreateOptions{})
			return err
		},
		func() error { return sa.Delete(ctx, "x", opts) })
	hook(func() error { _, err := role.Get(ctx, "x", metav1.GetOptions{}); return err },
		func() error {
			_, err := role.Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}}}}, metav1.CreateOptions{})
			return err
		},
		func() error { return role.Delete(ctx, "x", opts) })
	hook(func() error { _, err := binding.Get(ctx, "x", metav1.GetOptions{}); return err },
		func() error {
			_, err := binding.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta}, metav1.CreateOptions{})
			return err
		},
		func() error { return binding.Delete(ctx, "x", opts) })
	hook(func() error { _, err := cm.Get(ctx, "x", metav1.GetOptions{}); return err },
		func() error {
			_, err := cm.Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{})
			return err
		},
		func() error { return cm.Delete(ctx, "x", opts) })
	hook(func() error { _, err := np.Get(ctx, "x", metav1.GetOptions{}); return err },
		func() error {
			_, err := np.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: meta}, metav1.CreateOptions{})
			return err
		},
		func() error { return np.Delete(ctx, "x", opts) })
	hook(func() error { _, err := job.Get(ctx, "x", metav1.GetOptions{}); return err },
		func() error {
			_, err := job.Create(ctx, &batchv1.Job{ObjectMeta: meta}, metav1.CreateOptions{})
			return err
		},
		func() error { return job.Delete(ctx, "x", opts) })
	_, err = c.SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "ns", Verb: "get", Resource: "secrets", Name: "x"}}}, metav1.CreateOptions{})
	note(err)
	_, err = c.SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "ns"}}, metav1.CreateOptions{})
	note(err)
	del := metav1.DeleteOptions{Preconditions: pre, PropagationPolicy: &orphan}
	_, err = c.CoreREST().Delete().Namespace("ns").Resource("secrets").Name("x").Body(&del).Do(ctx).Get()
	note(err)
	return errs
}

// keyledger's client sends exactly what client-go's typed clients (the
// clientset it replaces, configured as NewClient configured them: protobuf
// bodies, protobuf then JSON accepted) send: the same methods, paths, query
// parameters, content types and bytes, for every verb of every view; and
// its errors are client-go's.
func TestClientSendsWhatTheTypedClientsSend(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	oursSrv, ours := recorder(t)
	client, err := kube.NewClient(&rest.Config{Host: oursSrv.URL, UserAgent: "keyledger"})
	require.NoError(t, err)
	oursErrs := exercise(ctx, client)

	theirsSrv, theirs := recorder(t)
	typed := &rest.Config{Host: theirsSrv.URL, UserAgent: "keyledger"}
	typed.ContentType = runtime.ContentTypeProtobuf
	typed.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	clientset, err := kubernetes.NewForConfig(typed)
	require.NoError(t, err)
	theirsErrs := exercise(ctx, kubefake.New(clientset))

	require.Len(t, ours(), 27, "4 secrets, 2 pods, 3 for each of the hook's 6 kinds, 2 reviews, 1 raw delete")
	require.Equal(t, theirs(), ours())
	require.Equal(t, theirsErrs, oursErrs)
	for _, s := range ours() {
		require.Equal(t, runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON, s.Accept, "%s %s", s.Method, s.URL)
		if len(s.Body) > 0 && s.Method != http.MethodPatch {
			require.Equal(t, runtime.ContentTypeProtobuf, s.ContentType, "%s %s", s.Method, s.URL)
		}
	}
}
