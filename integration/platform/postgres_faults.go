package platform

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Fault injection on a PostgreSQL container (not on an external server):
// a crash, every session terminated, the whole server paused.

// errExternal refuses faults on a server the tests do not own.
var errExternal = errors.New("PostgreSQL faults need the test container, not an external server")

// killCheckpointer SIGKILLs the server's checkpointer: the postmaster sees
// a child die abnormally, ends every session and runs crash recovery (the
// same as any backend crashing), on the same port.
const killCheckpointer = `for d in /proc/[0-9]*; do
  if tr '\0' ' ' <"$d/cmdline" 2>/dev/null | grep -q '^postgres: checkpointer'; then kill -9 "${d#/proc/}"; exit 0; fi
done; exit 3`

// Crash kills a server process with SIGKILL, so that PostgreSQL crashes
// and recovers in place, and waits until it accepts connections again.
func (p *Postgres) Crash(ctx context.Context) error {
	if p.container == nil {
		return errExternal
	}
	out, err := exec.CommandContext(ctx, "docker", "exec", p.container.GetContainerID(), "sh", "-c", killCheckpointer).CombinedOutput()
	if err != nil {
		return fmt.Errorf("killing the checkpointer: %w: %s", err, out)
	}
	return p.WaitReady(ctx)
}

// WaitReady waits (up to 2 minutes) until the server answers a query.
func (p *Postgres) WaitReady(ctx context.Context) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return p.ping(pctx) == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for PostgreSQL to accept connections: %w", err)
	}
	return nil
}

// TerminateSessions ends every client session but its own with
// pg_terminate_backend, as the superuser, and returns how many it ended.
func (p *Postgres) TerminateSessions(ctx context.Context) (int, error) {
	var n int
	err := p.withAdmin(ctx, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
			FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("terminating every session: %w", err)
	}
	return n, nil
}

// Pause stops every process of the container with SIGSTOP (connections
// stay open, nothing is answered) until Unpause. Signals, not docker pause:
// the cgroup freezer may refuse to freeze a busy container.
func (p *Postgres) Pause(ctx context.Context) error {
	for range 2 { // the second pass stops a backend forked during the first
		if err := p.signalAll(ctx, syscall.SIGSTOP); err != nil {
			return err
		}
	}
	return nil
}

// Unpause continues a paused container (SIGCONT to every process).
func (p *Postgres) Unpause(ctx context.Context) error { return p.signalAll(ctx, syscall.SIGCONT) }

// signalAll sends sig to every process of the container (host PIDs, from
// docker top).
func (p *Postgres) signalAll(ctx context.Context, sig syscall.Signal) error {
	if p.container == nil {
		return errExternal
	}
	out, err := exec.CommandContext(ctx, "docker", "top", p.container.GetContainerID(), "-eo", "pid").Output()
	if err != nil {
		return fmt.Errorf("listing the PostgreSQL container's processes: %w", err)
	}
	for _, field := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(field)
		if err != nil {
			continue // the PID header
		}
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signalling a PostgreSQL process: %w", err)
		}
	}
	return nil
}

// MakeDurable turns synchronous_commit back on (the test image turns it off
// for speed): a crash then loses no committed transaction, as on a real
// server. fsync stays off, which a process crash (not the machine's) does
// not need.
func (p *Postgres) MakeDurable(ctx context.Context) error {
	err := p.withAdmin(ctx, func(conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, "ALTER SYSTEM SET synchronous_commit = on"); err != nil {
			return err
		}
		_, err := conn.Exec(ctx, "SELECT pg_reload_conf()")
		return err
	})
	if err != nil {
		return fmt.Errorf("turning synchronous_commit on: %w", err)
	}
	return nil
}
