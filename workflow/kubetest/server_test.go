package kubetest

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

func secretOf(t *testing.T) func(o Object, err error) *corev1.Secret {
	return func(o Object, err error) *corev1.Secret {
		t.Helper()
		require.NoError(t, err)
		return o.(*corev1.Secret)
	}
}

// The Server answers as the API server does, and as kube.Classify and the
// adapters' errors.Is read real answers.
func TestServerIsTheAPIServer(t *testing.T) {
	t.Parallel()
	s := New("ns")
	must := secretOf(t)
	seeded := s.Seed(Secrets, NewSecret("a", WithData("k", "v"), WithAnnotations("x", "1"))).(*corev1.Secret)
	require.Equal(t, "uid-0001", string(seeded.UID))
	require.Equal(t, "1", seeded.ResourceVersion)
	read := must(s.Get(Secrets, "a"))

	stale := read.DeepCopy()
	stale.Annotations["example.com/a"] = "1"
	written := must(s.Update(Secrets, stale))
	require.NotEqual(t, read.ResourceVersion, written.ResourceVersion, "a write moves the resourceVersion")
	require.Equal(t, read.UID, written.UID)

	again := must(s.Update(Secrets, written.DeepCopy()))
	require.Equal(t, written.ResourceVersion, again.ResourceVersion, "a write that changes nothing keeps it")
	require.Len(t, s.Written(Secrets, "a"), 1, "and is not a write")
	require.Equal(t, 1, s.Writes(Secrets, "a"))

	_, err := s.Update(Secrets, stale)
	require.ErrorIs(t, err, kube.ReasonConflict, "a stale resourceVersion is 409")
	require.Equal(t, 409, kube.Classify(err).Code)
	var status apierrors.APIStatus
	require.ErrorAs(t, err, &status, "a real status error under a *kube.Error")
	var ke *kube.Error
	require.ErrorAs(t, err, &ke)

	otherUID := written.DeepCopy()
	otherUID.UID = "uid-beef"
	_, err = s.Update(Secrets, otherUID)
	require.ErrorIs(t, err, kube.ReasonConflict, "another UID is 409")

	s.Edit(Secrets, "a", func(o Object) { Frozen(o.(*corev1.Secret)) })
	frozen := s.Secret("a")
	frozen.Data["k"] = []byte("{}")
	_, err = s.Update(Secrets, frozen)
	require.ErrorIs(t, err, kube.ReasonInvalid, "changed data of an immutable Secret is 422")
	require.True(t, kube.Classify(err).Definite)

	_, err = s.Create(Secrets, NewSecret("a"))
	require.ErrorIs(t, err, kube.ReasonAlreadyExists)
	withRV := NewSecret("b")
	withRV.ResourceVersion = "3"
	_, err = s.Create(Secrets, withRV)
	require.ErrorIs(t, err, kube.ReasonInvalid, "a create carrying a resourceVersion is 422")

	s.Remove(Secrets, "a")
	_, err = s.Get(Secrets, "a")
	require.ErrorIs(t, err, kube.ReasonNotFound)
	_, err = s.Update(Secrets, written)
	require.ErrorIs(t, err, kube.ReasonNotFound)

	for f, r := range map[*Fault]kube.Reason{
		new(LostBefore()): kube.ReasonLost, new(Status(Conflict(Secrets, "a"))): kube.ReasonConflict,
		new(Status(NotFound(Secrets, "a"))): kube.ReasonNotFound, new(Status(Invalid("Secret", "a"))): kube.ReasonInvalid,
		new(Status(ServerError())): kube.ReasonServerError, new(Status(Forbidden(Secrets, "a"))): kube.ReasonForbidden,
	} {
		require.ErrorIs(t, f.refused(Request{Verb: Get, Resource: Secrets, Name: "a"}), r)
	}
	require.Equal(t, 2, s.Count(Get, Secrets, "a"), "every get counted")
	require.Equal(t, 6, s.Count(Update, Secrets, ""), "every update counted")
	require.Equal(t, 2, s.Count(Create, Secrets, ""))
}

// Each fault of the vocabulary does what it says to one request.
func TestFaults(t *testing.T) {
	t.Parallel()
	s := New("ns")
	must := secretOf(t)
	cur := s.Seed(Secrets, NewSecret("a", WithData("k", "v"))).(*corev1.Secret)
	next := func() *corev1.Secret {
		n := s.Secret("a")
		n.Data["k"] = []byte(strconv.Itoa(len(s.Requests())))
		return n
	}

	s.On(Update, Secrets, "a", LostBefore())
	_, err := s.Update(Secrets, next())
	require.ErrorIs(t, err, kube.ReasonLost)
	require.Equal(t, cur, s.Secret("a"), "lost before: nothing applied")

	s.On(Update, Secrets, "a", AppliedLost())
	_, err = s.Update(Secrets, next())
	require.ErrorIs(t, err, kube.ReasonLost)
	require.NotEqual(t, cur.ResourceVersion, s.Secret("a").ResourceVersion, "applied then lost: the write landed")
	require.ErrorContains(t, err, "no answer", "the message says no answer came")
	require.NotContains(t, err.Error(), "127.0.0.1", "and never the address")

	s.On(Update, Secrets, "a", Status(ServerError()))
	before := s.Secret("a")
	_, err = s.Update(Secrets, next())
	require.ErrorIs(t, err, kube.ReasonServerError)
	require.Equal(t, before, s.Secret("a"), "a status applies nothing")

	s.On(Update, Secrets, "a", Theirs(func(s *Server) { s.Edit(Secrets, "a", Annotate) }))
	_, err = s.Update(Secrets, next())
	require.ErrorIs(t, err, kube.ReasonConflict, "someone else's write first: ours is stale")
	require.Equal(t, "yes", s.Secret("a").Annotations["example.com/touched"])

	s.On(Update, Secrets, "a", Admission(func(o Object) { o.SetLabels(map[string]string{"admitted": "yes"}) }))
	got := must(s.Update(Secrets, next()))
	require.Equal(t, "yes", got.Labels["admitted"], "admission changes what is stored")
	require.Equal(t, got, s.Secret("a"))

	s.On(Get, Secrets, "a", Answer(func(o Object) { o.SetResourceVersion("1") }))
	got = must(s.Get(Secrets, "a"))
	require.Equal(t, "1", got.ResourceVersion)
	require.NotEqual(t, "1", s.Secret("a").ResourceVersion, "an answer fault changes the answer only")

	s.On(Get, Secrets, "", Status(ServerError()).After(1).Times(2))
	_, err = s.Get(Secrets, "a")
	require.NoError(t, err, "after: the first passes")
	for range 2 {
		_, err = s.Get(Secrets, "b")
		require.ErrorIs(t, err, kube.ReasonServerError, "any name matches; times: twice")
	}
	_, err = s.Get(Secrets, "b")
	require.ErrorIs(t, err, kube.ReasonNotFound, "then served")

	s.On(Get, Secrets, "a", LostBefore().First(func(s *Server) { s.Remove(Secrets, "a") }))
	_, err = s.Get(Secrets, "a")
	require.ErrorIs(t, err, kube.ReasonLost)
	require.Nil(t, s.Secret("a"), "First: someone else's write, then the fault")
}

// A JSON patch applies as the API server applies it; a test that does not
// hold is test-failed, not invalid.
func TestPatch(t *testing.T) {
	t.Parallel()
	s := New("ns")
	must := secretOf(t)
	cur := s.Seed(Secrets, NewSecret("a", WithData("k", "v"))).(*corev1.Secret)
	patch := `[{"op":"test","path":"/metadata/resourceVersion","value":"` + cur.ResourceVersion + `"},{"op":"add","path":"/data/n","value":"dw=="}]`
	got := must(s.Patch(Secrets, "a", []byte(patch)))
	require.Equal(t, "w", string(got.Data["n"]))
	require.NotEqual(t, cur.ResourceVersion, got.ResourceVersion)
	require.Equal(t, 1, s.Writes(Secrets, "a"))

	_, err := s.Patch(Secrets, "a", []byte(patch))
	require.ErrorIs(t, err, kube.ReasonTestFailed)
	require.False(t, kube.Classify(err).Definite, "settled by re-reading")
	s.On(Patch, Secrets, "a", Status(TestFailed()))
	_, err = s.Patch(Secrets, "a", []byte(`[]`))
	require.ErrorIs(t, err, kube.ReasonTestFailed, "a scripted status is read as PatchSecret reads it")

	s.Edit(Secrets, "a", func(o Object) { Frozen(o.(*corev1.Secret)) })
	_, err = s.Patch(Secrets, "a", []byte(`[{"op":"add","path":"/data/k","value":"eA=="}]`))
	require.ErrorIs(t, err, kube.ReasonInvalid, "an immutable Secret's data")
	_, err = s.Patch(Secrets, "b", []byte(`[]`))
	require.ErrorIs(t, err, kube.ReasonNotFound)
	_, err = s.Patch(Secrets, "a", []byte(`{`))
	require.ErrorIs(t, err, kube.ReasonBadRequest)
}

// Deletes check their preconditions; finalizers keep the object
// terminating; an orphaning delete waits for the garbage collector.
func TestDelete(t *testing.T) {
	t.Parallel()
	s := New("ns")
	a := s.Seed(Secrets, NewSecret("a"))
	_, err := s.Delete(Secrets, "a", Preconditions{UID: "uid-x"}, false)
	require.ErrorIs(t, err, kube.ReasonConflict)
	_, err = s.Delete(Secrets, "a", Preconditions{UID: a.GetUID(), ResourceVersion: "99"}, false)
	require.ErrorIs(t, err, kube.ReasonConflict)
	gone, err := s.Delete(Secrets, "a", Preconditions{UID: a.GetUID(), ResourceVersion: a.GetResourceVersion()}, false)
	require.NoError(t, err)
	require.Equal(t, Gone, gone)
	require.Nil(t, s.Object(Secrets, "a"))
	_, err = s.Delete(Secrets, "a", Preconditions{}, false)
	require.ErrorIs(t, err, kube.ReasonNotFound)

	h := s.Seed(Secrets, NewSecret("h", Held))
	gone, err = s.Delete(Secrets, "h", Preconditions{UID: h.GetUID()}, false)
	require.NoError(t, err)
	require.Equal(t, Terminating, gone)
	require.NotNil(t, s.Secret("h").DeletionTimestamp)

	owner := s.Seed(Pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "o"}})
	dep := NewSecret("d")
	dep.OwnerReferences = append(dep.OwnerReferences, metav1OwnerRef(owner))
	s.Seed(Secrets, dep)
	gone, err = s.Delete(Pods, "o", Preconditions{}, true)
	require.NoError(t, err)
	require.Equal(t, Terminating, gone, "orphaning: the orphan finalizer holds it")
	require.True(t, s.Collect(Pods, "o"))
	require.Nil(t, s.Object(Pods, "o"))
	require.Empty(t, s.Secret("d").OwnerReferences, "its dependents are released")
	require.Equal(t, map[string]int{"a": 1, "h": 1}, s.AllWrites(Secrets))
}

// No non-test code imports this package: it is test support only.
func TestOnlyTestsImportIt(t *testing.T) {
	t.Parallel()
	workflowtest.RequireOnlyTestsImport(t, "../..", ".", "github.com/keyledger/keyledger/workflow/kubetest")
}

func metav1OwnerRef(o Object) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: o.GetName(), UID: o.GetUID()}
}
