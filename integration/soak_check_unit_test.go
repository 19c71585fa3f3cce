package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/workflow/retire/keyring"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// soakHistory builds a history the soak's checks accept: one retirement,
// one plan of one Secret, one versioned write, as etcd would record them.
type soakHistory struct {
	events []secretEvent
	rev    int64
}

func (h *soakHistory) write(created bool, s *corev1.Secret) {
	h.rev++
	h.events = append(h.events, secretEvent{Rev: h.rev, Name: s.Name, Created: created, Secret: s})
}

func validSoakHistory() (*soakHistory, []soakExpectation) {
	h := &soakHistory{}
	before := suite.StandardKeyring()
	h.write(true, suite.KeyringSecret("kr-0", before))
	after := before.Clone()
	after.Keys = after.Keys[:1:1]
	after.Keys = append(after.Keys, before.Keys[2])
	after.Retirements = append(after.Retirements, keyring.Retirement{KeyID: "k-2026-07", MutationID: "soak-ret-0", RetirementID: "ret-soak-ret-0",
		RequestID: "req-soak-ret-0", MaterialDigest: keyring.MaterialDigest([]byte("k-2026-07")), Generation: before.Generation + 1, RetiredAt: "2026-12-03T00:00:00Z"})
	after.Generation++
	h.write(false, suite.KeyringSecret("kr-0", after))
	h.write(true, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cred-1-a"}, Data: map[string][]byte{"password": []byte(strings.Repeat("a", 32))}})
	vBefore := map[string][]byte{"password": suite.VCanary("before")}
	vAfter := map[string][]byte{"password": suite.VCanary("after")}
	live := suite.PlainSecret("vw-2", vBefore)
	live.UID = types.UID("uid-vw-2")
	h.write(true, live)
	h.write(true, snapshotOf(live, 1))
	updated := live.DeepCopy()
	updated.Data = vAfter
	h.write(false, updated)
	return h, []soakExpectation{
		{Family: familyRetirement, Mutation: "soak-ret-0", Names: []string{"kr-0"}, KeyID: "k-2026-07"},
		{Family: familyCredentials, Mutation: "soak-cred-1", Names: []string{"cred-1-a"}},
		{Family: familyVersioned, Mutation: "soak-vw-2", Names: []string{"vw-2"}, Before: vBefore, After: vAfter},
	}
}

func snapshotOf(live *corev1.Secret, n int64) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name:        versioned.SnapshotName(live.UID, n),
		Annotations: map[string]string{versioned.AnnotationSourceUID: string(live.UID)},
	}, Data: live.Data}
}

// The soak's history check passes a history with each effect once, and
// reports each planted extra write by the Secret's name: it is not
// vacuous. (The soak itself also plants a real write through the API
// server and requires this check to report it.)
func TestSoakHistoryCheckReportsPlantedWrites(t *testing.T) {
	h, exps := validSoakHistory()
	require.Empty(t, checkHistory(h.events, exps), "the valid history")

	changed := func(name string, f func(*corev1.Secret)) func(*soakHistory) {
		return func(h *soakHistory) {
			for i := len(h.events) - 1; i >= 0; i-- {
				if h.events[i].Name == name {
					s := h.events[i].Secret.DeepCopy()
					f(s)
					h.write(false, s)
					return
				}
			}
		}
	}
	cases := map[string]struct {
		plant func(*soakHistory)
		want  string
	}{
		"a generated value changed": {changed("cred-1-a", func(s *corev1.Secret) { s.Data["password"] = []byte(strings.Repeat("b", 32)) }),
			"Secret cred-1-a written [create@3 update@7]"},
		"a plan's Secret rewritten unchanged": {changed("cred-1-a", func(*corev1.Secret) {}), "Secret cred-1-a written"},
		"a retirement applied twice":          {changed("kr-0", func(*corev1.Secret) {}), "keyring kr-0 written [create@1 update@2 update@7]"},
		"a versioned write applied twice":     {changed("vw-2", func(*corev1.Secret) {}), "live Secret vw-2 written"},
		"the replaced state archived twice": {func(h *soakHistory) { h.write(true, snapshotOf(h.events[3].Secret, 2)) },
			"2 snapshots of vw-2"},
		"a snapshot rewritten": {changed(versioned.SnapshotName("uid-vw-2", 1), func(*corev1.Secret) {}), "snapshot"},
		"a Secret nobody owns": {func(h *soakHistory) { h.write(true, suite.PlainSecret("stray", nil)) }, "Secret stray: 1 writes no operation"},
		"a plan's Secret deleted": {func(h *soakHistory) {
			h.rev++
			h.events = append(h.events, secretEvent{Rev: h.rev, Name: "cred-1-a", Deleted: true})
		}, "Secret cred-1-a written [create@3 delete@7]"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h, exps := validSoakHistory()
			c.plant(h)
			got := checkHistory(h.events, exps)
			require.NotEmpty(t, got)
			require.Contains(t, fmt.Sprint(got), c.want)
		})
	}
}
