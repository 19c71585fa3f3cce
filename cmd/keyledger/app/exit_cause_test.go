package app

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// A dependency's failure exits 69 before anything durable, 75 after, 77
// for a right the identity lacks, each with the cause's reason; exit 1 is
// left to keyledger's own failures.
func TestDescribeDependencyFailures(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return &pgconn.PgError{Code: code, Severity: "FATAL"} }
	cases := []struct {
		name   string
		err    error
		code   int
		reason string
	}{
		{"terminated preparing", &workflow.Unavailable{Dependency: "postgresql", Err: fmt.Errorf("preparing operation: %w", pg("57P01"))}, ExitUnavailable, "journal-session-terminated"},
		{"terminated after", &workflow.Uncertain{Reason: workflow.ReasonInterrupted, Err: pg("57P01")}, ExitUncertain, "journal-session-terminated"},
		{"lock timeout preparing", &workflow.Unavailable{Dependency: "postgresql", Err: pg("55P03")}, ExitUnavailable, "journal-lock-timeout"},
		{"not granted, run", &workflow.Unavailable{Dependency: "postgresql", Err: pg("42501")}, ExitPermission, "journal-not-granted"},
		{"not granted, journal list", fmt.Errorf("listing operations: %w", pg("42501")), ExitPermission, "journal-not-granted"},
		{"wrong password", &workflow.Unavailable{Dependency: "postgresql", Err: &store.UnreachableError{Err: pg("28P01")}}, ExitUnavailable, "journal-login-failed"},
		{"wrong password, journal list", &store.UnreachableError{Err: pg("28P01")}, ExitUnavailable, "journal-login-failed"},
		{"terminated, journal show", fmt.Errorf("loading operation: %w", pg("57P01")), ExitUnavailable, "journal-session-terminated"},
		{"another reason after", &workflow.Uncertain{Reason: "probe-unknown", Err: pg("57P01")}, ExitUncertain, "probe-unknown"},
		{"interrupted, no cause", &workflow.Uncertain{Reason: workflow.ReasonInterrupted, Err: errors.New("x")}, ExitUncertain, "interrupted"},
		{"unavailable, no cause", &workflow.Unavailable{Dependency: "kubernetes", Err: errors.New("x")}, ExitUnavailable, ReasonUnavailable},
		{"bug", errors.New("family decided nothing"), ExitInternal, ReasonInternal},
		{"journal check", fmt.Errorf("moving: %w", pg("23514")), ExitInternal, ReasonInternal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := describe(tc.err)
			require.Equal(t, tc.code, f.Code)
			require.Equal(t, tc.reason, f.Reason)
			if tc.code != ExitInternal {
				require.NotContains(t, f.Fix, "this is a bug")
			}
		})
	}
	// A cause a rerun cannot fix, after the operation became durable: its
	// fix first, then the rerun that settles the operation.
	f := describe(&workflow.Uncertain{Reason: workflow.ReasonInterrupted, Err: pg("42501")})
	require.Equal(t, ExitUncertain, f.Code)
	require.Contains(t, f.Fix, "journal grant")
	require.Contains(t, f.Fix, "once it is fixed, run the same command again")
}
