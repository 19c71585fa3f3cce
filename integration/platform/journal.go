package platform

import (
	"context"
	"fmt"
	"sync"

	"github.com/keyledger/keyledger/store"
)

// Journal is one migrated keyledger journal database.
type Journal struct {
	// Name is the database name.
	Name string
	// OwnerURL connects as the schema owner (migrations, grants).
	OwnerURL string
	// OperatorURL connects as the server's test role
	// (store.DefaultOperatorRole, one per server), granted this journal's
	// namespaces: the rights a run has, confined to those namespaces by
	// row-level security. Grants are per database, so one role serves
	// every test's journal with that test's namespaces only.
	OperatorURL string
}

var operatorPasswords sync.Map // *Postgres -> string

// operatorPassword creates store.DefaultOperatorRole once per server, with a
// random password, as the deployment would declare it.
func (p *Postgres) operatorPassword(ctx context.Context) (string, error) {
	if pw, ok := operatorPasswords.Load(p); ok {
		return pw.(string), nil
	}
	pw, err := randomHex(16)
	if err != nil {
		return "", err
	}
	actual, loaded := operatorPasswords.LoadOrStore(p, pw)
	if loaded {
		return actual.(string), nil
	}
	if err := p.EnsureRole(ctx, store.DefaultOperatorRole, pw); err != nil {
		operatorPasswords.Delete(p)
		return "", err
	}
	return pw, nil
}

// NewJournal creates a database called name, migrates it up as the owner,
// grants the server's test role the given namespaces in it (as `keyledger
// journal grant` does, through store.Grant) and returns URLs for the owner
// and for that role.
func (p *Postgres) NewJournal(ctx context.Context, name string, namespaces ...string) (*Journal, error) {
	pw, err := p.operatorPassword(ctx)
	if err != nil {
		return nil, fmt.Errorf("creating operator role: %w", err)
	}
	owner, err := p.CreateDatabase(ctx, name)
	if err != nil {
		return nil, err
	}
	if _, err := store.Migrate(ctx, owner, store.MigrateUp, ""); err != nil {
		return nil, fmt.Errorf("migrating journal %s: %w", name, err)
	}
	if len(namespaces) > 0 {
		if err := Grant(ctx, owner, store.DefaultOperatorRole, namespaces...); err != nil {
			return nil, fmt.Errorf("journal %s: %w", name, err)
		}
	}
	operator, err := p.URLFor(owner, store.DefaultOperatorRole, pw)
	if err != nil {
		return nil, err
	}
	return &Journal{Name: name, OwnerURL: owner, OperatorURL: operator}, nil
}

// Grant grants role the namespaces in the journal at ownerURL, as its owner.
func Grant(ctx context.Context, ownerURL, role string, namespaces ...string) error {
	st, err := store.Open(ctx, ownerURL)
	if err != nil {
		return fmt.Errorf("opening the journal as its owner: %w", err)
	}
	defer st.Close()
	if _, err := st.Grant(ctx, role, namespaces...); err != nil {
		return fmt.Errorf("granting %s the namespaces %v: %w", role, namespaces, err)
	}
	return nil
}
