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
	// OwnerURL connects as the schema owner (migrations).
	OwnerURL string
	// OperatorURL connects as the operator role, the only rights a run has.
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

// NewJournal creates a database called name, migrates it up as the owner
// and returns URLs for the owner and for the operator role.
func (p *Postgres) NewJournal(ctx context.Context, name string) (*Journal, error) {
	pw, err := p.operatorPassword(ctx)
	if err != nil {
		return nil, fmt.Errorf("creating operator role: %w", err)
	}
	owner, err := p.CreateDatabase(ctx, name)
	if err != nil {
		return nil, err
	}
	if _, err := store.Migrate(ctx, owner, store.MigrateUp, store.DefaultOperatorRole); err != nil {
		return nil, fmt.Errorf("migrating journal %s: %w", name, err)
	}
	operator, err := p.URLFor(owner, store.DefaultOperatorRole, pw)
	if err != nil {
		return nil, err
	}
	return &Journal{Name: name, OwnerURL: owner, OperatorURL: operator}, nil
}
