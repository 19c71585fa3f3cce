package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// GrantAction is what a change of the namespace grants did.
type GrantAction string

const (
	// GrantActionGrant: the role may act on the namespace from now on.
	GrantActionGrant GrantAction = "grant"
	// GrantActionRevoke: the role may no longer act on the namespace.
	GrantActionRevoke GrantAction = "revoke"
)

// Reasons of the PreconditionErrors of Grant, Revoke and GrantHistory.
const (
	// ReasonInvalidRole: the role name is not a lower-case PostgreSQL
	// identifier keyledger accepts (exit 64).
	ReasonInvalidRole = "invalid-role"
	// ReasonInvalidNamespace: a namespace is not a DNS-1123 label (exit 64).
	ReasonInvalidNamespace = "invalid-namespace"
	// ReasonRoleMissing: no role of that name exists on the server (exit 64).
	ReasonRoleMissing = "role-missing"
	// ReasonRoleIsSuperuser: a superuser skips row-level security (exit 77).
	ReasonRoleIsSuperuser = "role-is-superuser"
	// ReasonRoleBypassesRLS: a BYPASSRLS role skips row-level security (exit 77).
	ReasonRoleBypassesRLS = "role-bypasses-rls" //nolint:gosec // G101: a reason word, not a credential
	// ReasonRoleIsSchemaOwner: the journal's owner, or a role holding its
	// privileges, sees every namespace by design (exit 77).
	ReasonRoleIsSchemaOwner = "role-is-schema-owner"
	// ReasonRoleCreatesRoles: a CREATEROLE role may grant itself the
	// owner's membership (before PostgreSQL 16) (exit 77).
	ReasonRoleCreatesRoles = "role-can-create-roles"
	// ReasonRoleIsMonitor: a member of pg_monitor runs the metrics'
	// functions (migration 13), which count every namespace's operations
	// (exit 77).
	ReasonRoleIsMonitor = "role-is-monitor"
	// ReasonSchemaTooOld: the journal is not migrated to namespace
	// tenancy (migration 5) yet (exit 64).
	ReasonSchemaTooOld = "schema-too-old"
)

// roleName is the role names keyledger grants: lower-case, so that a name
// means the same quoted or not, and never a pg_ (reserved) name.
var roleName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,62}$`) })

// dns1123Label is a Kubernetes namespace name.
var dns1123Label = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`) })

// GrantChange is one namespace's change for one role. Changed is false when
// the grant already was (or, for a revoke, was not) in place.
type GrantChange struct {
	Action    GrantAction `json:"action"`
	Role      string      `json:"role"`
	Namespace string      `json:"namespace"`
	Changed   bool        `json:"changed"`
}

// NamespaceGrant is one role's right to act on one target namespace.
type NamespaceGrant struct {
	Role      string    `json:"role"`
	Namespace string    `json:"namespace"`
	GrantedAt time.Time `json:"grantedAt"`
}

// GrantEvent is one row of the append-only grant history.
type GrantEvent struct {
	ID int64     `json:"id"`
	At time.Time `json:"at"`
	// SessionRole is the login role that made the change, ActingRole the
	// role it acted as (they differ after SET ROLE).
	SessionRole string      `json:"sessionRole"`
	ActingRole  string      `json:"actingRole"`
	Role        string      `json:"role"`
	Namespace   string      `json:"namespace"`
	Action      GrantAction `json:"action"`
}

// CheckGrantArgs validates a role name and namespaces without connecting
// anywhere, and returns the namespaces without repeats, in their order.
func CheckGrantArgs(role string, namespaces []string) ([]string, error) {
	if !roleName().MatchString(role) || len(role) >= 3 && role[:3] == "pg_" {
		return nil, &PreconditionError{Reason: ReasonInvalidRole,
			Msg: fmt.Sprintf("role %q is not a role name keyledger grants: 1 to 63 characters of a-z 0-9 _ -, starting with a-z or _, not pg_", role),
			Fix: "name the namespace's PostgreSQL role in lower case, as CREATE ROLE (or CloudNativePG managed.roles) declared it"}
	}
	if len(namespaces) == 0 {
		return nil, &PreconditionError{Reason: ReasonInvalidNamespace, Msg: "no namespace given",
			Fix: "name at least one namespace"}
	}
	var out []string
	for _, ns := range namespaces {
		if !dns1123Label().MatchString(ns) {
			return nil, &PreconditionError{Reason: ReasonInvalidNamespace,
				Msg: fmt.Sprintf("namespace %q is not a DNS-1123 label: at most 63 characters of a-z 0-9 -, starting and ending with a-z or 0-9", ns),
				Fix: "name the Kubernetes namespace exactly"}
		}
		if !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out, nil
}

// Grant lets role act on the journal's operations whose target namespace
// is one of namespaces, and gives it exactly the table rights a run needs.
// It runs as the schema owner, in one transaction: each new grant is
// written to the grant history by the database in that transaction. A
// namespace already granted is reported unchanged. Refused (nothing
// changed): a role that does not exist, a superuser, a BYPASSRLS role (or
// a role that may SET ROLE to either), a CREATEROLE role, and the schema
// owner or a member of it.
func (s *Store) Grant(ctx context.Context, role string, namespaces ...string) ([]GrantChange, error) {
	namespaces, err := CheckGrantArgs(role, namespaces)
	if err != nil {
		return nil, err
	}
	var changes []GrantChange
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockGrants(ctx, tx); err != nil {
			return err
		}
		if err := checkGrantee(ctx, tx, role); err != nil {
			return err
		}
		for _, ns := range namespaces {
			tag, err := tx.Exec(ctx, `INSERT INTO keyledger.namespace_grants (role, namespace) VALUES ($1, $2)
				ON CONFLICT (role, namespace) DO NOTHING`, role, ns)
			if err != nil {
				return wrap("granting namespace "+ns, err)
			}
			changes = append(changes, GrantChange{Action: GrantActionGrant, Role: role, Namespace: ns, Changed: tag.RowsAffected() == 1})
		}
		for _, stmt := range grantStatements(role) {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return wrap("granting journal rights", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return changes, nil
}

// Revoke takes namespaces from role; a namespace not granted is reported
// unchanged. When role is left with no namespace it also loses every
// journal right. It runs as the schema owner, in one transaction, and each
// revoke is written to the grant history. A role that no longer exists may
// still have its grants revoked.
func (s *Store) Revoke(ctx context.Context, role string, namespaces ...string) ([]GrantChange, error) {
	namespaces, err := CheckGrantArgs(role, namespaces)
	if err != nil {
		return nil, err
	}
	var changes []GrantChange
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockGrants(ctx, tx); err != nil {
			return err
		}
		for _, ns := range namespaces {
			tag, err := tx.Exec(ctx, `DELETE FROM keyledger.namespace_grants WHERE role = $1 AND namespace = $2`, role, ns)
			if err != nil {
				return wrap("revoking namespace "+ns, err)
			}
			changes = append(changes, GrantChange{Action: GrantActionRevoke, Role: role, Namespace: ns, Changed: tag.RowsAffected() == 1})
		}
		var left int
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM keyledger.namespace_grants WHERE role = $1),
			EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1)`, role).Scan(&left, &exists); err != nil {
			return wrap("reading the role's grants", err)
		}
		if left > 0 || !exists {
			return nil
		}
		for _, stmt := range revokeStatements(role) {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return wrap("revoking journal rights", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return changes, nil
}

// Grants lists the namespace grants the connecting role may see: all of
// them for the schema owner, its own for a namespace role.
func (s *Store) Grants(ctx context.Context) ([]NamespaceGrant, error) {
	rows, err := s.pool.Query(ctx, `SELECT role::text, namespace, granted_at FROM keyledger.namespace_grants ORDER BY role, namespace`)
	if err != nil {
		return nil, grantsError("listing grants", err)
	}
	grants, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (NamespaceGrant, error) {
		var g NamespaceGrant
		err := row.Scan(&g.Role, &g.Namespace, &g.GrantedAt)
		return g, err
	})
	if err != nil {
		return nil, grantsError("listing grants", err)
	}
	return grants, nil
}

// GrantHistory lists every grant and revoke ever made, oldest first. Only
// the schema owner may read it.
func (s *Store) GrantHistory(ctx context.Context) ([]GrantEvent, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, at, session_role::text, acting_role::text, role::text, namespace, action
		FROM keyledger.grant_history ORDER BY id`)
	if err != nil {
		return nil, grantsError("reading the grant history", err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (GrantEvent, error) {
		var e GrantEvent
		var action string
		err := row.Scan(&e.ID, &e.At, &e.SessionRole, &e.ActingRole, &e.Role, &e.Namespace, &action)
		e.Action = GrantAction(action)
		return e, err
	})
	if err != nil {
		return nil, grantsError("reading the grant history", err)
	}
	return events, nil
}

// lockGrants checks that the connecting role owns the journal at migration
// 5 or later, and serializes changes of the grants (a revoke that leaves a
// role nothing and a concurrent grant to it must not interleave).
func lockGrants(ctx context.Context, tx pgx.Tx) error {
	var migrated, owner bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('keyledger.namespace_grants') IS NOT NULL,
		coalesce((SELECT pg_has_role(current_user, c.relowner, 'USAGE') FROM pg_catalog.pg_class c
		          WHERE c.oid = to_regclass('keyledger.operations')), false)`).Scan(&migrated, &owner); err != nil {
		return wrap("checking the journal", err)
	}
	if !migrated {
		return schemaTooOld()
	}
	if !owner {
		return notOwner()
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE keyledger.namespace_grants IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return wrap("locking the grants", err)
	}
	return nil
}

// checkGrantee refuses a role that does not exist or that would see past
// row-level security.
func checkGrantee(ctx context.Context, tx pgx.Tx, role string) error {
	// A role that may SET ROLE to a superuser or a BYPASSRLS role is as
	// wide as that role (attributes are not inherited, but SET ROLE takes
	// them); a CREATEROLE role may, before PostgreSQL 16, grant itself
	// membership in the owner.
	var super, bypass, owner, createRole, monitor bool
	err := tx.QueryRow(ctx, `SELECT
		r.rolsuper OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles s WHERE s.rolsuper AND s.oid <> r.oid AND pg_has_role(r.oid, s.oid, 'MEMBER')),
		r.rolbypassrls OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles s WHERE s.rolbypassrls AND s.oid <> r.oid AND pg_has_role(r.oid, s.oid, 'MEMBER')),
		pg_has_role(r.oid, c.relowner, 'MEMBER'),
		r.rolcreaterole,
		pg_has_role(r.oid, 'pg_monitor', 'MEMBER')
		FROM pg_catalog.pg_roles r, pg_catalog.pg_class c
		WHERE r.rolname = $1 AND c.oid = 'keyledger.operations'::regclass`, role).Scan(&super, &bypass, &owner, &createRole, &monitor)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return &PreconditionError{Reason: ReasonRoleMissing,
			Msg: fmt.Sprintf("role %q does not exist; nothing was granted", role),
			Fix: fmt.Sprintf("create it first (CREATE ROLE %s LOGIN PASSWORD '...', or CloudNativePG managed.roles), then grant again",
				pgx.Identifier{role}.Sanitize())}
	case err != nil:
		return wrap("reading the role", err)
	case super:
		return &PreconditionError{Reason: ReasonRoleIsSuperuser, Permission: true,
			Msg: fmt.Sprintf("role %q is a superuser (or may SET ROLE to one): row-level security does not hold it; nothing was granted", role),
			Fix: "give each namespace a role of its own, LOGIN NOSUPERUSER NOBYPASSRLS, and grant that"}
	case bypass:
		return &PreconditionError{Reason: ReasonRoleBypassesRLS, Permission: true,
			Msg: fmt.Sprintf("role %q has BYPASSRLS (or may SET ROLE to a role that has it): row-level security does not hold it; nothing was granted", role),
			Fix: fmt.Sprintf("ALTER ROLE %s NOBYPASSRLS (and revoke its membership in BYPASSRLS roles), or grant a role of its own to the namespace", pgx.Identifier{role}.Sanitize())}
	case owner:
		return &PreconditionError{Reason: ReasonRoleIsSchemaOwner, Permission: true,
			Msg: fmt.Sprintf("role %q is the journal's owner or a member of it: it sees every namespace; nothing was granted", role),
			Fix: "give each namespace a role of its own that is not a member of the owner, and grant that"}
	case createRole:
		return &PreconditionError{Reason: ReasonRoleCreatesRoles, Permission: true,
			Msg: fmt.Sprintf("role %q has CREATEROLE: it may make itself a member of other roles, the owner's among them; nothing was granted", role),
			Fix: fmt.Sprintf("ALTER ROLE %s NOCREATEROLE, or grant a role of its own to the namespace", pgx.Identifier{role}.Sanitize())}
	case monitor:
		return &PreconditionError{Reason: ReasonRoleIsMonitor, Permission: true,
			Msg: fmt.Sprintf("role %q is a member of pg_monitor: it reads every namespace's operation counts (the journal's metrics); nothing was granted", role),
			Fix: fmt.Sprintf("REVOKE pg_monitor FROM %s, or grant a role of its own to the namespace", pgx.Identifier{role}.Sanitize())}
	}
	return nil
}

// grantStatements are exactly the rights a run needs, as migrations 1 to 4
// granted them to the shared operator role: read the journal and the state
// edges, insert the columns a run supplies (never ids, times, revisions,
// states or finished_xact), move state with its outcome and reason, and read
// its own grants (the policies read them as this role).
func grantStatements(role string) []string {
	r := pgx.Identifier{role}.Sanitize()
	return []string{
		`GRANT USAGE ON SCHEMA keyledger TO ` + r,
		`GRANT SELECT ON keyledger.state_edges, keyledger.namespace_grants TO ` + r,
		`GRANT SELECT ON keyledger.operations, keyledger.records TO ` + r,
		`GRANT INSERT (kind, mutation_id, request_id, command_digest, target_namespace, target_name, expected_uid) ON keyledger.operations TO ` + r,
		`GRANT INSERT (operation_id, kind, step, target, attempt, uid, resource_version, digest, status, reason, detail, batch, final) ON keyledger.records TO ` + r,
		`GRANT UPDATE (state, outcome, reason) ON keyledger.operations TO ` + r,
	}
}

// revokeStatements take every journal right (table rights take their
// column rights with them).
func revokeStatements(role string) []string {
	r := pgx.Identifier{role}.Sanitize()
	return []string{
		`REVOKE ALL ON keyledger.operations, keyledger.records, keyledger.state_edges, keyledger.namespace_grants FROM ` + r,
		`REVOKE USAGE ON SCHEMA keyledger FROM ` + r,
	}
}

func schemaTooOld() error {
	return &PreconditionError{Reason: ReasonSchemaTooOld,
		Msg: "the journal has no namespace grants yet (it is migrated below version 5); nothing was changed",
		Fix: "run keyledger migrate up as the schema owner, then grant again"}
}

func notOwner() error {
	return &PreconditionError{Reason: ReasonNotSchemaOwner,
		Msg: "the connecting role is not the journal's owner: only the owner grants and revokes namespaces; nothing was changed",
		Fix: "run keyledger journal grant and revoke as the role that ran keyledger migrate up"}
}

// grantsError names a missing table (an older journal) or a role without
// rights on it; anything else is wrapped and redacted.
func grantsError(what string, err error) error {
	var server *serverError
	if errors.As(redact(err), &server) {
		switch server.SQLState() {
		case "42P01": // undefined_table
			return schemaTooOld()
		case "42501": // insufficient_privilege
			return &PreconditionError{Reason: ReasonNotSchemaOwner,
				Msg: "the connecting role may not read the journal's grants: " + what + " is the owner's (or, for its own grants, a granted role's)",
				Fix: "run it as the role that ran keyledger migrate up"}
		}
	}
	return wrap(what, err)
}
