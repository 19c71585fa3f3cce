package versioned

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// More than MaxHistoryClaims Secrets claiming the live UID: a write is
// refused (history-too-large, naming the count) before anything is sent,
// at the cap it goes on (`history` is proven in integration).
func TestHistoryTooLargeFailsClosed(t *testing.T) {
	for _, extra := range []int{MaxHistoryClaims - 2, MaxHistoryClaims} {
		t.Run(fmt.Sprint(extra+1, "-claimants"), func(t *testing.T) {
			e := newEnv(t)
			live := e.history(1) // one genuine snapshot (v1): one claimant
			for i := range extra {
				s := &corev1.Secret{ObjectMeta: objectMeta(fmt.Sprintf("claims-%03d", i)), Type: corev1.SecretTypeOpaque}
				s.Annotations = map[string]string{AnnotationSourceUID: string(live.UID)}
				e.api.SeedSecret(s)
			}
			claimants := extra + 1
			o := e.run(e.update(e.rv(), "password", "v3"))
			if claimants+1 <= MaxHistoryClaims { // the write's own snapshot of v2 is one more
				require.Equal(t, "completed", o.Ending())
				require.NoError(t, o.err, "%d claimants before the write", claimants)
				return
			}
			require.Equal(t, "refused/"+ReasonHistoryTooLarge, o.Ending())
			require.Equal(t, live.ResourceVersion, e.live().ResourceVersion, "nothing written")
			ending := o.records[len(o.records)-1]
			require.Equal(t, store.Reason(ReasonHistoryTooLarge), ending.Reason)
			require.EqualValues(t, claimants, workflowtest.Fields(ending.Detail)["historyClaims"])
		})
	}
}

// A look-alike with more metadata than a snapshot can have is kept as a
// stub and sorted as its whole would be (foreign, not journaled), and a
// Secret that claims nothing is never kept, whatever its size.
func TestClaimantTrimsLargeMetadata(t *testing.T) {
	e := newEnv(t)
	live := e.history(2)
	big := lookalike(live, 7)
	big.Annotations["example.com/blob"] = strings.Repeat("x", 100<<10)
	e.api.SeedSecret(big)
	other := &corev1.Secret{ObjectMeta: objectMeta("unrelated"), Type: corev1.SecretTypeOpaque}
	other.Annotations = map[string]string{"example.com/blob": strings.Repeat("y", 100<<10)}
	e.api.SeedSecret(other)

	metas, err := e.api.ListClaims(context.Background(), claimant(live.UID), MaxHistoryClaims)
	require.NoError(t, err)
	var names []string
	for _, m := range metas {
		names = append(names, m.Name)
		require.LessOrEqual(t, metadataSize(&m.ObjectMeta), maxClaimMetadata, m.Name)
	}
	require.ElementsMatch(t, []string{SnapshotName(live.UID, 1), SnapshotName(live.UID, 2), big.Name}, names)

	f := &family{cmd: &Command{Namespace: testNamespace, Name: testName}, api: e.api, journal: e.j}
	p, err := f.provenance(context.Background(), nil, live.UID, listedNames(metas))
	require.NoError(t, err)
	inv := classify(metas, live, p)
	require.Len(t, inv.genuine, 2)
	require.Equal(t, []Foreign{{Name: big.Name, Version: 7, Reason: ForeignNotJournaled}}, inv.foreign)
}
