package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// A Transition's records travel as one array per column (store's moveSQL,
// one text for any number of records, prepared once per session): every
// column of every record comes back as it was sent, in the order sent,
// over moves of one, none and several records on one session; an
// attempt and a batch are NULL where they are not counted (0 reads back);
// and a value out of the column's range is refused by the server, with
// nothing appended, where converting it on the way would have wrapped it
// into range.
func TestIntegrationJournalMoveRecordsRoundTrip(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	st := e.OperatorStore()
	op, _, err := st.Prepare(ctx, suite.ToyPreparation("mut-move-arrays", 1))
	require.NoError(t, err)

	digest := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	read := store.Record{Kind: store.RecordObservation, Step: "read", Target: store.SecretTarget(suite.ToyNamespace, "a"), UID: "uid-a", ResourceVersion: "41",
		Status: "found", Detail: store.DetailOf(map[string]any{"names": []string{"a", "b"}, "quote": `"x"`, "n": 3})}
	call := func(target store.Target, attempt, batch int, final bool) store.Record {
		return store.Record{Kind: store.RecordAuthorityCall, Step: "claim", Target: target, Attempt: attempt, UID: "uid-a",
			ResourceVersion: "41", Digest: digest, Batch: batch, Final: final, Detail: store.DetailOf(map[string]string{"nonce": "n-" + target.String()})}
	}
	moves := []struct {
		from, to store.State
		outcome  string
		records  []store.Record
	}{
		{store.StatePrepared, store.StateCalling, "", []store.Record{read, call(store.SecretTarget(suite.ToyNamespace, "a"), 1, 1, false)}},
		{store.StateCalling, store.StateCalling, "", nil},
		{store.StateCalling, store.StateCalling, "", []store.Record{call(store.SecretTarget(suite.ToyNamespace, "b"), 1, 2, false), call(store.SecretTarget(suite.ToyNamespace, "c"), 2, 2, false), call(store.SecretTarget(suite.ToyNamespace, "d"), 1000, 2, true)}},
	}
	want := []store.Record{{Kind: store.RecordPreparation}}
	for _, m := range moves {
		op, err = st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: m.from, To: m.to, Revision: op.Revision, Records: m.records})
		require.NoError(t, err, "%s -> %s with %d records", m.from, m.to, len(m.records))
		want = append(want, m.records...)
	}

	// Out of the attempt column's range (an integer): refused, not wrapped to 1.
	_, err = st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StateCalling, To: store.StateCalling, Revision: op.Revision,
		Records: []store.Record{call(store.SecretTarget(suite.ToyNamespace, "e"), 1<<32+1, 3, false)}})
	require.Error(t, err, "an attempt of 2^32+1 is refused")
	// Out of the batch column's range likewise.
	_, err = st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StateCalling, To: store.StateCalling, Revision: op.Revision,
		Records: []store.Record{call(store.SecretTarget(suite.ToyNamespace, "e"), 1, 1<<32+3, false)}})
	require.Error(t, err, "a batch of 2^32+3 is refused")
	// A target the journal would not read back ("secret/", no name) is
	// refused before anything is sent.
	_, err = st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StateCalling, To: store.StateCalling, Revision: op.Revision,
		Records: []store.Record{call(store.Target{Kind: store.TargetSecret, Namespace: suite.ToyNamespace}, 1, 4, false)}})
	require.ErrorContains(t, err, `target is not <kind>/<name>`)

	got, records, err := st.Snapshot(ctx, "", "mut-move-arrays")
	require.NoError(t, err)
	require.Equal(t, op.Revision, got.Revision, "the refused moves moved nothing")
	require.Len(t, records, len(want), "every record sent, and none of the refused moves'")
	for i, r := range records {
		if i > 0 {
			require.Greater(t, r.ID, records[i-1].ID, "record %d: in the order sent", i)
		}
		if i == 0 {
			require.Equal(t, store.RecordPreparation, r.Kind)
			continue
		}
		w := want[i]
		require.Equal(t, []any{w.Kind, w.Step, w.Target, w.Attempt, w.UID, w.ResourceVersion, w.Digest, w.Status, w.Reason, w.Batch, w.Final},
			[]any{r.Kind, r.Step, r.Target, r.Attempt, r.UID, r.ResourceVersion, r.Digest, r.Status, r.Reason, r.Batch, r.Final}, "record %d", i)
		require.JSONEq(t, string(w.Detail.JSON()), string(r.Detail.JSON()), "record %d: its detail", i)
	}

	// NULL where not counted: the observation's attempt and batch.
	var nulls int
	require.NoError(t, suite.Connect(t, e.Journal.OperatorURL).QueryRow(ctx,
		`SELECT count(*) FROM keyledger.records WHERE operation_id = $1 AND kind = 'observation' AND attempt IS NULL AND batch IS NULL`, op.ID).Scan(&nulls))
	require.Equal(t, 1, nulls, "the observation's attempt and batch are NULL")

	// The target column holds the text "<kind>/<name>", as it always has;
	// the namespace comes back from the operation.
	var texts []string
	require.NoError(t, suite.Connect(t, e.Journal.OperatorURL).QueryRow(ctx,
		`SELECT array_agg(target ORDER BY id) FROM keyledger.records WHERE operation_id = $1 AND kind <> 'preparation'`, op.ID).Scan(&texts))
	require.Equal(t, []string{"secret/a", "secret/a", "secret/b", "secret/c", "secret/d"}, texts)

	// A row whose target is not "<kind>/<name>" (written around keyledger)
	// is not read as some target: the read fails naming the record.
	var forged int64
	require.NoError(t, suite.Connect(t, e.Journal.OperatorURL).QueryRow(ctx,
		`INSERT INTO keyledger.records (operation_id, kind, step, target) VALUES ($1, 'observation', 'forged', 'secret') RETURNING id`, op.ID).Scan(&forged))
	_, _, err = st.Snapshot(ctx, "", "mut-move-arrays")
	require.ErrorContains(t, err, fmt.Sprintf(`decoding record %d target: target is not <kind>/<name>`, forged))
}
