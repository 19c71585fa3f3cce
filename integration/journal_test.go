package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
)

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// operatorStore opens the test's journal as the operator role, as a run does.
func (e *env) operatorStore() *store.Store {
	e.t.Helper()
	st, err := store.Open(e.t.Context(), e.journal.OperatorURL)
	require.NoError(e.t, err)
	e.t.Cleanup(st.Close)
	return st
}

// toyPreparation is a journal-only operation; n makes its command digest.
func toyPreparation(mutation string, n int) store.PrepareParams {
	return store.PrepareParams{Kind: "ToyClaim", MutationID: mutation, RequestID: "req-" + mutation,
		CommandDigest: "sha256:" + fmt.Sprintf("%064d", n), Namespace: "ns", Name: "name"}
}

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// `keyledger migrate` takes a fresh database up and down and up again, and
// reports the version.
func TestIntegrationJournalMigrateUpDown(t *testing.T) {
	t.Parallel()
	e := setup(t)
	owner := withDatabase(e.journal.OwnerURL)
	steps := []struct {
		args   []string
		want   string
		tables int
	}{
		{[]string{"migrate", "version"}, `"version":1,"dirty":false,"changed":false`, 2},
		{[]string{"migrate", "down"}, `"version":0,"dirty":false,"changed":true`, 0},
		{[]string{"migrate", "version"}, `"version":0,"dirty":false,"changed":false`, 0},
		{[]string{"migrate", "down"}, `"version":0,"dirty":false,"changed":false`, 0},
		{[]string{"migrate", "up"}, `"version":1,"dirty":false,"changed":true`, 2},
		{[]string{"migrate", "up"}, `"version":1,"dirty":false,"changed":false`, 2},
	}
	conn := connect(t, e.journal.OwnerURL)
	for _, s := range steps {
		r := e.keyledger(s.args, owner)
		require.Equal(t, 0, r.Code, "%v: %s", s.args, r.Stderr)
		require.Contains(t, r.Stdout, s.want, "%v", s.args)
		var tables int
		require.NoError(t, conn.QueryRow(t.Context(),
			`SELECT count(*) FROM information_schema.tables WHERE table_schema = 'keyledger' AND table_name IN ('operations', 'records')`).Scan(&tables))
		require.Equal(t, s.tables, tables, "%v: journal tables present", s.args)
	}
	r := e.keyledger([]string{"migrate", "sideways"}, owner)
	require.Equal(t, 64, r.Code)
}

// The journal refuses what the engine must never do, whoever asks.
func TestIntegrationJournalIsAppendOnly(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	st := e.operatorStore()
	prep := toyPreparation("mut-journal", 1)
	op, created, err := st.Prepare(ctx, prep)
	require.NoError(t, err)
	require.True(t, created)
	again, created, err := st.Prepare(ctx, prep)
	require.NoError(t, err, "same digest resumes")
	require.False(t, created)
	require.Equal(t, op.ID, again.ID)
	other := prep
	other.CommandDigest = toyPreparation("mut-journal", 2).CommandDigest
	_, _, err = st.Prepare(ctx, other)
	require.ErrorIs(t, err, store.ErrDigestMismatch)

	for _, who := range []struct{ name, url string }{{"operator", e.journal.OperatorURL}, {"owner", e.journal.OwnerURL}} {
		conn := connect(t, who.url)
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
	operator := connect(t, e.journal.OperatorURL)
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
	_, err = operator.Exec(ctx, `INSERT INTO keyledger.records (operation_id, kind, step) VALUES ($1, 'completion', 'complete')`, op.ID)
	require.Equal(t, "23505", sqlState(err), "one ending per operation: %v", err)
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
	st := e.operatorStore()
	op, _, err := st.Prepare(ctx, toyPreparation("mut-aba", 3))
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
	st := e.operatorStore()
	op, _, err := st.Prepare(ctx, toyPreparation("mut-snap", 4))
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
		got, records, err := st.Snapshot(ctx, "mut-snap")
		require.NoError(t, err)
		require.Len(t, records, int(got.Revision)+1, "state %s at revision %d", got.State, got.Revision)
		snapshots++
	}
}

// The state edges in Go and in SQL are the same set.
func TestIntegrationJournalEdgesMatchGo(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rows, err := connect(t, e.journal.OperatorURL).Query(t.Context(), `SELECT from_state::text, to_state::text FROM keyledger.state_edges`)
	require.NoError(t, err)
	sqlEdges, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Edge, error) {
		var from, to string
		err := r.Scan(&from, &to)
		return store.Edge{From: store.State(from), To: store.State(to)}, err
	})
	require.NoError(t, err)
	require.ElementsMatch(t, store.Edges(), sqlEdges)

	var enumStates []string
	require.NoError(t, connect(t, e.journal.OperatorURL).QueryRow(t.Context(),
		`SELECT array_agg(v::text ORDER BY v) FROM unnest(enum_range(NULL::keyledger.operation_state)) v`).Scan(&enumStates))
	var goStates []string
	for _, s := range store.States() {
		goStates = append(goStates, string(s))
	}
	require.Equal(t, goStates, enumStates)
	var enumKinds []string
	require.NoError(t, connect(t, e.journal.OperatorURL).QueryRow(t.Context(),
		`SELECT array_agg(v::text ORDER BY v) FROM unnest(enum_range(NULL::keyledger.record_kind)) v`).Scan(&enumKinds))
	var goKinds []string
	for _, k := range store.RecordKinds() {
		goKinds = append(goKinds, string(k))
	}
	require.Equal(t, goKinds, enumKinds)
}
