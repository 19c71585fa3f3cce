package integration

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// One journal, two namespaces A and B, each with its own role: every
// statement below runs as the role named, on the real PostgreSQL, in a
// journal whose owner is not a superuser (so that row-level security holds
// the owner too, and it sees everything only by its own policy).

// tenant is one namespace's view of the shared journal.
type tenant struct {
	ns, url string
	conn    *pgx.Conn
	st      *store.Store
	op      *store.Operation
}

// twoTenants builds a journal serving A and B, each with its own role and
// one operation (B's with a record beyond its preparation).
func twoTenants(e *env) (a, b *tenant) {
	e.T.Helper()
	e.OwnedJournal()
	suffix := suite.RandomSuffix(e.T)
	a, b = &tenant{ns: "tenant-a-" + suffix}, &tenant{ns: "tenant-b-" + suffix}
	for _, x := range []*tenant{a, b} {
		x.url = e.NamespaceRole(x.ns)
		x.conn = suite.Connect(e.T, x.url)
		st, err := store.Open(e.T.Context(), x.url)
		require.NoError(e.T, err)
		e.T.Cleanup(st.Close)
		x.st = st
		p := suite.ToyPreparation("mut-"+x.ns, 11)
		p.Namespace = x.ns
		x.op, _, err = st.Prepare(e.T.Context(), p)
		require.NoError(e.T, err, "%s prepares in its own namespace", x.ns)
	}
	var err error
	b.op, err = b.st.Transition(e.T.Context(), store.TransitionParams{OperationID: b.op.ID, From: store.StatePrepared, To: store.StateCalling,
		Revision: b.op.Revision, Records: []store.Record{{Kind: store.RecordAuthorityCall, Step: "claim", Attempt: 1}}})
	require.NoError(e.T, err)
	return a, b
}

func countRows(t *testing.T, conn *pgx.Conn, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), sql, args...).Scan(&n), sql)
	return n
}

// listed is the mutation IDs `keyledger journal list -o json` prints.
func listed(t *testing.T, r suite.Result) []string {
	t.Helper()
	require.Equal(t, 0, r.Code, "journal list: %s", r.Stderr)
	var ops []struct {
		MutationID string `json:"mutationId"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &ops), r.Stdout)
	var ids []string
	for _, op := range ops {
		ids = append(ids, op.MutationID)
	}
	return ids
}

// A's role sees nothing of B's, and PostgreSQL refuses every write of A
// that would reach B: an operation targeting B, a record into a B
// operation, a move of a B operation.
func TestIntegrationTenancyConfinesEachRole(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	a, b := twoTenants(e)
	owner := suite.Connect(t, e.Journal.OwnerURL)
	require.Equal(t, 3, countRows(t, owner, `SELECT count(*) FROM pg_class WHERE relrowsecurity AND relforcerowsecurity
		AND oid IN ('keyledger.operations'::regclass, 'keyledger.records'::regclass, 'keyledger.namespace_grants'::regclass)`),
		"row-level security is enabled and forced (the owner too is held to the policies)")

	// Reads: nothing of B's, A's own in full.
	require.Zero(t, countRows(t, a.conn, `SELECT count(*) FROM keyledger.operations WHERE target_namespace = $1`, b.ns))
	require.Zero(t, countRows(t, a.conn, `SELECT count(*) FROM keyledger.operations WHERE id = $1`, b.op.ID))
	require.Zero(t, countRows(t, a.conn, `SELECT count(*) FROM keyledger.records WHERE operation_id = $1`, b.op.ID))
	require.Equal(t, 1, countRows(t, a.conn, `SELECT count(*) FROM keyledger.operations`), "A sees its one operation")
	require.Equal(t, 1, countRows(t, a.conn, `SELECT count(*) FROM keyledger.records`), "and its one record")
	_, err := a.st.Load(ctx, "", b.op.MutationID)
	require.ErrorIs(t, err, store.ErrNotFound)
	records, err := a.st.Records(ctx, b.op.ID)
	require.NoError(t, err)
	require.Empty(t, records)

	// Writes into B: refused by row-level security (42501).
	_, err = a.conn.Exec(ctx, `INSERT INTO keyledger.operations (kind, mutation_id, request_id, command_digest, target_namespace, target_name)
		VALUES ('ToyClaim', 'mut-forged', 'r', $1, $2, 'n')`, "sha256:"+strings.Repeat("f", 64), b.ns)
	require.Equal(t, "42501", sqlState(err), "an operation targeting B: %v", err)
	require.Contains(t, err.Error(), "row-level security")
	_, err = a.conn.Exec(ctx, `INSERT INTO keyledger.records (operation_id, kind, step, status) VALUES ($1, 'authority_result', 'claim', 'applied')`, b.op.ID)
	require.Equal(t, "42501", sqlState(err), "a record into a B operation: %v", err)
	require.Contains(t, err.Error(), "row-level security")
	p := suite.ToyPreparation("mut-forged-2", 12)
	p.Namespace = b.ns
	_, _, err = a.st.Prepare(ctx, p)
	require.Error(t, err, "the store as A cannot prepare in B either")

	// A move of B's operation finds no row: PostgreSQL's row-level security
	// filters an UPDATE to the rows the role may see (no SQLSTATE exists for
	// that), so the move changes nothing, and the store's compare-and-set
	// says the state moved.
	tag, err := a.conn.Exec(ctx, `UPDATE keyledger.operations SET state = 'resolving' WHERE id = $1`, b.op.ID)
	require.NoError(t, err)
	require.Zero(t, tag.RowsAffected(), "A's UPDATE of a B operation matches nothing")
	_, err = a.st.Transition(ctx, store.TransitionParams{OperationID: b.op.ID, From: store.StateCalling, To: store.StateRefused,
		Revision: b.op.Revision, Outcome: "refused", Reason: "forged", Records: []store.Record{{Kind: store.RecordRefusal, Step: "refuse", Reason: "forged"}}})
	require.ErrorIs(t, err, store.ErrStateMoved)
	require.Zero(t, countRows(t, a.conn, `SELECT count(*) FROM (SELECT 1 FROM keyledger.operations WHERE id = $1 FOR UPDATE) locked`, b.op.ID), "nor lock it")
	// A's own operation cannot be moved into B: the namespace is not a
	// column A may update (and it is immutable).
	_, err = a.conn.Exec(ctx, `UPDATE keyledger.operations SET target_namespace = $2 WHERE id = $1`, a.op.ID, b.ns)
	require.Equal(t, "42501", sqlState(err), "%v", err)

	// B's operation is as B left it, seen by B and by the owner.
	after, recs, err := b.st.Snapshot(ctx, "", b.op.MutationID)
	require.NoError(t, err)
	require.Equal(t, b.op.Revision, after.Revision)
	require.Equal(t, store.StateCalling, after.State)
	require.Len(t, recs, 2)
	require.Equal(t, 2, countRows(t, owner, `SELECT count(*) FROM keyledger.operations`), "the owner sees both namespaces")
	require.Equal(t, 3, countRows(t, owner, `SELECT count(*) FROM keyledger.records`))

	// The CLI as A: only A's; B's mutation ID is not found (exit 64).
	require.Equal(t, []string{a.op.MutationID}, listed(t, e.Keyledger([]string{"journal", "list", "-o", "json"}, suite.WithDatabase(a.url))))
	require.ElementsMatch(t, []string{a.op.MutationID, b.op.MutationID},
		listed(t, e.Keyledger([]string{"journal", "list", "-o", "json"}, suite.WithDatabase(e.Journal.OwnerURL))), "the owner lists both")
	r := e.Keyledger([]string{"journal", "show", b.op.MutationID}, suite.WithDatabase(a.url))
	require.Equal(t, 64, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Empty(t, r.Stdout)
	require.Contains(t, r.Stderr, "no operation with mutation ID")
	r = e.Keyledger([]string{"journal", "show", a.op.MutationID, "-o", "json"}, suite.WithDatabase(a.url))
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, a.ns)
	r = e.Keyledger([]string{"journal", "show", b.op.MutationID, "-o", "json"}, suite.WithDatabase(b.url))
	require.Equal(t, 0, r.Code, r.Stderr)
	require.NotContains(t, r.Stdout, a.ns)

	// Nothing the CLI printed as A, refusals included, holds A's password
	// or the server's address.
	u, err := url.Parse(a.url)
	require.NoError(t, err)
	pw, _ := u.User.Password()
	for _, args := range [][]string{
		{"journal", "list"}, {"journal", "show", b.op.MutationID}, {"journal", "grants"},
		{"journal", "grants", "--history"}, {"journal", "grant", suite.RoleOf(t, a.url), b.ns},
	} {
		r := e.Keyledger(args, suite.WithDatabase(a.url))
		require.NotContains(t, r.Stdout+r.Stderr, pw, "%v", args)
		require.NotContains(t, r.Stdout+r.Stderr, u.Host, "%v", args)
	}
}

// A role granted no namespace of these sees nothing; a revoke takes effect
// at once; the last revoke takes the role's journal rights; the grant
// history lists every grant and revoke, made by the owner.
func TestIntegrationTenancyGrantAndRevoke(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	a, b := twoTenants(e)
	ownerRole := suite.RoleOf(t, e.Journal.OwnerURL)

	// Granted only a namespace nobody journals in: sees nothing.
	other := suite.Connect(t, e.NamespaceRole("tenant-c-"+suite.RandomSuffix(t)))
	require.Zero(t, countRows(t, other, `SELECT count(*) FROM keyledger.operations`))
	require.Zero(t, countRows(t, other, `SELECT count(*) FROM keyledger.records`))

	// A role granted both sees both; revoking B takes B away at once.
	bothURL := e.NamespaceRole(a.ns, b.ns)
	both := suite.RoleOf(t, bothURL)
	conn := suite.Connect(t, bothURL)
	require.Equal(t, 2, countRows(t, conn, `SELECT count(*) FROM keyledger.operations`))
	r := e.Keyledger([]string{"journal", "grant", both, b.ns, a.ns, "-o", "json"}, suite.WithDatabase(e.Journal.OwnerURL))
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, `{"action":"grant","role":"`+both+`","namespace":"`+b.ns+`","changed":false}`+"\n"+
		`{"action":"grant","role":"`+both+`","namespace":"`+a.ns+`","changed":false}`+"\n", r.Stdout, "a second grant is a no-op")
	r = e.Keyledger([]string{"journal", "revoke", both, b.ns}, suite.WithDatabase(e.Journal.OwnerURL))
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, "revoke "+both+" "+b.ns+" changed\n", r.Stdout)
	require.Equal(t, 1, countRows(t, conn, `SELECT count(*) FROM keyledger.operations`), "B is gone for the role")
	require.Zero(t, countRows(t, conn, `SELECT count(*) FROM keyledger.operations WHERE target_namespace = $1`, b.ns))
	r = e.Keyledger([]string{"journal", "revoke", both, b.ns}, suite.WithDatabase(e.Journal.OwnerURL))
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, "revoke "+both+" "+b.ns+" unchanged\n", r.Stdout)

	// The role's own grants, as it sees them; all grants, as the owner.
	r = e.Keyledger([]string{"journal", "grants", "-o", "json"}, suite.WithDatabase(bothURL))
	require.Equal(t, 0, r.Code, r.Stderr)
	var own []store.NamespaceGrant
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &own))
	require.Len(t, own, 1)
	require.Equal(t, a.ns, own[0].Namespace)
	r = e.Keyledger([]string{"journal", "grants", "-o", "json"}, suite.WithDatabase(e.Journal.OwnerURL))
	require.Equal(t, 0, r.Code, r.Stderr)
	var all []store.NamespaceGrant
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &all))
	require.Len(t, all, 4, "A's, B's, the other role's and one of both's")

	// The last revoke takes the journal rights too: nothing to read.
	r = e.Keyledger([]string{"journal", "revoke", both, a.ns}, suite.WithDatabase(e.Journal.OwnerURL))
	require.Equal(t, 0, r.Code, r.Stderr)
	_, err := conn.Exec(ctx, `SELECT 1 FROM keyledger.operations`)
	require.Equal(t, "42501", sqlState(err), "no namespace left, no rights left: %v", err)

	// The history: every change, in order, by the owner.
	r = e.Keyledger([]string{"journal", "grants", "--history", "-o", "json"}, suite.WithDatabase(e.Journal.OwnerURL))
	require.Equal(t, 0, r.Code, r.Stderr)
	var history []store.GrantEvent
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &history))
	var mine []string
	for _, h := range history {
		require.Equal(t, ownerRole, h.SessionRole)
		require.Equal(t, ownerRole, h.ActingRole)
		if h.Role == both {
			mine = append(mine, string(h.Action)+" "+h.Namespace)
		}
	}
	require.Equal(t, []string{"grant " + a.ns, "grant " + b.ns, "revoke " + b.ns, "revoke " + a.ns}, mine,
		"both grants and both revokes, once each (the repeated grant and revoke changed nothing)")
	require.Len(t, history, 7)
	r = e.Keyledger([]string{"journal", "grants", "--history"}, suite.WithDatabase(a.url))
	require.Equal(t, 64, r.Code, "the history is the owner's: %s", r.Stderr)
	require.Contains(t, r.Stderr, "not-schema-owner")

	// The history is append-only, for the owner too; grants are never
	// changed in place, and cannot be truncated past the history.
	owner := suite.Connect(t, e.Journal.OwnerURL)
	for _, sql := range []string{
		`UPDATE keyledger.grant_history SET action = 'grant'`,
		`DELETE FROM keyledger.grant_history`,
		`TRUNCATE keyledger.grant_history`,
		`UPDATE keyledger.namespace_grants SET namespace = 'elsewhere'`,
		`TRUNCATE keyledger.namespace_grants`,
	} {
		_, err := owner.Exec(ctx, sql)
		require.Equal(t, "42501", sqlState(err), "%s: %v", sql, err)
	}
	// A namespace role cannot grant itself anything.
	_, err = a.conn.Exec(ctx, `INSERT INTO keyledger.namespace_grants (role, namespace) VALUES (current_user, $1)`, b.ns)
	require.Equal(t, "42501", sqlState(err), "%v", err)
	r = e.Keyledger([]string{"journal", "grant", suite.RoleOf(t, a.url), b.ns}, suite.WithDatabase(a.url))
	require.Equal(t, 64, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "not-schema-owner")
}

// journal grant refuses a role that would see past row-level security (a
// superuser, BYPASSRLS, the owner), a role that does not exist and a
// namespace that is not one, each with its own reason; nothing is granted.
func TestIntegrationTenancyGrantRefusesWideRoles(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	e.OwnedJournal()
	admin := suite.Connect(t, suite.Postgres().AdminURL())
	super, bypass := "kl_super_"+suite.RandomSuffix(t), "kl_bypass_"+suite.RandomSuffix(t)
	for _, stmt := range []string{
		"CREATE ROLE " + super + " LOGIN SUPERUSER",
		"CREATE ROLE " + bypass + " LOGIN NOSUPERUSER BYPASSRLS",
	} {
		_, err := admin.Exec(ctx, stmt)
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		for _, r := range []string{super, bypass} {
			_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+r) // members' grants go with it
		}
	})
	// A member of the owner has the owner's privileges: refused as the owner.
	// A member of a BYPASSRLS role may SET ROLE to it; a CREATEROLE role may
	// (before PostgreSQL 16) make itself a member of the owner.
	// A member of pg_monitor runs the metrics' functions (migration 13),
	// which count every namespace's operations.
	member, superMember, bypassMember, creator, monitor := "kl_member_"+suite.RandomSuffix(t), "kl_sumember_"+suite.RandomSuffix(t),
		"kl_bymember_"+suite.RandomSuffix(t), "kl_creator_"+suite.RandomSuffix(t), "kl_monitor_"+suite.RandomSuffix(t)
	for _, r := range []string{member, superMember, bypassMember, creator, monitor} {
		require.NoError(t, suite.Postgres().EnsureRole(ctx, r, suite.RandomSuffix(t)))
	}
	for _, stmt := range []string{
		"GRANT " + pgx.Identifier{suite.RoleOf(t, e.Journal.OwnerURL)}.Sanitize() + " TO " + member,
		"GRANT " + super + " TO " + superMember,
		"GRANT " + bypass + " TO " + bypassMember,
		"ALTER ROLE " + creator + " CREATEROLE",
		"GRANT pg_monitor TO " + monitor,
	} {
		_, err := admin.Exec(ctx, stmt)
		require.NoError(t, err)
	}

	for _, c := range []struct {
		role, ns string
		code     int
		reason   string
	}{
		{super, "tenant-x", 77, "role-is-superuser"},
		{bypass, "tenant-x", 77, "role-bypasses-rls"},
		{suite.RoleOf(t, e.Journal.OwnerURL), "tenant-x", 77, "role-is-schema-owner"},
		{member, "tenant-x", 77, "role-is-schema-owner"},
		{superMember, "tenant-x", 77, "role-is-superuser"},
		{bypassMember, "tenant-x", 77, "role-bypasses-rls"},
		{creator, "tenant-x", 77, "role-can-create-roles"},
		{monitor, "tenant-x", 77, "role-is-monitor"},
		{"kl_nobody_" + suite.RandomSuffix(t), "tenant-x", 64, "role-missing"},
		{member, "Tenant_X", 64, "invalid-namespace"},
		{"Bad Role", "tenant-x", 64, "invalid-role"},
		{"pg_read_all_data", "tenant-x", 64, "invalid-role"},
	} {
		r := e.Keyledger([]string{"journal", "grant", c.role, c.ns}, suite.WithDatabase(e.Journal.OwnerURL))
		require.Equal(t, c.code, r.Code, "%s: stdout %s stderr %s", c.role, r.Stdout, r.Stderr)
		require.Empty(t, r.Stdout)
		require.Contains(t, r.Stderr, "["+c.reason+", exit")
	}
	r := e.Keyledger([]string{"journal", "grants", "--history", "-o", "json"}, suite.WithDatabase(e.Journal.OwnerURL))
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, "[]\n", r.Stdout, "nothing was granted")

	r = e.Keyledger([]string{"journal", "grant", member}, suite.WithDatabase(e.Journal.OwnerURL))
	require.Equal(t, 64, r.Code, "a role without a namespace: %s", r.Stderr)
}

// Mutation IDs are unique within a namespace (migration 12). A role may
// insert only into the namespaces it was granted, so nothing A inserts
// conflicts with a row of B: A's raw INSERT of B's mutation ID, and A's
// prepare of it, succeed in A's namespace and tell A nothing; B's
// operation is untouched; and B prepares a mutation ID A took first as its
// own, never A's.
func TestIntegrationTenancyMutationIDs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	a, b := twoTenants(e)

	// A raw INSERT of B's mutation ID into A's namespace: no conflict.
	_, err := a.conn.Exec(ctx, `INSERT INTO keyledger.operations (kind, mutation_id, request_id, command_digest, target_namespace, target_name)
		VALUES ('ToyClaim', $1, 'r', $2, $3, 'n')`, b.op.MutationID, "sha256:"+strings.Repeat("a", 64), a.ns)
	require.NoError(t, err, "B's mutation ID is free in A's namespace")
	// Into B's namespace: refused by the policy, whether or not B holds the
	// ID (the same answer for a taken and a free one).
	for _, id := range []string{b.op.MutationID, "mut-free-in-b"} {
		_, err = a.conn.Exec(ctx, `INSERT INTO keyledger.operations (kind, mutation_id, request_id, command_digest, target_namespace, target_name)
			VALUES ('ToyClaim', $1, 'r', $2, $3, 'n')`, id, "sha256:"+strings.Repeat("a", 64), b.ns)
		require.Equal(t, "42501", sqlState(err), "%s: %v", id, err)
		require.NotContains(t, err.Error(), "operations_namespace_mutation_id_key")
	}
	same, _, err := b.st.Snapshot(ctx, b.ns, b.op.MutationID)
	require.NoError(t, err)
	require.Equal(t, b.op.Revision, same.Revision)
	require.Equal(t, b.op.CommandDigest, same.CommandDigest)

	// A takes a mutation ID first: B prepares it as its own operation.
	p := suite.ToyPreparation("mut-squat", 13)
	p.Namespace = a.ns
	_, created, err := a.st.Prepare(ctx, p)
	require.NoError(t, err)
	require.True(t, created)
	p.Namespace = b.ns
	mine, created, err := b.st.Prepare(ctx, p)
	require.NoError(t, err)
	require.True(t, created, "B's own operation, never A's resumed")
	require.Equal(t, b.ns, mine.Namespace)
	_, err = b.st.Load(ctx, a.ns, "mut-squat")
	require.ErrorIs(t, err, store.ErrNotFound, "B sees nothing of A's")
	// The owner sees both, and asking without a namespace is ambiguous.
	owner := suite.RoleStore(t, e.Journal.OwnerURL)
	_, err = owner.Load(ctx, "", "mut-squat")
	var pre *store.PreconditionError
	require.ErrorAs(t, err, &pre)
	require.Equal(t, store.ReasonMutationIDAmbiguous, pre.Reason)
	got, err := owner.Load(ctx, b.ns, "mut-squat")
	require.NoError(t, err)
	require.Equal(t, mine.ID, got.ID)
	// So is `journal show` as the owner: exit 64 naming the flag; with it,
	// the namespace's operation.
	r := e.Keyledger([]string{"journal", "show", "mut-squat"}, suite.WithDatabase(e.Journal.OwnerURL))
	require.Equal(t, 64, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stderr, "[mutation-id-ambiguous, exit 64]")
	require.Contains(t, r.Stderr, "--namespace")
	r = e.Keyledger([]string{"journal", "show", "mut-squat", "--namespace", b.ns, "-o", "json"}, suite.WithDatabase(e.Journal.OwnerURL))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stdout, b.ns)
	require.NotContains(t, r.Stdout, a.ns)
}

// Nothing is appended to a finished operation, by its own namespace's role
// either, under the 64-bit guard: finished_xact, set by the trigger alone,
// never granted and overwritten whatever the owner writes.
func TestIntegrationTenancyFinishedXact(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	a, _ := twoTenants(e)
	owner := suite.Connect(t, e.Journal.OwnerURL)

	// The role cannot name the column, on insert or update.
	_, err := a.conn.Exec(ctx, `UPDATE keyledger.operations SET finished_xact = pg_current_xact_id() WHERE id = $1`, a.op.ID)
	require.Equal(t, "42501", sqlState(err), "%v", err)
	_, err = a.conn.Exec(ctx, `INSERT INTO keyledger.operations (kind, mutation_id, request_id, command_digest, target_namespace, target_name, finished_xact)
		VALUES ('ToyClaim', 'mut-x', 'r', $1, $2, 'n', '1')`, "sha256:"+strings.Repeat("b", 64), a.ns)
	require.Equal(t, "42501", sqlState(err), "%v", err)
	// The owner may name it; the trigger overwrites it (an open operation
	// has none).
	_, err = owner.Exec(ctx, `UPDATE keyledger.operations SET finished_xact = pg_current_xact_id() WHERE id = $1`, a.op.ID)
	require.NoError(t, err)
	require.Equal(t, 1, countRows(t, owner, `SELECT count(*) FROM keyledger.operations WHERE id = $1 AND finished_xact IS NULL`, a.op.ID))
	a.op, err = a.st.Load(ctx, "", a.op.MutationID)
	require.NoError(t, err)

	// Finished by A, in one transaction that may append after its ending.
	done, err := a.st.Transition(ctx, store.TransitionParams{OperationID: a.op.ID, From: a.op.State, To: store.StateCompleted, Revision: a.op.Revision,
		Outcome: "completed", Records: []store.Record{{Kind: store.RecordCompletion, Step: "complete"}, {Kind: store.RecordObservation, Step: "after"}}})
	require.NoError(t, err)
	var finished, xmin string
	require.NoError(t, owner.QueryRow(ctx, `SELECT finished_xact::text, xmin::text FROM keyledger.operations WHERE id = $1`, done.ID).Scan(&finished, &xmin))
	require.Equal(t, xmin, finished, "the finishing transaction's id (below 2^32 here, so equal to xmin)")
	// Afterwards, by A and by the owner: refused.
	for who, conn := range map[string]*pgx.Conn{"A": a.conn, "owner": owner} {
		_, err := conn.Exec(ctx, `INSERT INTO keyledger.records (operation_id, kind, step) VALUES ($1, 'observation', 'late')`, done.ID)
		require.Equal(t, "42501", sqlState(err), "%s: %v", who, err)
		require.Contains(t, err.Error(), "is final")
	}
	// The guard compares 64-bit transaction ids, not xmin (since migration
	// 11 once per statement, guard_records_appended).
	var def string
	require.NoError(t, owner.QueryRow(ctx, `SELECT pg_get_functiondef('keyledger.guard_records_appended()'::regprocedure)`).Scan(&def))
	require.Contains(t, def, "o.finished_xact")
	require.Contains(t, def, "op.finished_xact IS DISTINCT FROM pg_current_xact_id()")
	require.NotContains(t, def, "xmin")
	var typ string
	require.NoError(t, owner.QueryRow(ctx, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = 'keyledger.operations'::regclass AND attname = 'finished_xact'`).Scan(&typ))
	require.Equal(t, "xid8", typ)
}

// migrate down on a journal that holds records exits 64 and drops nothing,
// at each step that would drop journal rows (5: the grants and their
// history; 1: operations and records); with --destroy-journal-records it
// drops them.
func TestIntegrationTenancyMigrateDownGuard(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a, _ := twoTenants(e)
	owner := suite.WithDatabase(e.Journal.OwnerURL)
	conn := suite.Connect(t, e.Journal.OwnerURL)
	tables := func() int {
		return countRows(t, conn, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'keyledger'
			AND table_name IN ('operations', 'records', 'namespace_grants', 'grant_history')`)
	}
	require.Equal(t, 4, tables())
	// Every migration after 5 (6 is the prune events, none yet) goes
	// down without the flag.
	e.MigrateDownTo(5, owner)

	r := e.Keyledger([]string{"migrate", "down"}, owner)
	require.Equal(t, 64, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Empty(t, r.Stdout)
	require.Contains(t, r.Stderr, "[journal-not-empty, exit 64]")
	require.Contains(t, r.Stderr, "migration 5 down would drop keyledger.namespace_grants and keyledger.grant_history, which hold 2 grants and 2 grant history records")
	require.Contains(t, r.Stderr, "--destroy-journal-records")
	require.Equal(t, 4, tables(), "nothing dropped")
	require.Equal(t, 2, countRows(t, conn, `SELECT count(*) FROM keyledger.grant_history`))
	require.Equal(t, 1, countRows(t, a.conn, `SELECT count(*) FROM keyledger.operations`), "A still works")
	r = e.Keyledger([]string{"migrate", "version"}, owner)
	require.Equal(t, store.MigrationStatus{Version: 5}, suite.MigrateStatus(t, r))

	r = e.Keyledger([]string{"migrate", "down", "--destroy-journal-records"}, owner)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, store.MigrationStatus{Version: 4, Changed: true}, suite.MigrateStatus(t, r))
	require.Equal(t, 2, tables(), "the grants went, operations and records stayed")
	_, err := a.conn.Exec(t.Context(), `SELECT 1 FROM keyledger.operations`)
	require.Equal(t, "42501", sqlState(err), "without row-level security the namespace roles keep no rights: %v", err)
	for range 3 {
		r = e.Keyledger([]string{"migrate", "down"}, owner)
		require.Equal(t, 0, r.Code, r.Stderr)
	}
	r = e.Keyledger([]string{"migrate", "down"}, owner)
	require.Equal(t, 64, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stderr, "[journal-not-empty, exit 64]")
	require.Contains(t, r.Stderr, "migration 1 down would drop keyledger.operations and keyledger.records, which hold 2 operations and 3 records")
	require.Equal(t, 2, countRows(t, conn, `SELECT count(*) FROM keyledger.operations`), "nothing dropped")
	require.Equal(t, 3, countRows(t, conn, `SELECT count(*) FROM keyledger.records`))
	r = e.Keyledger([]string{"migrate", "version"}, owner)
	require.Equal(t, store.MigrationStatus{Version: 1}, suite.MigrateStatus(t, r))

	r = e.Keyledger([]string{"migrate", "down", "--destroy-journal-records"}, owner)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, store.MigrationStatus{Version: 0, Changed: true}, suite.MigrateStatus(t, r))
	require.Zero(t, tables(), "destroyed, as the flag says")
}

// An existing journal (migration 4, one shared operator role, finished and
// open operations) migrates with migrate up: the shared role keeps no
// right, finished operations count as finished for every later transaction,
// and a namespace role granted afterwards sees and continues them.
func TestIntegrationTenancyMigratesAnExistingJournal(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	db := suite.FreshDatabase(t)
	shared0, pw := "kl_shared_"+suite.RandomSuffix(t), suite.RandomSuffix(t)
	require.NoError(t, suite.Postgres().EnsureRole(ctx, shared0, pw))
	_, err := store.MigrateSource(ctx, db, store.MigrateUp, shared0, migrationsUpTo(t, 4))
	require.NoError(t, err)
	sharedURL, err := suite.Postgres().URLFor(db, shared0, pw)
	require.NoError(t, err)
	old, err := store.Open(ctx, sharedURL)
	require.NoError(t, err)
	defer old.Close()
	const ns = "legacy"
	// Prepared as a keyledger of migration 4 did: this keyledger's
	// prepare names migration 12's key, which a journal at 4 lacks.
	oldConn := suite.Connect(t, sharedURL)
	prep := func(m string, n int) *store.Operation {
		p := suite.ToyPreparation(m, n)
		var id int64
		require.NoError(t, oldConn.QueryRow(ctx, `INSERT INTO keyledger.operations
			(kind, mutation_id, request_id, command_digest, target_namespace, target_name) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
			p.Kind, p.MutationID, p.RequestID, p.CommandDigest, ns, p.Name).Scan(&id))
		_, err := oldConn.Exec(ctx, `INSERT INTO keyledger.records (operation_id, kind, step, digest) VALUES ($1, 'preparation', 'preparation', $2)`,
			id, p.CommandDigest)
		require.NoError(t, err)
		op, err := old.Load(ctx, ns, m)
		require.NoError(t, err)
		return op
	}
	finished, open := prep("mut-old-done", 21), prep("mut-old-open", 22)
	_, err = old.Transition(ctx, store.TransitionParams{OperationID: finished.ID, From: store.StatePrepared, To: store.StateRefused, Revision: finished.Revision,
		Outcome: "refused", Reason: "old", Records: []store.Record{{Kind: store.RecordRefusal, Step: "refuse", Reason: "old"}}})
	require.NoError(t, err)

	// The deprecated flag still names the shared role, whose rights 5 revokes.
	r := e.Keyledger([]string{"migrate", "up", "--operator-role", shared0}, suite.WithDatabase(db))
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, store.MigrationStatus{Version: suite.LatestVersion(t), Changed: true}, suite.MigrateStatus(t, r))
	_, err = old.List(ctx, store.ListParams{})
	require.Error(t, err, "the shared role reads nothing")
	admin := suite.Connect(t, db)
	require.Zero(t, countRows(t, admin, `SELECT count(*) FROM unnest(ARRAY['keyledger.operations', 'keyledger.records', 'keyledger.state_edges']) t
		WHERE has_table_privilege($1, t, 'SELECT, INSERT, UPDATE')`, shared0), "the shared role keeps no table right")
	require.Zero(t, countRows(t, admin, `SELECT (has_column_privilege($1, 'keyledger.operations', 'state', 'UPDATE')
		OR has_schema_privilege($1, 'keyledger', 'USAGE'))::int`, shared0), "nor a column right, nor the schema")
	require.Equal(t, 1, countRows(t, admin, `SELECT count(*) FROM keyledger.operations WHERE finished_xact IS NOT NULL AND id = $1`, finished.ID))
	require.Equal(t, 1, countRows(t, admin, `SELECT count(*) FROM keyledger.operations WHERE finished_xact IS NULL AND id = $1`, open.ID))

	e.Journal = &platform.Journal{Name: suite.DBName(t, db), OwnerURL: db}
	roleURL := e.NamespaceRole(ns)
	st, err := store.Open(ctx, roleURL)
	require.NoError(t, err)
	defer st.Close()
	ops, err := st.List(ctx, store.ListParams{})
	require.NoError(t, err)
	require.Len(t, ops, 2, "the namespace's role sees its namespace's history")
	_, err = suite.Connect(t, roleURL).Exec(ctx, `INSERT INTO keyledger.records (operation_id, kind, step) VALUES ($1, 'observation', 'late')`, finished.ID)
	require.Equal(t, "42501", sqlState(err), "an operation finished before the migration stays finished: %v", err)
	_, err = st.Transition(ctx, store.TransitionParams{OperationID: open.ID, From: store.StatePrepared, To: store.StateCalling, Revision: open.Revision,
		Records: []store.Record{{Kind: store.RecordAuthorityCall, Step: "claim", Attempt: 1}}})
	require.NoError(t, err, "an open operation continues under its namespace's role")
}

// journal grant gives exactly the rights a run needs, as migrations 1 to 4
// gave the shared operator role, and the last revoke takes all of them:
// read from the catalog's access lists, table by table and column by column.
func TestIntegrationTenancyGrantsExactRights(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.OwnedJournal()
	ns := "tenant-r-" + suite.RandomSuffix(t)
	url := e.NamespaceRole(ns)
	role := suite.RoleOf(t, url)
	owner := suite.Connect(t, e.Journal.OwnerURL)
	rights := func() []string {
		rows, err := owner.Query(t.Context(), `
			SELECT 'schema ' || a.privilege_type FROM pg_namespace n, aclexplode(n.nspacl) a
			 WHERE n.nspname = 'keyledger' AND a.grantee = $1::regrole
			UNION ALL
			SELECT c.relname || ' ' || a.privilege_type FROM pg_class c, aclexplode(c.relacl) a
			 WHERE c.relnamespace = 'keyledger'::regnamespace AND a.grantee = $1::regrole
			UNION ALL
			SELECT c.relname || '.' || att.attname || ' ' || a.privilege_type
			  FROM pg_attribute att JOIN pg_class c ON c.oid = att.attrelid, aclexplode(att.attacl) a
			 WHERE c.relnamespace = 'keyledger'::regnamespace AND a.grantee = $1::regrole`, role)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return got
	}
	want := []string{
		"schema USAGE",
		"state_edges SELECT", "namespace_grants SELECT", "operations SELECT", "records SELECT",
		"operations.state UPDATE", "operations.outcome UPDATE", "operations.reason UPDATE",
	}
	for _, c := range []string{"kind", "mutation_id", "request_id", "command_digest", "target_namespace", "target_name", "expected_uid"} {
		want = append(want, "operations."+c+" INSERT")
	}
	for _, c := range []string{"operation_id", "kind", "step", "target", "attempt", "uid", "resource_version", "digest", "status", "reason", "detail", "batch", "final"} {
		want = append(want, "records."+c+" INSERT")
	}
	require.ElementsMatch(t, want, rights())

	r := e.Keyledger([]string{"journal", "revoke", role, ns}, suite.WithDatabase(e.Journal.OwnerURL))
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Empty(t, rights(), "the last revoke takes every right")
}
