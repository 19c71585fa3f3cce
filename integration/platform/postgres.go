package platform

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
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
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// DatabaseURLEnv names an existing PostgreSQL server to use instead of a
// container: a postgres:// URL for a superuser (it is never printed).
const DatabaseURLEnv = "KEYLEDGER_TEST_DATABASE_URL"

const (
	postgresPort           = "5432/tcp"
	postgresReadyLine      = "database system is ready to accept connections"
	postgresStartupTimeout = 2 * time.Minute
)

// Postgres is one PostgreSQL server for integration tests: a container built
// by hack/postgres-image.sh, or the server named by KEYLEDGER_TEST_DATABASE_URL.
// Its methods are safe for concurrent use.
type Postgres struct {
	adminURL  string
	container testcontainers.Container // nil for an external server
}

// StartPostgres starts a PostgreSQL container (building its image on first
// use) or, when KEYLEDGER_TEST_DATABASE_URL is set, uses that server.
func StartPostgres(ctx context.Context) (*Postgres, error) {
	if u := os.Getenv(DatabaseURLEnv); u != "" {
		if _, err := parsePostgresURL(u); err != nil {
			return nil, fmt.Errorf("%s: %w", DatabaseURLEnv, err)
		}
		p := &Postgres{adminURL: u}
		if err := p.ping(ctx); err != nil {
			return nil, fmt.Errorf("reaching the server in %s: %w", DatabaseURLEnv, err)
		}
		return p, nil
	}
	configureTestcontainers()
	if _, err := runHackScript(ctx, "docker.sh"); err != nil {
		return nil, fmt.Errorf("making sure a Docker engine runs: %w", err)
	}
	tag, err := runHackScript(ctx, "postgres-image.sh")
	if err != nil {
		return nil, fmt.Errorf("building the PostgreSQL image: %w", err)
	}
	if tag == "" {
		return nil, errors.New("building the PostgreSQL image: hack/postgres-image.sh printed no tag")
	}
	return startPostgresContainer(ctx, tag)
}

// configureTestcontainers points testcontainers at the loopback address (it
// would otherwise guess a gateway address, as this may run in a container)
// and disables its reaper container, which needs an image from a registry.
func configureTestcontainers() {
	for k, v := range map[string]string{
		"TESTCONTAINERS_HOST_OVERRIDE": "127.0.0.1",
		"TESTCONTAINERS_RYUK_DISABLED": "true",
	} {
		if _, ok := os.LookupEnv(k); !ok {
			os.Setenv(k, v)
		}
	}
}

// runHackScript runs hack/<name> from the repository root, passing its
// progress (stderr) through, and returns its trimmed stdout.
func runHackScript(ctx context.Context, name string) (string, error) {
	root := RepoRoot()
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", name))
	cmd.Dir = root
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("running hack/%s: %w", name, err)
	}
	return strings.TrimSpace(stdout.String()), nil
}

// ownerLabel marks a test container with the PID of the process that
// started it.
const ownerLabel = "dev.keyledger.test.owner-pid"

// reapOrphans removes test containers whose owning process is gone (killed
// by a test timeout, say). Containers of live processes, such as a
// concurrent test run, are left alone.
func reapOrphans(ctx context.Context) {
	out, err := exec.CommandContext(ctx, "docker", "ps", "-a", "--filter", "label="+ownerLabel,
		"--format", `{{.ID}} {{.Label "`+ownerLabel+`"}}`).Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		id, pidText, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		_ = exec.CommandContext(ctx, "docker", "rm", "-f", "-v", id).Run()
	}
}

func startPostgresContainer(ctx context.Context, image string) (*Postgres, error) {
	reapOrphans(ctx)
	password, err := randomHex(16)
	if err != nil {
		return nil, fmt.Errorf("generating the superuser password: %w", err)
	}
	req := testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image: image,
			// Published on the loopback interface only.
			ExposedPorts: []string{"127.0.0.1::" + postgresPort},
			Env:          map[string]string{"POSTGRES_PASSWORD": password},
			// Ryuk is disabled here, so a test process that dies leaves its
			// container behind; the owner label lets the next run reap it.
			Labels: map[string]string{ownerLabel: strconv.Itoa(os.Getpid())},
			// The entrypoint starts no temporary server, so the ready line
			// appears once, when the real server accepts connections.
			WaitingFor: wait.ForAll(
				wait.ForLog(postgresReadyLine),
				wait.ForListeningPort(postgresPort),
			).WithDeadline(postgresStartupTimeout),
		},
		Started: true,
	}
	c, err := testcontainers.GenericContainer(ctx, req)
	if err != nil {
		if c != nil {
			_ = c.Terminate(context.WithoutCancel(ctx))
		}
		return nil, fmt.Errorf("starting a PostgreSQL container from %s: %w", image, err)
	}
	p := &Postgres{container: c}
	if p.adminURL, err = containerAdminURL(ctx, c, password); err != nil {
		_ = c.Terminate(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := p.ping(ctx); err != nil {
		_ = c.Terminate(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("reaching the PostgreSQL container: %w", err)
	}
	return p, nil
}

func containerAdminURL(ctx context.Context, c testcontainers.Container, password string) (string, error) {
	host, err := c.Host(ctx)
	if err != nil {
		return "", fmt.Errorf("finding the PostgreSQL container's host: %w", err)
	}
	port, err := c.MappedPort(ctx, postgresPort)
	if err != nil {
		return "", fmt.Errorf("finding the PostgreSQL container's port: %w", err)
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword("postgres", password),
		Host:     net.JoinHostPort(host, port.Port()),
		Path:     "/postgres",
		RawQuery: "sslmode=disable",
	}
	return u.String(), nil
}

// AdminURL is a postgres:// URL for the superuser and the postgres database.
// It holds a password: never log it.
func (p *Postgres) AdminURL() string { return p.adminURL }

// CPUTime is the CPU time the server's container has used so far (every
// backend, the postmaster and its workers: the container's cgroup, cgroup
// v1 cpuacct or v2 cpu.stat). ok is false for no server, an external one,
// or when neither file is readable.
func (p *Postgres) CPUTime() (d time.Duration, ok bool) {
	if p == nil || p.container == nil {
		return 0, false
	}
	id := p.container.GetContainerID()
	if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuacct/docker", id, "cpuacct.usage")); err == nil {
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return time.Duration(ns), err == nil
	}
	for _, dir := range []string{"/sys/fs/cgroup/system.slice/docker-" + id + ".scope", "/sys/fs/cgroup/docker/" + id} {
		b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, found := strings.CutPrefix(line, "usage_usec "); found {
				us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return time.Duration(us) * time.Microsecond, err == nil
			}
		}
	}
	return 0, false
}

// Terminate removes the container. An external server is left alone.
func (p *Postgres) Terminate(ctx context.Context) error {
	if p.container == nil {
		return nil
	}
	// A throwaway test server: no need to wait for a clean shutdown.
	if err := p.container.Terminate(ctx, testcontainers.StopTimeout(0)); err != nil {
		return fmt.Errorf("removing the PostgreSQL container: %w", err)
	}
	return nil
}

// CreateDatabase creates database name and returns a URL for it as the
// superuser.
func (p *Postgres) CreateDatabase(ctx context.Context, name string) (string, error) {
	if name == "" {
		return "", errors.New("creating a database: empty name")
	}
	err := p.withAdmin(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
		return err
	})
	if err != nil {
		return "", fmt.Errorf("creating database %q: %w", name, err)
	}
	u, err := parsePostgresURL(p.adminURL)
	if err != nil {
		return "", fmt.Errorf("building the URL of database %q: %w", name, err)
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}

// EnsureRole makes role a LOGIN role without special privileges and sets its
// password. Roles belong to the whole server, so concurrent callers may race
// to create the same role: whoever loses updates the existing one instead.
func (p *Postgres) EnsureRole(ctx context.Context, role, password string) error {
	if role == "" {
		return errors.New("ensuring a role: empty name")
	}
	const attributes = "LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB"
	err := p.withAdmin(ctx, func(conn *pgx.Conn) error {
		for attempt := 1; ; attempt++ {
			err := execRoleStatement(ctx, conn, "CREATE ROLE %I WITH "+attributes+" PASSWORD %L", role, password)
			if !hasSQLState(err, "42710", "23505") { // duplicate_object, unique_violation
				return err
			}
			err = execRoleStatement(ctx, conn, "ALTER ROLE %I WITH "+attributes+" PASSWORD %L", role, password)
			// "tuple concurrently updated" (internal_error) when two callers
			// alter the same role at once: try again.
			if !hasSQLState(err, "XX000") || attempt == 5 {
				return err
			}
			time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
		}
	})
	if err != nil {
		return fmt.Errorf("ensuring role %q: %w", role, err)
	}
	return nil
}

// execRoleStatement runs a role statement built by the server's format(),
// which quotes the identifier (%I) and password literal (%L): utility
// statements take no bind parameters.
func execRoleStatement(ctx context.Context, conn *pgx.Conn, pattern, role, password string) error {
	var stmt string
	if err := conn.QueryRow(ctx, "SELECT format($1::text, $2::text, $3::text)", pattern, role, password).Scan(&stmt); err != nil {
		return fmt.Errorf("quoting the role statement: %w", err)
	}
	_, err := conn.Exec(ctx, stmt)
	return err
}

// URLFor returns dbURL with user and password as its credentials.
func (p *Postgres) URLFor(dbURL, user, password string) (string, error) {
	u, err := parsePostgresURL(dbURL)
	if err != nil {
		return "", err
	}
	u.User = url.UserPassword(user, password)
	return u.String(), nil
}

// parsePostgresURL parses a postgres:// URL. Its errors never repeat the URL,
// which holds a password.
func parsePostgresURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		// url.Error repeats the URL, and even its cause may quote a piece.
		return nil, errors.New("parsing a database URL (redacted): not a valid URL")
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, errors.New("parsing a database URL (redacted): want scheme postgres:// or postgresql://")
	}
	return u, nil
}

func (p *Postgres) ping(ctx context.Context) error {
	return p.withAdmin(ctx, func(conn *pgx.Conn) error { return conn.Ping(ctx) })
}

// withAdmin runs fn on a fresh superuser connection.
func (p *Postgres) withAdmin(ctx context.Context, fn func(*pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, p.adminURL)
	if err != nil {
		return fmt.Errorf("connecting as the superuser: %w", redactConnectError(err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return fn(conn)
}

// redactConnectError drops a connection-string parse error, whose fields
// hold the connection string; connect errors name only user and database.
func redactConnectError(err error) error {
	var parseErr *pgconn.ParseConfigError
	if errors.As(err, &parseErr) {
		return errors.New("invalid connection string (redacted)")
	}
	return err
}

// hasSQLState reports whether err is a PostgreSQL error with one of codes.
func hasSQLState(err error, codes ...string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	for _, c := range codes {
		if pgErr.Code == c {
			return true
		}
	}
	return false
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
