package platform

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// PgBouncer is a session pooler in front of a test server: Debian's
// pgbouncer, run on the loopback interface as the journal's pooler would
// run beside it. Its auth file holds the SCRAM verifiers of the roles it
// pools (read from pg_authid), so a client authenticates to it as it does
// to the server and it logs in to the server with that client's proof:
// whoever reads the file or the pooler's memory can act as those roles.
type PgBouncer struct {
	cmd  *exec.Cmd
	dir  string
	port int
}

// PgBouncerOptions shape a pooler.
type PgBouncerOptions struct {
	// Roles are the roles it pools.
	Roles []string
	// NoReset hands a session on to the next client without
	// server_reset_query (a misconfigured pooler).
	NoReset bool
	// PoolSize is default_pool_size: the server sessions per database and
	// role (default 40).
	PoolSize int
	// MaxDBConnections is max_db_connections: the server sessions per
	// database over every role's pool (0: no cap). Past it a client waits
	// in the pooler, which closes another pool's idle session to make room.
	MaxDBConnections int
}

// PgBouncerInstalled says whether Debian's pgbouncer is installed (nil)
// or why not.
func PgBouncerInstalled() error {
	_, err := pgbouncerBinary()
	return err
}

// pgbouncerBinary finds Debian's pgbouncer (installed by hack/deps.sh).
func pgbouncerBinary() (string, error) {
	if path, err := exec.LookPath("pgbouncer"); err == nil {
		return path, nil
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", errors.New("pgbouncer is not installed (hack/deps.sh installs Debian's pgbouncer)")
}

// StartPgBouncer starts a session-mode pooler for every database of p.
// It never runs as root (pgbouncer refuses to): as root, it runs as
// nobody. Its log stays in its own directory: it names addresses.
func StartPgBouncer(ctx context.Context, p *Postgres, opts PgBouncerOptions) (_ *PgBouncer, retErr error) {
	bin, err := pgbouncerBinary()
	if err != nil {
		return nil, err
	}
	server, err := parsePostgresURL(p.adminURL)
	if err != nil {
		return nil, err
	}
	var auth strings.Builder
	err = p.withAdmin(ctx, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT rolname, rolpassword FROM pg_authid WHERE rolname = ANY($1) ORDER BY rolname`, opts.Roles)
		if err != nil {
			return err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var role, verifier string
			if err := rows.Scan(&role, &verifier); err != nil {
				return err
			}
			fmt.Fprintf(&auth, "%q %q\n", role, verifier)
			n++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if n != len(opts.Roles) {
			return fmt.Errorf("%d of %d roles have a password", n, len(opts.Roles))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the pooled roles' verifiers: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "keyledger-pgbouncer-")
	if err != nil {
		return nil, err
	}
	b := &PgBouncer{dir: dir, port: port}
	defer func() {
		if retErr != nil {
			b.Stop()
		}
	}()
	reset := "DISCARD ALL"
	if opts.NoReset {
		reset = ""
	}
	poolSize := opts.PoolSize
	if poolSize == 0 {
		poolSize = 40
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = scram-sha-256
auth_file = %s
pool_mode = session
server_reset_query = %s
max_client_conn = 500
default_pool_size = %d
max_db_connections = %d
logfile = %s
log_connections = 0
log_disconnections = 0
`, server.Hostname(), server.Port(), port, filepath.Join(dir, "users.txt"), reset, poolSize, opts.MaxDBConnections, filepath.Join(dir, "pgbouncer.log"))
	for name, content := range map[string]string{"users.txt": auth.String(), "pgbouncer.ini": ini} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	// It ends with the test process, even one that dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		const nobody = 65534
		for _, path := range []string{dir, filepath.Join(dir, "users.txt"), filepath.Join(dir, "pgbouncer.ini")} {
			if err := os.Chown(path, nobody, nobody); err != nil {
				return nil, err
			}
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting pgbouncer: %w", err)
	}
	b.cmd = cmd
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case err := <-exited:
			b.cmd = nil
			return nil, fmt.Errorf("pgbouncer exited at start: %v", err)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			return nil, errors.New("pgbouncer did not listen within 15s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return b, nil
}

// URL is dbURL (a URL of a database of the pooled server) through the
// pooler: the same user, password and database. It holds a password:
// never log it.
func (b *PgBouncer) URL(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", errors.New("invalid database URL (redacted)")
	}
	u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port))
	return u.String(), nil
}

// Stop ends the pooler and removes its files.
func (b *PgBouncer) Stop() {
	if b.cmd != nil && b.cmd.Process != nil {
		_ = b.cmd.Process.Kill()
		b.cmd = nil
	}
	_ = os.RemoveAll(b.dir)
}
