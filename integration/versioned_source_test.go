package integration

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
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
	as := e.AsWriter(names...)
	withCounter := func(name, counter string) *corev1.Secret {
		s := suite.PlainSecret(name, map[string][]byte{"k": suite.VCanary("0")})
		s.Annotations = map[string]string{versioned.AnnotationVersion: counter}
		return e.CreateSecret(s)
	}

	zero := withCounter("zero", "0")
	out := suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, "zero", zero.ResourceVersion, "mut-zero", map[string][]byte{"k": suite.VCanary("1")}), as), "completed")
	require.EqualValues(t, 2, out["version"])
	require.Equal(t, "2", e.GetSecret("zero").Annotations[versioned.AnnotationVersion])
	e.RequireSnapshot(zero, 1, "mut-zero")

	for _, tc := range []struct{ name, counter, reason string }{
		{"leading-zero", "01", "version-malformed"},
		{"text", "two", "version-malformed"},
		{"negative", "-1", "version-malformed"},
		{"exhausted", fmt.Sprint(versioned.MaxVersion), "version-exhausted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := withCounter(tc.name, tc.counter)
			mutation := "mut-" + tc.name
			r := e.RunCmd(suite.UpdateCommand(e.NS, tc.name, s.ResourceVersion, mutation, map[string][]byte{"k": suite.VCanary("1")}), as)
			suite.RequireRefused(t, r, tc.reason)
			require.Equal(t, s.ResourceVersion, e.GetSecret(tc.name).ResourceVersion, "nothing written")
			require.Empty(t, e.SnapshotsOf(s.UID), "nothing archived")
			op, records := e.JournalOf(mutation)
			require.Equal(t, store.StateRefused, op.State)
			require.Equal(t, tc.reason, op.Reason)
			require.Zero(t, suite.Count(records, store.RecordAuthorityCall), "no call sent")
		})
	}
}

// sourceSecret is a live Secret of a type other than Opaque, owned by a
// ConfigMap of the namespace and held by a finalizer (removed at cleanup).
func sourceSecret(e *env, name string) *corev1.Secret {
	e.T.Helper()
	owner, err := e.Kube.Client().CoreV1().ConfigMaps(e.NS).Create(e.T.Context(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-owner"}}, metav1.CreateOptions{})
	require.NoError(e.T, err)
	s := suite.PlainSecret(name, map[string][]byte{"k": suite.VCanary(name + "-0")})
	s.Type = "example.com/custom"
	s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
	s.Finalizers = []string{"keyledger.test/hold"}
	created := e.CreateSecret(s)
	e.T.Cleanup(func() { e.RemoveFinalizers(name) })
	return created
}

// A source carrying owner references and finalizers, of a type other than
// Opaque: its snapshot copies none of them (RequireSnapshot: Opaque, the
// source type in an annotation, no owners, no finalizers); the update and
// a restore keep the live Secret's owners, finalizers and type.
func TestIntegrationVersionedSourceMetadata(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("owned")
	s0 := sourceSecret(e, "owned")

	suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, "owned", s0.ResourceVersion, "mut-o1", map[string][]byte{"k": suite.VCanary("owned-1")}), as), "completed")
	snap := e.RequireSnapshot(s0, 1, "mut-o1")
	require.Equal(t, "example.com/custom", snap.Annotations["keyledger.dev/source-type"])
	s1 := e.GetSecret("owned")
	require.Equal(t, s0.Type, s1.Type, "the type is retained")
	require.Equal(t, s0.OwnerReferences, s1.OwnerReferences)
	require.Equal(t, s0.Finalizers, s1.Finalizers)

	out := suite.RequireOK(t, e.RunCmd(suite.RestoreCommand(e.NS, "owned", s1.ResourceVersion, "mut-o2", 1), as), "completed")
	require.EqualValues(t, 1, out["restoredVersion"])
	s2 := e.GetSecret("owned")
	require.Equal(t, s0.Data, s2.Data, "version 1's bytes")
	require.Equal(t, s0.Type, s2.Type, "the restore keeps the live type")
	require.Equal(t, s0.OwnerReferences, s2.OwnerReferences, "and the live owners")
	require.Equal(t, s0.Finalizers, s2.Finalizers, "and the live finalizers")
	e.RequireSnapshot(s1, 2, "mut-o2")
}

// A Secret being deleted (a finalizer holds it) cannot be restored: the
// restore is refused (terminating), the refusal journaled, nothing archived
// or written.
func TestIntegrationVersionedRestoreBeingDeleted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("going")
	s0 := sourceSecret(e, "going")
	suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, "going", s0.ResourceVersion, "mut-g1", map[string][]byte{"k": suite.VCanary("going-1")}), as), "completed")
	require.NoError(t, e.Kube.Client().CoreV1().Secrets(e.NS).Delete(t.Context(), "going", metav1.DeleteOptions{}))
	going := e.GetSecret("going")
	require.NotNil(t, going.DeletionTimestamp)
	before := e.ObjectsOf(s0.UID)

	r := e.RunCmd(suite.RestoreCommand(e.NS, "going", going.ResourceVersion, "mut-g2", 1), as)
	suite.RequireRefused(t, r, "terminating")
	require.Equal(t, going.ResourceVersion, e.GetSecret("going").ResourceVersion, "nothing written")
	require.Equal(t, before, e.ObjectsOf(s0.UID), "nothing archived")
	op, records := e.JournalOf("mut-g2")
	require.Equal(t, store.StateRefused, op.State)
	require.Zero(t, suite.Count(records, store.RecordAuthorityCall), "no call sent")
	suite.AssertNoCanary(t, r.Stdout+r.Stderr, suite.VCanary("going-0"), suite.VCanary("going-1"))
}
