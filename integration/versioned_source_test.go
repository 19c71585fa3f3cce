package integration

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// The live version counter on the real API server: "0" is version 1 (the
// update archives it as version 1 and writes 2); a malformed counter and
// an exhausted one are refused with their reasons, the refusal journaled,
// nothing archived or written.
func TestIntegrationVersionedCounters(t *testing.T) {
	t.Parallel()
	e := setup(t)
	names := []string{"zero", "leading-zero", "text", "negative", "exhausted"}
	as := e.asWriter(names...)
	withCounter := func(name, counter string) *corev1.Secret {
		s := plainSecret(name, map[string][]byte{"k": vCanary("0")})
		s.Annotations = map[string]string{versioned.AnnotationVersion: counter}
		return e.createSecret(s)
	}

	zero := withCounter("zero", "0")
	out := requireOK(t, e.runCmd(updateCommand(e.ns, "zero", zero.ResourceVersion, "mut-zero", map[string][]byte{"k": vCanary("1")}), as), "completed")
	require.EqualValues(t, 2, out["version"])
	require.Equal(t, "2", e.getSecret("zero").Annotations[versioned.AnnotationVersion])
	e.requireSnapshot(zero, 1, "mut-zero")

	for _, tc := range []struct{ name, counter, reason string }{
		{"leading-zero", "01", "version-malformed"},
		{"text", "two", "version-malformed"},
		{"negative", "-1", "version-malformed"},
		{"exhausted", fmt.Sprint(versioned.MaxVersion), "version-exhausted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := withCounter(tc.name, tc.counter)
			mutation := "mut-" + tc.name
			r := e.runCmd(updateCommand(e.ns, tc.name, s.ResourceVersion, mutation, map[string][]byte{"k": vCanary("1")}), as)
			requireRefused(t, r, tc.reason)
			require.Equal(t, s.ResourceVersion, e.getSecret(tc.name).ResourceVersion, "nothing written")
			require.Empty(t, e.snapshotsOf(s.UID), "nothing archived")
			op, records := e.journalOf(mutation)
			require.Equal(t, store.StateRefused, op.State)
			require.Equal(t, tc.reason, op.Reason)
			require.Zero(t, count(records, store.RecordAuthorityCall), "no call sent")
		})
	}
}

// sourceSecret is a live Secret of a type other than Opaque, owned by a
// ConfigMap of the namespace and held by a finalizer (removed at cleanup).
func (e *env) sourceSecret(name string) *corev1.Secret {
	e.t.Helper()
	owner, err := e.kube.Client().CoreV1().ConfigMaps(e.ns).Create(e.t.Context(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-owner"}}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	s := plainSecret(name, map[string][]byte{"k": vCanary(name + "-0")})
	s.Type = "example.com/custom"
	s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
	s.Finalizers = []string{"keyledger.test/hold"}
	created := e.createSecret(s)
	e.t.Cleanup(func() { e.removeFinalizers(name) })
	return created
}

// A source carrying owner references and finalizers, of a type other than
// Opaque: its snapshot copies none of them (requireSnapshot: Opaque, the
// source type in an annotation, no owners, no finalizers); the update and
// a restore keep the live Secret's owners, finalizers and type.
func TestIntegrationVersionedSourceMetadata(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("owned")
	s0 := e.sourceSecret("owned")

	requireOK(t, e.runCmd(updateCommand(e.ns, "owned", s0.ResourceVersion, "mut-o1", map[string][]byte{"k": vCanary("owned-1")}), as), "completed")
	snap := e.requireSnapshot(s0, 1, "mut-o1")
	require.Equal(t, "example.com/custom", snap.Annotations["keyledger.dev/source-type"])
	s1 := e.getSecret("owned")
	require.Equal(t, s0.Type, s1.Type, "the type is retained")
	require.Equal(t, s0.OwnerReferences, s1.OwnerReferences)
	require.Equal(t, s0.Finalizers, s1.Finalizers)

	out := requireOK(t, e.runCmd(restoreCommand(e.ns, "owned", s1.ResourceVersion, "mut-o2", 1), as), "completed")
	require.EqualValues(t, 1, out["restoredVersion"])
	s2 := e.getSecret("owned")
	require.Equal(t, s0.Data, s2.Data, "version 1's bytes")
	require.Equal(t, s0.Type, s2.Type, "the restore keeps the live type")
	require.Equal(t, s0.OwnerReferences, s2.OwnerReferences, "and the live owners")
	require.Equal(t, s0.Finalizers, s2.Finalizers, "and the live finalizers")
	e.requireSnapshot(s1, 2, "mut-o2")
}

// A Secret being deleted (a finalizer holds it) cannot be restored: the
// restore is refused (terminating), the refusal journaled, nothing archived
// or written.
func TestIntegrationVersionedRestoreBeingDeleted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("going")
	s0 := e.sourceSecret("going")
	requireOK(t, e.runCmd(updateCommand(e.ns, "going", s0.ResourceVersion, "mut-g1", map[string][]byte{"k": vCanary("going-1")}), as), "completed")
	require.NoError(t, e.kube.Client().CoreV1().Secrets(e.ns).Delete(t.Context(), "going", metav1.DeleteOptions{}))
	going := e.getSecret("going")
	require.NotNil(t, going.DeletionTimestamp)
	before := e.objectsOf(s0.UID)

	r := e.runCmd(restoreCommand(e.ns, "going", going.ResourceVersion, "mut-g2", 1), as)
	requireRefused(t, r, "terminating")
	require.Equal(t, going.ResourceVersion, e.getSecret("going").ResourceVersion, "nothing written")
	require.Equal(t, before, e.objectsOf(s0.UID), "nothing archived")
	op, records := e.journalOf("mut-g2")
	require.Equal(t, store.StateRefused, op.State)
	require.Zero(t, count(records, store.RecordAuthorityCall), "no call sent")
	assertNoCanary(t, r.Stdout+r.Stderr, vCanary("going-0"), vCanary("going-1"))
}
