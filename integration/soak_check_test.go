package integration

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/workflow/retire/keyring"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// The soak's checks of the independent record: what etcd holds about each
// operation's Secrets, never what keyledger printed.

// soakFamily names an operation family of the soak.
type soakFamily string

const (
	familyRetirement  soakFamily = "retirement"
	familyCredentials soakFamily = "credentials"
	familyVersioned   soakFamily = "versioned"
)

// soakExpectation is what one operation must leave in etcd's history.
type soakExpectation struct {
	Family   soakFamily
	Mutation string
	// Names are the Secrets the operation owns: the keyring (retirement),
	// the planned Secrets (credentials) or the live Secret (versioned).
	Names []string
	// KeyID is the retired key (retirement).
	KeyID string
	// Before and After are the live Secret's data before and after the
	// write (versioned).
	Before, After map[string][]byte
}

// checkHistory returns every way events break the expectations: a
// retirement applied other than once or without its receipt, a generated
// credential written other than once (or changed after), a versioned write
// that did not archive exactly the replaced state once, and any write to a
// Secret no operation owns (the marker excepted).
func checkHistory(events []secretEvent, exps []soakExpectation) []string {
	byName := map[string][]secretEvent{}
	for _, ev := range events {
		byName[ev.Name] = append(byName[ev.Name], ev)
	}
	claimed := map[string]bool{}
	var out []string
	for _, x := range exps {
		for _, n := range x.Names {
			claimed[n] = true
		}
		switch x.Family {
		case familyRetirement:
			out = append(out, checkRetirement(x, byName[x.Names[0]])...)
		case familyCredentials:
			for _, n := range x.Names {
				out = append(out, checkCredential(x, n, byName[n])...)
			}
		case familyVersioned:
			snaps, problems := checkVersioned(x, byName)
			for _, n := range snaps {
				claimed[n] = true
			}
			out = append(out, problems...)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		if !claimed[n] {
			out = append(out, fmt.Sprintf("Secret %s: %d writes no operation of the soak owns", n, len(byName[n])))
		}
	}
	return out
}

// writes describes a Secret's events for a report (kinds and revisions).
func writes(evs []secretEvent) string {
	parts := make([]string, len(evs))
	for i, ev := range evs {
		kind := "update"
		if ev.Created {
			kind = "create"
		} else if ev.Deleted {
			kind = "delete"
		}
		parts[i] = fmt.Sprintf("%s@%d", kind, ev.Rev)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// checkRetirement: the test's create, then exactly one update, which holds
// the keyring without the key and with this mutation's receipt.
func checkRetirement(x soakExpectation, evs []secretEvent) []string {
	name := x.Names[0]
	if len(evs) != 2 || !evs[0].Created || evs[1].Created || evs[1].Deleted {
		return []string{fmt.Sprintf("retirement %s: keyring %s written %s, want the test's create and one update", x.Mutation, name, writes(evs))}
	}
	m, err := keyring.Parse(evs[1].Secret.Data[suite.DataKey])
	if err != nil {
		return []string{fmt.Sprintf("retirement %s: keyring %s unreadable after its update: %v", x.Mutation, name, err)}
	}
	var out []string
	if _, present := m.Key(x.KeyID); present {
		out = append(out, fmt.Sprintf("retirement %s: key %s still in %s", x.Mutation, x.KeyID, name))
	}
	if r, ok := m.Receipt(x.KeyID); !ok || r.MutationID != x.Mutation {
		out = append(out, fmt.Sprintf("retirement %s: no receipt of it in %s", x.Mutation, name))
	}
	return out
}

// checkCredential: one create and nothing after it, holding a generated
// password (so the value written is the value that stays).
func checkCredential(x soakExpectation, name string, evs []secretEvent) []string {
	if len(evs) != 1 || !evs[0].Created {
		return []string{fmt.Sprintf("plan %s: Secret %s written %s, want one create and no change", x.Mutation, name, writes(evs))}
	}
	if n := len(evs[0].Secret.Data["password"]); n != 32 {
		return []string{fmt.Sprintf("plan %s: Secret %s created with a %d-byte password, want 32", x.Mutation, name, n)}
	}
	return nil
}

// checkVersioned: the test's create and exactly one update to the live
// Secret, holding After; exactly one snapshot of it, created once and never
// changed, holding Before. It returns the snapshots' names.
func checkVersioned(x soakExpectation, byName map[string][]secretEvent) ([]string, []string) {
	name := x.Names[0]
	evs := byName[name]
	if len(evs) == 0 || !evs[0].Created {
		return nil, []string{fmt.Sprintf("versioned %s: live Secret %s never created", x.Mutation, name)}
	}
	var out []string
	if len(evs) != 2 || evs[1].Created || evs[1].Deleted {
		out = append(out, fmt.Sprintf("versioned %s: live Secret %s written %s, want the test's create and one update", x.Mutation, name, writes(evs)))
	} else if !sameData(evs[1].Secret.Data, x.After) {
		out = append(out, fmt.Sprintf("versioned %s: live Secret %s does not hold the written data", x.Mutation, name))
	}
	uid := string(evs[0].Secret.UID)
	var snaps []string
	for n, sevs := range byName {
		if first := firstObject(sevs); first == nil || first.Annotations[versioned.AnnotationSourceUID] != uid {
			continue
		}
		snaps = append(snaps, n)
		if len(sevs) != 1 || !sevs[0].Created {
			out = append(out, fmt.Sprintf("versioned %s: snapshot %s written %s, want one create", x.Mutation, n, writes(sevs)))
		} else if !sameData(sevs[0].Secret.Data, x.Before) {
			out = append(out, fmt.Sprintf("versioned %s: snapshot %s does not hold the replaced state", x.Mutation, n))
		}
	}
	if len(snaps) != 1 {
		out = append(out, fmt.Sprintf("versioned %s: %d snapshots of %s, want 1", x.Mutation, len(snaps), name))
	}
	return snaps, out
}

func firstObject(evs []secretEvent) *corev1.Secret {
	for _, ev := range evs {
		if ev.Secret != nil {
			return ev.Secret
		}
	}
	return nil
}

func sameData(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, bytes.Equal)
}
