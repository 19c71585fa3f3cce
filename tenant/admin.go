package tenant

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"

	"github.com/keyledger/keyledger/store"
)

// Journal is what the steps ask of the journal, as its schema owner.
type Journal interface {
	Grant(ctx context.Context, role string, namespaces ...string) ([]store.GrantChange, error)
	Revoke(ctx context.Context, role string, namespaces ...string) ([]store.GrantChange, error)
	Grants(ctx context.Context) ([]store.NamespaceGrant, error)
	RoleExists(ctx context.Context, role string) (bool, error)
}

// GrantKind is the Kind of a Change to the journal grant of a namespace's
// role (store.Grant, store.Revoke).
const GrantKind = "JournalGrant"

// Admin onboards, rotates and offboards namespaces: a platform
// administrator's API access (Dynamic) and the schema owner's journal.
type Admin struct {
	Dynamic dynamic.Interface
	Journal Journal
	// Wait bounds each wait for CloudNativePG; Poll is how often it reads
	// (1 s when 0).
	Wait, Poll time.Duration
	// DryRun reads everything and writes nothing: each Change says what a
	// run would do. Waits are skipped.
	DryRun bool
	// Password makes a new password (NewPassword when nil).
	Password func() []byte
}

// step is one named step of a command; it reports the objects it touched.
type step struct {
	name string
	run  func(ctx context.Context, a *Admin, n Names) ([]Change, error)
}

// run runs steps in order and returns every Change so far, also on error.
func (a *Admin) run(ctx context.Context, ns string, steps []step) ([]Change, error) {
	n, err := For(ns)
	if err != nil {
		return nil, err
	}
	var all []Change
	for _, s := range steps {
		changes, err := s.run(ctx, a, n)
		all = append(all, changes...)
		if err != nil {
			return all, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return all, nil
}

// Onboard makes ns a tenant of the journal, or repairs what differs:
// the role's password Secret in the journal's namespace (create-once), the
// Cluster's managed role, CloudNativePG applying it, the grant, the CA's
// certificate, the credentials fence, and last the login Secret the Jobs
// read (until it exists, a Job of ns does not start its container).
func (a *Admin) Onboard(ctx context.Context, ns string) ([]Change, error) {
	return a.run(ctx, ns, []step{
		{"check-namespace", checkNamespace},
		{"check-journal", checkJournal},
		{"role-secret", one(func(ctx context.Context, a *Admin, n Names) (Change, error) {
			return ensureLogin(ctx, a, JournalNamespace, n.RoleSecret, n.Role, map[string]string{reloadLabel: "true"},
				func(live []byte) []byte { return keepOr(live, a.newPassword) })
		})},
		{"managed-role", one(func(ctx context.Context, a *Admin, n Names) (Change, error) { return ensureRole(ctx, a, n, true) })},
		{"wait-role-applied", none(waitApplied)},
		{"grant", one(grant)},
		{"ca", one(ensureCA)},
		{"fence", one(ensureFence)},
		{"credentials", one(copyLogin(false))},
	})
}

// Rotate gives ns's role a new password: into the journal-side Secret,
// then, once CloudNativePG reports it applied, into the Jobs' copy (the
// order that makes the window in which a starting Job fails the
// shortest: docs/tenancy.md).
func (a *Admin) Rotate(ctx context.Context, ns string) ([]Change, error) {
	return a.run(ctx, ns, []step{
		{"check-onboarded", checkOnboarded},
		{"role-secret", one(func(ctx context.Context, a *Admin, n Names) (Change, error) {
			return ensureLogin(ctx, a, JournalNamespace, n.RoleSecret, n.Role, map[string]string{reloadLabel: "true"},
				func([]byte) []byte { return a.newPassword() })
		})},
		{"wait-role-applied", none(waitApplied)},
		{"credentials", one(copyLogin(true))},
	})
}

// Offboard takes ns from the journal: revokes the grant (a running Job of
// ns is refused from its next statement), has CloudNativePG drop the role
// (ensure: absent) and waits until it is gone, then deletes the Jobs'
// login, the role's password Secret, the CA ConfigMap and the fence.
func (a *Admin) Offboard(ctx context.Context, ns string) ([]Change, error) {
	return a.run(ctx, ns, []step{
		{"check-journal", checkJournal},
		{"revoke", one(revoke)},
		{"managed-role", one(func(ctx context.Context, a *Admin, n Names) (Change, error) { return ensureRole(ctx, a, n, false) })},
		{"wait-role-dropped", none(waitDropped)},
		{"credentials", one(func(ctx context.Context, a *Admin, n Names) (Change, error) {
			return remove(ctx, a, secretKind, n.Namespace, CredentialsSecret)
		})},
		{"role-secret", one(func(ctx context.Context, a *Admin, n Names) (Change, error) {
			return remove(ctx, a, secretKind, JournalNamespace, n.RoleSecret)
		})},
		{"ca", one(func(ctx context.Context, a *Admin, n Names) (Change, error) {
			return remove(ctx, a, configMapKind, n.Namespace, CAConfigMap)
		})},
		{"fence", one(func(ctx context.Context, a *Admin, n Names) (Change, error) {
			return remove(ctx, a, policyKind, n.Namespace, FencePolicy)
		})},
	})
}

func one(f func(context.Context, *Admin, Names) (Change, error)) func(context.Context, *Admin, Names) ([]Change, error) {
	return func(ctx context.Context, a *Admin, n Names) ([]Change, error) {
		c, err := f(ctx, a, n)
		if err != nil {
			return nil, err
		}
		return []Change{c}, nil
	}
}

func none(f func(context.Context, *Admin, Names) error) func(context.Context, *Admin, Names) ([]Change, error) {
	return func(ctx context.Context, a *Admin, n Names) ([]Change, error) { return nil, f(ctx, a, n) }
}

func (a *Admin) newPassword() []byte {
	if a.Password != nil {
		return a.Password()
	}
	return NewPassword()
}

func keepOr(live []byte, fresh func() []byte) []byte {
	if len(live) > 0 {
		return live
	}
	return fresh()
}

func checkNamespace(ctx context.Context, a *Admin, n Names) ([]Change, error) {
	_, found, err := get[corev1.Namespace](ctx, a, namespaceKind, "", n.Namespace)
	if err == nil && !found {
		err = refuse(ReasonNamespaceMissing, "create the namespace first (kubectl create namespace "+n.Namespace+"), or name an existing one",
			"namespace %q does not exist", n.Namespace)
	}
	return nil, err
}

func checkJournal(ctx context.Context, a *Admin, _ Names) ([]Change, error) {
	_, err := readCluster(ctx, a)
	return nil, err
}

func checkOnboarded(ctx context.Context, a *Admin, n Names) ([]Change, error) {
	for _, s := range []struct{ ns, name string }{{JournalNamespace, n.RoleSecret}, {n.Namespace, CredentialsSecret}} {
		_, found, err := get[corev1.Secret](ctx, a, secretKind, s.ns, s.name)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, refuse(ReasonNotOnboarded, "onboard it first: keyledger journal onboard "+n.Namespace,
				"namespace %q is not onboarded: Secret %s/%s does not exist", n.Namespace, s.ns, s.name)
		}
	}
	return nil, nil
}

// copyLogin makes the Jobs' login in ns hold the journal-side password,
// read in-process from the Secret CloudNativePG applies. A dry run of a
// first onboarding or of a rotation has no value to compare: it reports
// the copy as one to write.
func copyLogin(rotating bool) func(context.Context, *Admin, Names) (Change, error) {
	return func(ctx context.Context, a *Admin, n Names) (Change, error) {
		src, err := roleSecretPassword(ctx, a, n)
		if err != nil {
			return Change{}, err
		}
		if len(src) == 0 && !a.DryRun {
			return Change{}, changedUnder(secretKind, JournalNamespace, n.RoleSecret)
		}
		if a.DryRun && (rotating || len(src) == 0) {
			src = nil // matches no live password
		}
		return ensureLogin(ctx, a, n.Namespace, CredentialsSecret, n.Role, nil, func([]byte) []byte { return src })
	}
}

// grant grants n's namespace to its role (a dry run reads the grants).
func grant(ctx context.Context, a *Admin, n Names) (Change, error) {
	c := Change{Kind: GrantKind, Namespace: n.Namespace, Name: n.Role, DryRun: a.DryRun, Action: Unchanged}
	if a.DryRun {
		ok, err := granted(ctx, a, n)
		if !ok {
			c.Action = Created
		}
		return c, err
	}
	changes, err := a.Journal.Grant(ctx, n.Role, n.Namespace)
	if err == nil && len(changes) == 1 && changes[0].Changed {
		c.Action = Created
	}
	return c, err
}

// revoke takes n's namespace from its role (a dry run reads the grants).
func revoke(ctx context.Context, a *Admin, n Names) (Change, error) {
	c := Change{Kind: GrantKind, Namespace: n.Namespace, Name: n.Role, DryRun: a.DryRun, Action: Absent}
	if a.DryRun {
		ok, err := granted(ctx, a, n)
		if ok {
			c.Action = Deleted
		}
		return c, err
	}
	changes, err := a.Journal.Revoke(ctx, n.Role, n.Namespace)
	if err == nil && len(changes) == 1 && changes[0].Changed {
		c.Action = Deleted
	}
	return c, err
}

func granted(ctx context.Context, a *Admin, n Names) (bool, error) {
	grants, err := a.Journal.Grants(ctx)
	return slices.ContainsFunc(grants, func(g store.NamespaceGrant) bool {
		return g.Role == n.Role && g.Namespace == n.Namespace
	}), err
}
