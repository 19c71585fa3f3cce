package platform

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestIntegrationPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs Docker or KEYLEDGER_TEST_DATABASE_URL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	pg := startPostgres(ctx, t)

	suffix, err := randomHex(4)
	require.NoError(t, err)
	ledgerURL, err := pg.CreateDatabase(ctx, "ledger_"+suffix)
	require.NoError(t, err)
	// A name that needs quoting.
	otherURL, err := pg.CreateDatabase(ctx, "Other-DB "+suffix)
	require.NoError(t, err)
	require.NotEqual(t, ledgerURL, otherURL)

	role := "keyledger_app_" + suffix
	// Twice, with a quote in the second password: EnsureRole is idempotent.
	require.NoError(t, pg.EnsureRole(ctx, role, "first"))
	password := "it's-" + suffix
	require.NoError(t, pg.EnsureRole(ctx, role, password))

	appURL, err := pg.URLFor(ledgerURL, role, password)
	require.NoError(t, err)
	require.Equal(t, role, queryString(ctx, t, appURL, "SELECT current_user"))
	require.Equal(t, "ledger_"+suffix, queryString(ctx, t, appURL, "SELECT current_database()"))
	require.Equal(t, "postgres", queryString(ctx, t, otherURL, "SELECT current_user"))
	require.Equal(t, "Other-DB "+suffix, queryString(ctx, t, otherURL, "SELECT current_database()"))

	badURL, err := pg.URLFor(ledgerURL, role, "first")
	require.NoError(t, err)
	_, err = pgx.Connect(ctx, badURL)
	require.Error(t, err, "the old password must no longer work")
}

func TestIntegrationPostgresConcurrentEnsureRole(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs Docker or KEYLEDGER_TEST_DATABASE_URL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	pg := startPostgres(ctx, t)
	suffix, err := randomHex(4)
	require.NoError(t, err)
	role := "keyledger_race_" + suffix

	errs := make(chan error, 8)
	for range cap(errs) {
		go func() { errs <- pg.EnsureRole(ctx, role, "secret") }()
	}
	for range cap(errs) {
		require.NoError(t, <-errs)
	}
	appURL, err := pg.URLFor(pg.AdminURL(), role, "secret")
	require.NoError(t, err)
	require.Equal(t, role, queryString(ctx, t, appURL, "SELECT current_user"))
}

// startPostgres starts a server for one test and removes it afterwards.
var (
	sharedPostgresOnce sync.Once
	sharedPostgresVal  *Postgres
	sharedPostgresErr  error
)

// startPostgres returns the package's one PostgreSQL server (one container
// per test run), stopped by TestMain; tests isolate with their own
// databases and role names.
func startPostgres(ctx context.Context, t *testing.T) *Postgres {
	t.Helper()
	sharedPostgresOnce.Do(func() {
		start := time.Now()
		sharedPostgresVal, sharedPostgresErr = StartPostgres(context.WithoutCancel(ctx))
		if sharedPostgresErr == nil {
			registerTeardown(func() error { return sharedPostgresVal.Terminate(context.Background()) })
			t.Logf("PostgreSQL ready in %s", time.Since(start).Round(time.Millisecond))
		}
	})
	require.NoError(t, sharedPostgresErr, "starting the shared PostgreSQL")
	return sharedPostgresVal
}

// queryString connects to dbURL and returns the single text value of query.
func queryString(ctx context.Context, t *testing.T, dbURL, query string) string {
	t.Helper()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var s string
	require.NoError(t, conn.QueryRow(ctx, query).Scan(&s))
	return s
}
