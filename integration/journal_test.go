package integration

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// `keyledger migrate` takes a fresh database up and down and up again, and
// reports the version. The test's journal holds grants (setup granted the
// operator role its namespaces) but no operation: going down from 5, which
// drops the grant history, takes --destroy-journal-records; going down from
// 1 on a journal without operations or records does not.
func TestIntegrationJournalMigrateUpDown(t *testing.T) {
	t.Parallel()
	e := setup(t)
	owner := suite.WithDatabase(e.Journal.OwnerURL)
	latest := fmt.Sprintf(`"version":%d`, suite.LatestVersion(t))
	steps := []struct {
		args   []string
		code   int
		want   string
		tables int
	}{
		{[]string{"migrate", "version"}, 0, latest + `,"dirty":false,"changed":false`, 2},
		{[]string{"migrate", "down"}, 0, `"version":12,"dirty":false,"changed":true`, 2},
		{[]string{"migrate", "down"}, 0, `"version":11,"dirty":false,"changed":true`, 2},
		{[]string{"migrate", "down"}, 0, `"version":10,"dirty":false,"changed":true`, 2},
		{[]string{"migrate", "down"}, 0, `"version":9,"dirty":false,"changed":true`, 2},
		{[]string{"migrate", "down"}, 0, `"version":8,"dirty":false,"changed":true`, 2},
		{[]string{"migrate", "down"}, 0, `"version":7,"dirty":false,"changed":true`, 2},
		{[]string{"migrate", "down"}, 0, `"version":6,"dirty":false,"changed":true`, 2},
		{[]string{"migrate", "down"}, 0, `"version":5,"dirty":false,"changed":true`, 2},
		{[]string{"migrate", "down"}, 64, "journal-not-empty", 2},
		{[]string{"migrate", "down", "--destroy-journal-records"}, 0, `"version":4,"dirty":false,"changed":true`, 2},
		{[]string{"migrate", "down"}, 0, `"version":3,"dirty":false,"changed":true`, 2},
		{[]string{"migrate", "down"}, 0, `"version":2,"dirty":false,"changed":true`, 2},
		{[]string{"migrate", "down"}, 0, `"version":1,"dirty":false,"changed":true`, 2},
		{[]string{"migrate", "down"}, 0, `"version":0,"dirty":false,"changed":true`, 0},
		{[]string{"migrate", "version"}, 0, `"version":0,"dirty":false,"changed":false`, 0},
		{[]string{"migrate", "down"}, 0, `"version":0,"dirty":false,"changed":false`, 0},
		{[]string{"migrate", "up"}, 0, latest + `,"dirty":false,"changed":true`, 2},
		{[]string{"migrate", "up"}, 0, latest + `,"dirty":false,"changed":false`, 2},
	}
	conn := suite.Connect(t, e.Journal.OwnerURL)
	for _, s := range steps {
		r := e.Keyledger(s.args, owner)
		require.Equal(t, s.code, r.Code, "%v: %s", s.args, r.Stderr)
		require.Contains(t, r.Stdout+r.Stderr, s.want, "%v", s.args)
		var tables int
		require.NoError(t, conn.QueryRow(t.Context(),
			`SELECT count(*) FROM information_schema.tables WHERE table_schema = 'keyledger' AND table_name IN ('operations', 'records')`).Scan(&tables))
		require.Equal(t, s.tables, tables, "%v: journal tables present", s.args)
	}
	r := e.Keyledger([]string{"migrate", "sideways"}, owner)
	require.Equal(t, 64, r.Code)
	r = e.Keyledger([]string{"migrate", "up", "--destroy-journal-records"}, owner)
	require.Equal(t, 64, r.Code, "the flag names a down step's destruction only: %s", r.Stderr)
}

// The journal refuses what the engine must never do, whoever asks.
func TestIntegrationJournalIsAppendOnly(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	st := e.OperatorStore()
	prep := suite.ToyPreparation("mut-journal", 1)
	op, created, err := st.Prepare(ctx, prep)
	require.NoError(t, err)
	require.True(t, created)
	again, created, err := st.Prepare(ctx, prep)
	require.NoError(t, err, "same digest resumes")
	require.False(t, created)
	require.Equal(t, op.ID, again.ID)
	other := prep
	other.CommandDigest = suite.ToyPreparation("mut-journal", 2).CommandDigest
	_, _, err = st.Prepare(ctx, other)
	require.ErrorIs(t, err, store.ErrDigestMismatch)

	for _, who := range []struct{ name, url string }{{"operator", e.Journal.OperatorURL}, {"owner", e.Journal.OwnerURL}} {
		conn := suite.Connect(t, who.url)
		_, err := conn.Exec(ctx, `UPDATE keyledger.records SET reason = 'tampered' WHERE operation_id = $1`, op.ID)
		require.Error(t, err, "%s: UPDATE of a record", who.name)
		_, err = conn.Exec(ctx, `DELETE FROM keyledger.records WHERE operation_id = $1`, op.ID)
		require.Error(t, err, "%s: DELETE of a record", who.name)
		_, err = conn.Exec(ctx, `DELETE FROM keyledger.operations WHERE id = $1`, op.ID)
		require.Error(t, err, "%s: DELETE of an operation", who.name)
		_, err = conn.Exec(ctx, `INSERT INTO keyledger.records (operation_id, kind, step) VALUES ($1, 'preparation', 'preparation')`, op.ID)
		require.Equal(t, "23505", sqlState(err), "%s: a second preparation violates the unique index: %v", who.name, err)
		_, err = conn.Exec(ctx, `UPDATE keyledger.operations SET command_digest = $2 WHERE id = $1`, op.ID, other.CommandDigest)
		require.Error(t, err, "%s: prepared fields are immutable", who.name)
		_, err = conn.Exec(ctx, `UPDATE keyledger.operations SET state = 'answered' WHERE id = $1`, op.ID)
		require.Error(t, err, "%s: prepared -> answered is not an edge", who.name)
	}
	operator := suite.Connect(t, e.Journal.OperatorURL)
	_, err = operator.Exec(ctx, `TRUNCATE keyledger.records`)
	require.Error(t, err, "the operator cannot truncate")
	_, err = operator.Exec(ctx, `CREATE TABLE keyledger.extra (id int)`)
	require.Error(t, err, "the operator runs no DDL")
	_, err = operator.Exec(ctx, `UPDATE keyledger.operations SET finalized_at = now() WHERE id = $1`, op.ID)
	require.Error(t, err, "a finalized time without a terminal state violates the CHECK")

	// A terminal operation never moves again, and carries one ending.
	op, err = st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateRefused, Revision: op.Revision,
		Outcome: "refused", Reason: "test-refusal", Records: []store.Record{{Kind: store.RecordRefusal, Step: "refuse", Reason: "test-refusal"}}})
	require.NoError(t, err)
	require.NotNil(t, op.FinalizedAt)
	_, err = st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StateRefused, To: store.StateRefused, Revision: op.Revision,
		Records: []store.Record{{Kind: store.RecordCompletion, Step: "complete"}}})
	require.Error(t, err, "a final operation takes no more records through a state move")
	_, err = operator.Exec(ctx, `INSERT INTO keyledger.records (operation_id, kind, step) VALUES ($1, 'observation', 'late')`, op.ID)
	require.Equal(t, "42501", sqlState(err), "nothing is appended to a final operation: %v", err)
	// A second ending breaks the one-ending index too, which (since
	// migration 11 checks finality after the row's constraints) refuses it
	// first.
	_, err = operator.Exec(ctx, `INSERT INTO keyledger.records (operation_id, kind, step) VALUES ($1, 'completion', 'complete')`, op.ID)
	require.Equal(t, "23505", sqlState(err), "a second ending on a final operation: %v", err)
	_, err = st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCalling})
	require.ErrorIs(t, err, store.ErrStateMoved)
}

// A process whose view of an operation went stale cannot act on it, even
// when the state has come back to the one it saw (calling -> resolving ->
// calling): every move is a compare-and-set on state and revision. Without
// the revision a stale process would record a call with an attempt number
// another process had already used (found by 16 concurrent retirements).
func TestIntegrationJournalStaleViewCannotMove(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	st := e.OperatorStore()
	op, _, err := st.Prepare(ctx, suite.ToyPreparation("mut-aba", 3))
	require.NoError(t, err)
	call := func(attempt int) []store.Record {
		return []store.Record{{Kind: store.RecordAuthorityCall, Step: "claim", Attempt: attempt}}
	}
	move := func(op *store.Operation, to store.State, records []store.Record) (*store.Operation, error) {
		return st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: op.State, To: to, Revision: op.Revision, Records: records})
	}
	a, err := move(op, store.StateCalling, call(1))
	require.NoError(t, err)
	stale := *a // another process's view: calling, attempt 1 outstanding

	b, err := move(a, store.StateResolving, []store.Record{{Kind: store.RecordAuthorityResult, Step: "claim", Status: "lost"}})
	require.NoError(t, err)
	b, err = move(b, store.StateCalling, call(2))
	require.NoError(t, err)
	require.Equal(t, stale.State, b.State, "the state came back to what the stale view saw")
	require.Greater(t, b.Revision, stale.Revision)

	_, err = move(&stale, store.StateResolving, []store.Record{{Kind: store.RecordAuthorityResult, Step: "claim", Status: "lost"}})
	require.ErrorIs(t, err, store.ErrStateMoved, "a stale view must reload, not act")
	_, err = st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: stale.State, To: stale.State, Revision: stale.Revision,
		Records: []store.Record{{Kind: store.RecordResolution, Step: "claim"}}})
	require.ErrorIs(t, err, store.ErrStateMoved, "nor append to it")
	records, err := st.Records(ctx, op.ID)
	require.NoError(t, err)
	require.Len(t, records, 4, "preparation, call 1, lost, call 2: nothing from the stale view")
}

// Snapshot pairs a state with exactly the records that led to it, while
// another process keeps moving the operation. (A state read apart from its
// records let a concurrent run see "resolving" with the "ours" resolution
// that had already ended it, and stop with "resolving without an open
// call".) Every move here appends one record, so a consistent view always
// has revision+1 records.
func TestIntegrationJournalSnapshotIsConsistent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	st := e.OperatorStore()
	op, _, err := st.Prepare(ctx, suite.ToyPreparation("mut-snap", 4))
	require.NoError(t, err)

	const moves = 100
	done := make(chan error, 1)
	go func() {
		cur := op
		for i := range moves {
			to, kind := store.StateCalling, store.RecordAuthorityCall
			if cur.State == store.StateCalling {
				to, kind = store.StateResolving, store.RecordAuthorityResult
			}
			rec := store.Record{Kind: kind, Step: "claim"}
			if kind == store.RecordAuthorityCall {
				rec.Attempt = i/2 + 1
			}
			next, err := st.Transition(ctx, store.TransitionParams{OperationID: cur.ID, From: cur.State, To: to, Revision: cur.Revision,
				Records: []store.Record{rec}})
			if err != nil {
				done <- err
				return
			}
			cur = next
		}
		done <- nil
	}()
	snapshots := 0
	for {
		select {
		case err := <-done:
			require.NoError(t, err)
			require.Positive(t, snapshots)
			return
		default:
		}
		got, records, err := st.Snapshot(ctx, "", "mut-snap")
		require.NoError(t, err)
		require.Len(t, records, int(got.Revision)+1, "state %s at revision %d", got.State, got.Revision)
		snapshots++
	}
}

// The state edges in Go and in SQL are the same set.
func TestIntegrationJournalEdgesMatchGo(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rows, err := suite.Connect(t, e.Journal.OperatorURL).Query(t.Context(), `SELECT from_state::text, to_state::text FROM keyledger.state_edges`)
	require.NoError(t, err)
	sqlEdges, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Edge, error) {
		var from, to string
		err := r.Scan(&from, &to)
		return store.Edge{From: store.State(from), To: store.State(to)}, err
	})
	require.NoError(t, err)
	require.ElementsMatch(t, store.Edges(), sqlEdges)

	var enumStates []string
	require.NoError(t, suite.Connect(t, e.Journal.OperatorURL).QueryRow(t.Context(),
		`SELECT array_agg(v::text ORDER BY v) FROM unnest(enum_range(NULL::keyledger.operation_state)) v`).Scan(&enumStates))
	var goStates []string
	for _, s := range store.States() {
		goStates = append(goStates, string(s))
	}
	require.Equal(t, goStates, enumStates)
	var enumKinds []string
	require.NoError(t, suite.Connect(t, e.Journal.OperatorURL).QueryRow(t.Context(),
		`SELECT array_agg(v::text ORDER BY v) FROM unnest(enum_range(NULL::keyledger.record_kind)) v`).Scan(&enumKinds))
	var goKinds []string
	for _, k := range store.RecordKinds() {
		goKinds = append(goKinds, string(k))
	}
	require.Equal(t, goKinds, enumKinds)
}

// The role that appends to the journal cannot shape it: ids and times are
// the database's whatever the INSERT says, nothing is appended to a finished
// operation, and an operation ends only in the transaction that appends its
// ending. Each is tried as the operator role (and, where the operator is
// refused by its rights, as the schema owner too).
func TestIntegrationJournalOperatorCannotShapeIt(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	st := e.OperatorStore()
	operator := suite.Connect(t, e.Journal.OperatorURL)
	owner := suite.Connect(t, e.Journal.OwnerURL)
	op, _, err := st.Prepare(ctx, suite.ToyPreparation("mut-shape", 5))
	require.NoError(t, err)
	const digest = "sha256:0000000000000000000000000000000000000000000000000000000000000006"

	// Chosen ids and times: the operator may not name those columns.
	for name, sql := range map[string]string{
		"operation id": `INSERT INTO keyledger.operations (id, kind, mutation_id, request_id, command_digest, target_namespace, target_name)
			OVERRIDING SYSTEM VALUE VALUES (-5, 'ToyClaim', 'mut-forged', 'r', '` + digest + `', 'ns', 'n')`,
		"operation time": `INSERT INTO keyledger.operations (kind, mutation_id, request_id, command_digest, target_namespace, target_name, created_at)
			VALUES ('ToyClaim', 'mut-forged', 'r', '` + digest + `', 'ns', 'n', '2000-01-01')`,
		"record id": `INSERT INTO keyledger.records (id, operation_id, kind, step) OVERRIDING SYSTEM VALUE
			VALUES (-7, ` + fmt.Sprint(op.ID) + `, 'observation', 'read')`,
		"record time": `INSERT INTO keyledger.records (operation_id, kind, step, created_at)
			VALUES (` + fmt.Sprint(op.ID) + `, 'observation', 'read', '2000-01-01')`,
		"finalized time": `UPDATE keyledger.operations SET finalized_at = '2000-01-01' WHERE id = ` + fmt.Sprint(op.ID),
		"updated time":   `UPDATE keyledger.operations SET updated_at = '2000-01-01' WHERE id = ` + fmt.Sprint(op.ID),
	} {
		_, err := operator.Exec(ctx, sql)
		require.Equal(t, "42501", sqlState(err), "operator: %s: %v", name, err)
	}
	// The owner may name them; the database overwrites them.
	var id int64
	var created time.Time
	require.NoError(t, owner.QueryRow(ctx, `INSERT INTO keyledger.records (id, operation_id, kind, step, created_at) OVERRIDING SYSTEM VALUE
		VALUES (-7, $1, 'observation', 'read', '2000-01-01') RETURNING id, created_at`, op.ID).Scan(&id, &created))
	records, err := st.Records(ctx, op.ID)
	require.NoError(t, err)
	require.Greater(t, id, records[0].ID, "the record sorts after the preparation, whatever id was asked for")
	require.True(t, created.After(op.CreatedAt) || created.Equal(op.CreatedAt), "created_at is the database's: %s", created)
	require.NoError(t, owner.QueryRow(ctx, `INSERT INTO keyledger.operations (id, kind, mutation_id, request_id, command_digest, target_namespace, target_name, created_at)
		OVERRIDING SYSTEM VALUE VALUES (-5, 'ToyClaim', 'mut-owner', 'r', $1, 'ns', 'n', '2000-01-01') RETURNING id, created_at`, digest).Scan(&id, &created))
	require.Greater(t, id, op.ID)
	require.False(t, created.Before(op.CreatedAt), "created_at is the database's: %s", created)

	// No terminal state without its ending, no ending without the move.
	for name, stmts := range map[string][]string{
		"completed without a completion": {`UPDATE keyledger.operations SET state = 'completed', outcome = 'completed' WHERE id = $1`},
		"refused without a refusal":      {`UPDATE keyledger.operations SET state = 'refused', outcome = 'refused' WHERE id = $1`},
		"a completion without the move":  {`INSERT INTO keyledger.records (operation_id, kind, step) VALUES ($1, 'completion', 'complete')`},
		"a refusal without the move":     {`INSERT INTO keyledger.records (operation_id, kind, step) VALUES ($1, 'refusal', 'refuse')`},
		"refused with a completion": {`UPDATE keyledger.operations SET state = 'refused', outcome = 'refused' WHERE id = $1`,
			`INSERT INTO keyledger.records (operation_id, kind, step) VALUES ($1, 'completion', 'complete')`},
	} {
		err := pgx.BeginFunc(ctx, operator, func(tx pgx.Tx) error {
			for _, sql := range stmts {
				if _, err := tx.Exec(ctx, sql, op.ID); err != nil {
					return err
				}
			}
			return nil
		})
		require.Equal(t, "23000", sqlState(err), "%s: %v", name, err)
	}
	_, err = st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCompleted,
		Revision: op.Revision, Outcome: "completed"})
	require.Error(t, err, "the store cannot complete without a completion record either")
	again, err := st.Load(ctx, "", op.MutationID)
	require.NoError(t, err)
	require.Equal(t, store.StatePrepared, again.State)

	// The same transaction may end it and append after its ending.
	done, err := st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCompleted,
		Revision: op.Revision, Outcome: "completed", Records: []store.Record{
			{Kind: store.RecordObservation, Step: "read"}, {Kind: store.RecordCompletion, Step: "complete"}}})
	require.NoError(t, err)
	require.NotNil(t, done.FinalizedAt)

	// Nothing is appended to it afterwards, by anyone.
	for _, who := range []struct {
		name string
		conn *pgx.Conn
	}{{"operator", operator}, {"owner", owner}} {
		_, err := who.conn.Exec(ctx, `INSERT INTO keyledger.records (operation_id, kind, step) VALUES ($1, 'observation', 'late')`, op.ID)
		require.Equal(t, "42501", sqlState(err), "%s: append to a finished operation: %v", who.name, err)
	}
	final, err := st.Records(ctx, op.ID)
	require.NoError(t, err)
	require.Equal(t, store.RecordCompletion, final[len(final)-1].Kind)
}

// An append racing the transaction that finishes the operation waits for it
// and is then refused: the check locks the operation row.
func TestIntegrationJournalAppendWaitsForTheEnding(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	st := e.OperatorStore()
	op, _, err := st.Prepare(ctx, suite.ToyPreparation("mut-race-end", 7))
	require.NoError(t, err)
	ender := suite.Connect(t, e.Journal.OperatorURL)
	late := suite.Connect(t, e.Journal.OperatorURL)
	watcher := suite.Connect(t, e.Journal.OperatorURL)
	latePID := late.PgConn().PID()

	tx, err := ender.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE keyledger.operations SET state = 'refused', outcome = 'refused', reason = 'test' WHERE id = $1`, op.ID)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO keyledger.records (operation_id, kind, step, reason) VALUES ($1, 'refusal', 'refuse', 'test')`, op.ID)
	require.NoError(t, err)

	appended := make(chan error, 1)
	go func() {
		_, err := late.Exec(ctx, `INSERT INTO keyledger.records (operation_id, kind, step) VALUES ($1, 'observation', 'late')`, op.ID)
		appended <- err
	}()
	// Wait until the late append is blocked on the operation row's lock.
	for {
		var waiting bool
		require.NoError(t, watcher.QueryRow(ctx,
			`SELECT coalesce(bool_or(wait_event_type = 'Lock'), false) FROM pg_stat_activity WHERE pid = $1`, latePID).Scan(&waiting))
		if waiting {
			break
		}
		select {
		case err := <-appended:
			t.Fatalf("the late append did not wait for the ending transaction: %v", err)
		default:
		}
	}
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, "42501", sqlState(<-appended), "the late append sees the ending and is refused")
}

// The append-after-final guard runs once per INSERT statement, over every
// record it appends (migration 11), not once per record: a statement of 50
// records calls it once (EXPLAIN ANALYZE counts the calls, as the role
// that appends). A statement that appends to an open operation and to a
// finished one is refused whole, and one that appends only to the open
// one is not.
func TestIntegrationJournalAppendGuardOncePerStatement(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	st := e.OperatorStore()
	open, _, err := st.Prepare(ctx, suite.ToyPreparation("mut-guard-open", 13))
	require.NoError(t, err)
	done, _, err := st.Prepare(ctx, suite.ToyPreparation("mut-guard-done", 14))
	require.NoError(t, err)
	_, err = st.Transition(ctx, store.TransitionParams{OperationID: done.ID, From: store.StatePrepared, To: store.StateRefused, Revision: done.Revision,
		Outcome: "refused", Reason: "test-refusal", Records: []store.Record{{Kind: store.RecordRefusal, Step: "refuse", Reason: "test-refusal"}}})
	require.NoError(t, err)
	operator := suite.Connect(t, e.Journal.OperatorURL)
	const appendTo = `INSERT INTO keyledger.records (operation_id, kind, step, target)
		SELECT op, 'observation', 'read', 'n-' || g FROM unnest($1::bigint[]) op, generate_series(1, $2::int) g`

	tx, err := operator.Begin(ctx)
	require.NoError(t, err)
	var plan []struct {
		Triggers []struct {
			Name  string `json:"Trigger Name"`
			Calls int    `json:"Calls"`
		} `json:"Triggers"`
	}
	require.NoError(t, tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+appendTo, []int64{open.ID}, 50).Scan(&plan))
	require.NoError(t, tx.Rollback(ctx))
	require.Len(t, plan, 1)
	calls := map[string]int{}
	for _, tr := range plan[0].Triggers {
		calls[tr.Name] = tr.Calls
	}
	require.Equal(t, 1, calls["records_b_not_final"], "the guard runs once for 50 records: %v", calls)
	require.Equal(t, 50, calls["records_a_stamp"], "each record is still stamped: %v", calls)

	before := countRows(t, operator, `SELECT count(*) FROM keyledger.records WHERE operation_id = $1`, open.ID)
	_, err = operator.Exec(ctx, appendTo, []int64{open.ID, done.ID}, 3)
	require.Equal(t, "42501", sqlState(err), "an append that reaches a finished operation is refused: %v", err)
	require.Contains(t, err.Error(), "mut-guard-done is final")
	require.Equal(t, before, countRows(t, operator, `SELECT count(*) FROM keyledger.records WHERE operation_id = $1`, open.ID),
		"nothing of the refused statement is appended, to the open operation either")
	_, err = operator.Exec(ctx, appendTo, []int64{open.ID}, 3)
	require.NoError(t, err)
	require.Equal(t, before+3, countRows(t, operator, `SELECT count(*) FROM keyledger.records WHERE operation_id = $1`, open.ID))
}

// Every function in the journal schema runs with a pinned search_path, so
// no object a session puts first in its own search_path (a temporary table
// called state_edges, say) can stand in for the journal's. Tried: a session
// that shadows state_edges with a table allowing every move still cannot
// skip an edge.
func TestIntegrationJournalFunctionsPinSearchPath(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	owner := suite.Connect(t, e.Journal.OwnerURL)
	rows, err := owner.Query(ctx, `SELECT p.proname, coalesce(array_to_string(p.proconfig, ','), '')
		FROM pg_proc p WHERE p.pronamespace = 'keyledger'::regnamespace`)
	require.NoError(t, err)
	functions := map[string]string{}
	for rows.Next() {
		var name, config string
		require.NoError(t, rows.Scan(&name, &config))
		functions[name] = config
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, functions)
	for name, config := range functions {
		require.Contains(t, config, "search_path=pg_catalog, pg_temp", "function %s", name)
	}

	st := e.OperatorStore()
	op, _, err := st.Prepare(ctx, suite.ToyPreparation("mut-path", 8))
	require.NoError(t, err)
	operator := suite.Connect(t, e.Journal.OperatorURL)
	_, err = operator.Exec(ctx, `CREATE TEMPORARY TABLE state_edges AS
		SELECT a.v AS from_state, b.v AS to_state
		FROM unnest(enum_range(NULL::keyledger.operation_state)) a(v), unnest(enum_range(NULL::keyledger.operation_state)) b(v)`)
	require.NoError(t, err)
	_, err = operator.Exec(ctx, `SET search_path = pg_temp, keyledger, public`)
	require.NoError(t, err)
	_, err = operator.Exec(ctx, `UPDATE keyledger.operations SET state = 'answered' WHERE id = $1`, op.ID)
	require.Equal(t, "23514", sqlState(err), "prepared -> answered is still no edge: %v", err)
}

// A write the journal refuses ends its transaction on the session that
// sent it, which stays open for the next one: a Transition whose
// compare-and-set matches nothing (its head), one whose record is refused
// (its tail, whose COMMIT is then never run), one refused at COMMIT (the
// deferred ending check) and a Prepare of a taken mutation ID each leave
// the store's session idle, not in a transaction, and the same session
// (no reconnect) carries the next write. Each failure commits nothing.
func TestIntegrationJournalFailedWriteEndsItsTransaction(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	st := e.OperatorStore()
	watch := suite.Connect(t, e.Journal.OperatorURL)
	// The store's sessions (the role's in this database, but this one) and
	// whether any is inside a transaction.
	sessions := func() (pids []int32, inTx int) {
		t.Helper()
		rows, err := watch.Query(ctx, `SELECT pid, coalesce(state, '') LIKE 'idle in transaction%'
			FROM pg_stat_activity WHERE datname = current_database() AND usename = current_user AND pid <> pg_backend_pid() ORDER BY pid`)
		require.NoError(t, err)
		for rows.Next() {
			var pid int32
			var open bool
			require.NoError(t, rows.Scan(&pid, &open))
			pids = append(pids, pid)
			if open {
				inTx++
			}
		}
		require.NoError(t, rows.Err())
		return pids, inTx
	}
	op, _, err := st.Prepare(ctx, suite.ToyPreparation("mut-failed-write", 1))
	require.NoError(t, err)
	before, _ := sessions()
	require.Len(t, before, 1, "one session serves the store")
	committed := st.Transactions()

	failures := []struct {
		name string
		do   func() error
		want func(error)
	}{
		{"stale revision", func() error {
			_, err := st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCalling, Revision: op.Revision + 1,
				Records: []store.Record{{Kind: store.RecordAuthorityCall, Step: "claim", Attempt: 1}}})
			return err
		}, func(err error) { require.ErrorIs(t, err, store.ErrStateMoved) }},
		{"refused record", func() error {
			_, err := st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCalling, Revision: op.Revision,
				Records: []store.Record{{Kind: store.RecordObservation, Step: "read"}, {Kind: store.RecordAuthorityCall, Step: "Not-A-Step", Attempt: 1}}})
			return err
		}, func(err error) {
			require.EqualError(t, err, "appending authority_call record: server error 23514 (ERROR) on records_step_check")
		}},
		{"refused at commit", func() error {
			_, err := st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCompleted, Revision: op.Revision,
				Outcome: "done", Records: []store.Record{{Kind: store.RecordObservation, Step: "read"}}})
			return err
		}, func(err error) { require.Contains(t, err.Error(), "committing transaction: server error 23000") }},
		{"taken mutation ID", func() error {
			_, _, err := st.Prepare(ctx, suite.ToyPreparation("mut-failed-write", 2))
			return err
		}, func(err error) { require.ErrorIs(t, err, store.ErrDigestMismatch) }},
	}
	for _, f := range failures {
		f.want(f.do())
		pids, inTx := sessions()
		require.Equal(t, before, pids, "%s: the same session, not a new one", f.name)
		require.Zero(t, inTx, "%s: the session is not left in a transaction", f.name)
		require.Equal(t, committed, st.Transactions(), "%s: nothing committed", f.name)
	}
	records, err := st.Records(ctx, op.ID)
	require.NoError(t, err)
	require.Len(t, records, 1, "only the preparation")

	moved, err := st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCalling, Revision: op.Revision,
		Records: []store.Record{{Kind: store.RecordAuthorityCall, Step: "claim", Attempt: 1}}})
	require.NoError(t, err)
	require.Equal(t, op.Revision+1, moved.Revision)
	pids, inTx := sessions()
	require.Equal(t, before, pids)
	require.Zero(t, inTx)
	require.Equal(t, committed+1, st.Transactions())
}
