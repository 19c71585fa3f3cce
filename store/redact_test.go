package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Connection failures carry the user, database, host and address in their
// messages; none of it survives redact, on any path that wraps with it.
func TestRedactDropsConnectionDetails(t *testing.T) {
	const canary = "canary-host-7f3a"
	dial := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 5432},
		Err: fmt.Errorf("lookup %s: no such host", canary)}
	_, parseErr := pgconn.ParseConfig("postgres://" + canary + "-user:pw@" + canary + ":notaport/" + canary + "-db")
	cases := map[string]error{
		"dial":       dial,
		"wrapped":    fmt.Errorf("failed to connect to `user=%s-user database=%s-db`: %w", canary, canary, dial),
		"server":     &pgconn.PgError{Code: "28P01", Severity: "FATAL", Message: "password authentication failed for user " + canary},
		"reconnect":  fmt.Errorf("conn closed: %s:5432: %w", canary, errors.New("EOF")),
		"parse":      parseErr,
		"constraint": &pgconn.PgError{Code: "23505", Severity: "ERROR", Message: "dup " + canary, ConstraintName: "records_one_ending"},
		// A connect cut short by its deadline: pgconn names the user,
		// database and address beside the context's error.
		"timeout":  fmt.Errorf("failed to connect to `user=%s-user database=%s-db`: 192.0.2.7:5432 (%s): dial error: %w", canary, canary, canary, context.DeadlineExceeded),
		"canceled": fmt.Errorf("failed to connect to `user=%s-user database=%s-db`: %w", canary, canary, context.Canceled),
	}
	for name, err := range cases {
		for _, got := range []error{redact(err), wrap("committing transaction", err), &UnreachableError{Err: redact(err)}} {
			if strings.Contains(got.Error(), canary) || strings.Contains(got.Error(), "192.0.2.7") {
				t.Errorf("%s: %q leaks connection details", name, got)
			}
		}
	}
	if got := redact(cases["constraint"]).Error(); !strings.Contains(got, "23505") || !strings.Contains(got, "records_one_ending") {
		t.Errorf("a server error keeps its code and constraint: %q", got)
	}
	if !errors.Is(wrap("x", context.Canceled), context.Canceled) {
		t.Error("a canceled context stays recognisable")
	}
	if !errors.Is(redact(cases["timeout"]), context.DeadlineExceeded) || !errors.Is(redact(cases["canceled"]), context.Canceled) {
		t.Error("a connect cut short by its context stays recognisable")
	}
	local := &localError{errors.New("decoding record 3 detail")}
	if got := wrap("reading records", local); !errors.Is(got, local) {
		t.Errorf("keyledger's own errors pass unchanged: %v", got)
	}
}
