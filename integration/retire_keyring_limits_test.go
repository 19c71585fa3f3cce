package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/retire/keyring"
	"github.com/keyledger/keyledger/workflow/retire/keyring/keyringtest"
)

// manyKeys is a keyring of n keys (k-00 ... active is the last).
func manyKeys(n int) *keyring.Manifest {
	var opts []keyringtest.Option
	for i := range n {
		id := fmt.Sprintf("k-%02d", i)
		opts = append(opts, keyringtest.WithKey(id, "2026-01-01T00:00:00Z", keyringtest.Material(id)))
	}
	opts = append(opts, keyringtest.WithActive(fmt.Sprintf("k-%02d", n-1)), keyringtest.WithGeneration(1))
	return keyringtest.New(opts...)
}

// manyReceipts is StandardKeyring with n receipts of keys retired before.
func manyReceipts(n int) *keyring.Manifest {
	m := suite.StandardKeyring()
	for i := range n {
		m.Retirements = append(m.Retirements, keyringtest.Receipt(fmt.Sprintf("old-%02d", i), int64(i+1), "2026-01-01T00:00:00Z"))
	}
	m.Generation = int64(n + 1)
	return m
}

// ADR-0262's limits and Secret checks on the real API server: a keyring
// Secret of another type, one being deleted, more than 16 keys, more than
// 64 receipts, and a whole Secret over 256 KiB (its manifest small, its
// annotations large) are each refused (exit 2, the reason journaled), with
// no call sent and nothing written.
func TestIntegrationRetireKeyringLimits(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cases := []struct {
		name     string
		manifest *keyring.Manifest
		secret   suite.SecretOption
		keyID    string
		reason   string
		deleting bool
	}{
		{name: "other-type", keyID: "k-2026-07", reason: "wrong-type", secret: func(s *corev1.Secret) {
			s.Type = "example.com/keyring"
		}},
		{name: "being-deleted", keyID: "k-2026-07", reason: "terminating", deleting: true},
		{name: "seventeen-keys", manifest: manyKeys(keyring.MaxKeys + 1), keyID: "k-00", reason: "too-many-keys"},
		{name: "sixty-five-receipts", manifest: manyReceipts(keyring.MaxRetirements + 1), keyID: "k-2026-07", reason: "too-many-retirements"},
		{name: "whole-secret-over-256k", keyID: "k-2026-07", reason: "too-large", secret: func(s *corev1.Secret) {
			// 64 bytes short of the API server's 256 KiB of annotations,
			// and a manifest of a few hundred bytes: only the whole Secret
			// is over keyledger's bound.
			const pad = "example.com/pad"
			n := keyring.MaxSecretBytes - 64 - len(pad)
			for k, v := range s.Annotations {
				n -= len(k) + len(v)
			}
			s.Annotations[pad] = strings.Repeat("p", n)
			require.Greater(t, len(s.Data[suite.DataKey]), 64, "the whole Secret is over the bound")
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.manifest
			if m == nil {
				m = suite.StandardKeyring()
			}
			var opts []suite.SecretOption
			if tc.secret != nil {
				opts = append(opts, tc.secret)
			}
			s := e.CreateSecret(suite.KeyringSecret(fmt.Sprintf("limit-%d", i), m, opts...))
			if tc.deleting {
				e.AddFinalizer(s.Name)
				require.NoError(t, e.Kube.Client().CoreV1().Secrets(e.NS).Delete(t.Context(), s.Name, metav1.DeleteOptions{}))
				s = e.GetSecret(s.Name)
				require.NotNil(t, s.DeletionTimestamp)
			}
			mutation := "mut-limit-" + tc.name
			path := e.WriteCommand(mutation+".json", suite.RetireCommand(s, tc.keyID, mutation))
			r := e.Keyledger([]string{"run", path}, e.AsRetirerOf(s))
			require.Equal(t, 2, r.Code, "%s %s", r.Stdout, r.Stderr)
			require.Equal(t, tc.reason, suite.Outcome(t, r)["reason"])
			require.Equal(t, s.ResourceVersion, e.GetSecret(s.Name).ResourceVersion, "nothing written")
			op, records := e.JournalOf(mutation)
			require.Equal(t, store.StateRefused, op.State)
			require.Equal(t, tc.reason, op.Reason, "the journal says why")
			require.Zero(t, suite.Count(records, store.RecordAuthorityCall), "no call sent")
			keyringtest.AssertNoMaterial(t, r.Stdout+r.Stderr, suite.AllMaterial()...)
		})
	}
}

// A retirement identity granted one right more than get and update on its
// Secret (watch, create or delete on it, get on ConfigMaps or on Pods)
// stops before PostgreSQL is opened: exit 77, no connection, nothing
// written.
func TestIntegrationRetireIdentityTooWide(t *testing.T) {
	t.Parallel()
	e := setup(t)
	withVerb := func(verb string) func(string) []rbacv1.PolicyRule {
		return func(n string) []rbacv1.PolicyRule {
			r := suite.RetirementRules(n)
			r[0].Verbs = append(r[0].Verbs, verb)
			return r
		}
	}
	withGet := func(resource string) func(string) []rbacv1.PolicyRule {
		return func(n string) []rbacv1.PolicyRule {
			return append(suite.RetirementRules(n), rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{resource}, Verbs: []string{"get"}})
		}
	}
	cases := []struct {
		name  string
		rules func(string) []rbacv1.PolicyRule
	}{
		{"watch", withVerb("watch")},
		{"create", withVerb("create")},
		{"delete", withVerb("delete")},
		{"get-configmaps", withGet("configmaps")},
		{"get-pods", withGet("pods")},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := e.CreateSecret(suite.KeyringSecret(fmt.Sprintf("wide-%d", i), suite.StandardKeyring()))
			kubeconfig := e.ServiceAccountKubeconfig(fmt.Sprintf("wide-%d", i), tc.rules(s.Name))
			mutation := "mut-wide-" + tc.name
			path := e.WriteCommand(mutation+".json", suite.RetireCommand(s, "k-2026-07", mutation))
			url, connections := suite.PGListener(t)
			r := e.Keyledger([]string{"run", path}, suite.AsKubeconfig(kubeconfig), suite.WithDatabase(url))
			require.Equal(t, 77, r.Code, "%s %s", r.Stdout, r.Stderr)
			require.Equal(t, "permission-mismatch", suite.Outcome(t, r)["reason"])
			require.Zero(t, connections.Load(), "PostgreSQL is never contacted")
			require.Equal(t, s.ResourceVersion, e.GetSecret(s.Name).ResourceVersion, "nothing written")
			keyringtest.AssertNoMaterial(t, r.Stdout+r.Stderr, suite.AllMaterial()...)
		})
	}
}
