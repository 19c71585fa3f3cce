package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/migrations"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// TestBenchAppendGuard measures what migration 11 (the append-after-final
// guard once per INSERT statement instead of once per record) changes,
// against a journal taken down to migration 10 on the same server,
// interleaved: an INSERT of 200 records in one statement as the role a run
// journals as (about what a 64-Secret plan appends over a run), rolled
// back, and a retirement run and a versioned update at the retention limit
// as processes (transactions of one to a few records each: what a small
// append pays).
func TestBenchAppendGuard(t *testing.T) {
	benchEnabled(t)
	e := suite.Setup(t)
	ctx := t.Context()
	old, err := suite.Postgres().NewJournal(ctx, "kl_"+suite.RandomSuffix(t), e.NS, suite.ToyNamespace)
	require.NoError(t, err)
	// Down to migration 10 (12, the namespace keys, then 11, the guard),
	// and migration 12 put back by hand: the runs below need its keys, and
	// it does not touch the append guard, so the two journals differ in the
	// guard alone.
	for _, v := range []uint{11, 10} {
		r := e.Keyledger([]string{"migrate", "down"}, suite.WithDatabase(old.OwnerURL))
		require.Equal(t, 0, r.Code, "%s", r.Stderr)
		require.Equal(t, store.MigrationStatus{Version: v, Changed: true}, suite.MigrateStatus(t, r))
	}
	keys, err := migrations.FS.ReadFile("000012_namespace_keys.up.sql")
	require.NoError(t, err)
	ownerConn := suite.Connect(t, old.OwnerURL)
	_, err = ownerConn.Exec(ctx, string(keys))
	require.NoError(t, err)

	const runs = 15
	journals := []struct {
		label string
		url   string
	}{{"migration-11", e.Journal.OperatorURL}, {"migration-10", old.OperatorURL}}
	// An inserter appends to one operation of a journal, on a session of
	// its own; timed inserts 200 records in one statement and rolls them
	// back.
	type inserter struct {
		conn *pgx.Conn
		op   int64
	}
	inserters := map[string]inserter{}
	for _, j := range journals {
		op, _, err := suite.RoleStore(t, j.url).Prepare(ctx, suite.ToyPreparation("mut-guard-bench", 15))
		require.NoError(t, err)
		inserters[j.label] = inserter{conn: suite.Connect(t, j.url), op: op.ID}
	}
	timed := func(in inserter) time.Duration {
		tx, err := in.conn.Begin(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Rollback(context.WithoutCancel(ctx))) }()
		start := time.Now()
		_, err = tx.Exec(ctx, `INSERT INTO keyledger.records (operation_id, kind, step, target, uid, resource_version, status, detail)
			SELECT $1, 'observation', 'read-secret', 'secret/s-' || g, 'uid-' || g, '1234', 'absent', '{"keys": ["password"]}'::jsonb
			FROM generate_series(1, 200) g`, in.op)
		took := time.Since(start)
		require.NoError(t, err)
		return took
	}
	for _, in := range inserters {
		timed(in) // each session's first: its plans and functions, cold
	}
	insert := map[string][]time.Duration{}
	for i := range runs {
		for k := range journals {
			j := journals[(i+k)%len(journals)] // each goes first in turn
			insert[j.label] = append(insert[j.label], timed(inserters[j.label]))
		}
	}

	bin := releaseBinary(t)
	m := largestKeyring()
	keyID := m.Keys[0].ID
	retire := map[string][]time.Duration{}
	for i := range runs {
		for k := range journals {
			j := journals[(i+k)%len(journals)] // each goes first in turn
			name := fmt.Sprintf("guard-%s-%d", j.label, i)
			s := e.CreateSecret(suite.KeyringSecret(name, m))
			path := e.WriteCommand(name+".json", suite.RetireCommand(s, keyID, "mut-"+name))
			retire[j.label] = append(retire[j.label], measureRun(e, t, bin, []string{"run", path}, j.url, e.AsRetirerOf(s)).Wall)
			require.Equal(t, 1, e.SecretWrites(s.Name, s.ResourceVersion, e.GetSecret(s.Name).ResourceVersion), "one write (%s)", j.label)
		}
	}
	// A versioned update at the retention limit (seven transactions of a
	// record or a few each), on a Secret whose history each journal holds.
	as := e.AsWriter("guard-11", "guard-10")
	data := func(i int) map[string][]byte {
		return map[string][]byte{"password": []byte(fmt.Sprintf("guard-value-%04d", i)), "user": []byte("app")}
	}
	secretOf := map[string]string{"migration-11": "guard-11", "migration-10": "guard-10"}
	for _, j := range journals {
		name := secretOf[j.label]
		e.CreateSecret(suite.PlainSecret(name, data(0)))
		for i := 1; i <= versioned.DefaultHistoryLimit; i++ {
			cur := e.GetSecret(name)
			suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, name, cur.ResourceVersion, fmt.Sprintf("mut-fill-%s-%d", name, i), data(i)), as, suite.WithDatabase(j.url)), "completed")
		}
	}
	update := map[string][]time.Duration{}
	for i := range runs {
		for k := range journals {
			j := journals[(i+k)%len(journals)]
			name := secretOf[j.label]
			cur := e.GetSecret(name)
			mutation := fmt.Sprintf("mut-guard-%s-%d", name, i)
			path := e.WriteCommand(mutation+".json", suite.UpdateCommand(e.NS, name, cur.ResourceVersion, mutation, data(100+i)))
			update[j.label] = append(update[j.label], measureRun(e, t, bin, []string{"run", path}, j.url, as).Wall)
			require.Equal(t, 1, e.SecretWrites(name, cur.ResourceVersion, e.GetSecret(name).ResourceVersion), "one write (%s)", j.label)
		}
	}
	suite.BenchLine("append-guard insert of 200 records in one statement (the run's role, warm session): migration-11 wall_median=%s migration-10 wall_median=%s ratio=%.2f (runs=%d)",
		ms(median(insert["migration-11"])), ms(median(insert["migration-10"])), float64(median(insert["migration-11"]))/float64(median(insert["migration-10"])), runs)
	suite.BenchLine("append-guard retire run: migration-11 wall_median=%s migration-10 wall_median=%s ratio=%.2f (runs=%d, interleaved)",
		ms(median(retire["migration-11"])), ms(median(retire["migration-10"])), float64(median(retire["migration-11"]))/float64(median(retire["migration-10"])), runs)
	suite.BenchLine("append-guard versioned update at the retention limit: migration-11 wall_median=%s migration-10 wall_median=%s ratio=%.2f (runs=%d, interleaved)",
		ms(median(update["migration-11"])), ms(median(update["migration-10"])), float64(median(update["migration-11"]))/float64(median(update["migration-10"])), runs)
}
