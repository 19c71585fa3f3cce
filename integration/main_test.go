package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/workflow/failpoint"
)

// The platform is started once per package run, on first use, and stopped
// by TestMain: one control plane, one PostgreSQL server, one keyledger binary.
var shared struct {
	once   sync.Once
	err    error
	kube   *platform.Kube
	pg     *platform.Postgres
	binary string
	dir    string
}

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	code := m.Run()
	stopNodePlatform(code != 0)
	stopESOPlatform(code != 0)
	if shared.kube != nil {
		if err := shared.kube.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping control plane:", err)
		}
	}
	if shared.pg != nil {
		if err := shared.pg.Terminate(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "stopping PostgreSQL:", err)
		}
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func startPlatform() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "keyledger-integration-")
	if err != nil {
		shared.err = err
		return
	}
	shared.dir = dir
	// Build the binary under test with failpoints compiled in, so tests can
	// crash it at every transition and inject faults into its transport.
	shared.binary = filepath.Join(dir, "keyledger")
	// KEYLEDGER_TEST_RACE=1 builds it with the race detector (needs cgo).
	args, cgo := []string{"build", "-tags", "failpoints", "-o", shared.binary}, "CGO_ENABLED=0"
	if os.Getenv("KEYLEDGER_TEST_RACE") == "1" {
		args, cgo = append(args, "-race"), "CGO_ENABLED=1"
	}
	build := exec.CommandContext(ctx, "go", append(args, "./cmd/keyledger")...)
	build.Dir = platform.RepoRoot()
	build.Env = append(os.Environ(), cgo)
	if out, err := build.CombinedOutput(); err != nil {
		shared.err = fmt.Errorf("building keyledger: %v\n%s", err, out)
		return
	}
	var wg sync.WaitGroup
	var kubeErr, pgErr error
	wg.Add(2)
	go func() { defer wg.Done(); shared.kube, kubeErr = platform.StartKube(ctx) }()
	go func() { defer wg.Done(); shared.pg, pgErr = platform.StartPostgres(ctx) }()
	wg.Wait()
	if kubeErr != nil {
		shared.err = kubeErr
	} else if pgErr != nil {
		shared.err = pgErr
	}
}

// env is one test's view of the platform: its own namespace and its own
// migrated journal database.
type env struct {
	t       *testing.T
	kube    *platform.Kube
	ns      string
	journal *platform.Journal
	binary  string
	dir     string
	// retirers caches one ServiceAccount kubeconfig per keyring Secret.
	retirers map[string]string
}

// setup gives a test the shared platform, a fresh namespace and a fresh
// journal. It skips under -short.
func setup(t *testing.T) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the real platform (run without -short)")
	}
	shared.once.Do(startPlatform)
	if shared.err != nil {
		t.Fatalf("platform: %v", shared.err)
	}
	ns := shared.kube.Namespace(t)
	j, err := shared.pg.NewJournal(t.Context(), "kl_"+randomSuffix(t), ns, toyNamespace)
	if err != nil {
		t.Fatalf("journal: %v", err)
	}
	return &env{t: t, kube: shared.kube, ns: ns, journal: j, binary: shared.binary, dir: t.TempDir()}
}

// toyNamespace is the target namespace of journal-only operations (no
// Kubernetes object behind them, toyPreparation): every test's journal
// grants the operator role both it and the test's namespace.
const toyNamespace = "ns"

func randomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// result is one keyledger process run.
type result struct {
	Stdout, Stderr string
	Code           int
	// CPU is the process's user and system time (rusage).
	CPU time.Duration
}

// runOption adjusts one CLI run.
type runOption func(*exec.Cmd)

// withEnv adds environment variables (KEY=VALUE).
func withEnv(kv ...string) runOption {
	return func(c *exec.Cmd) { c.Env = append(c.Env, kv...) }
}

// withFailpoint arms a failpoint (requires the failpoints build, which
// setup provides).
func withFailpoint(name string) runOption { return withEnv(failpoint.Env + "=" + name) }

// asKubeconfig runs as the identity in a kubeconfig file.
func asKubeconfig(path string) runOption {
	return func(c *exec.Cmd) { c.Env = append(c.Env, "KUBECONFIG="+path) }
}

// withDatabase replaces the journal URL.
func withDatabase(url string) runOption { return withEnv("KEYLEDGER_DATABASE_URL=" + url) }

// keyledger runs the binary with args. By default it runs as the control
// plane's admin against this test's journal as the operator role.
func (e *env) keyledger(args []string, opts ...runOption) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.binary, args...)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + e.dir,
		"KUBECONFIG=" + e.kube.KubeconfigFile(),
		"KEYLEDGER_DATABASE_URL=" + e.journal.OperatorURL,
	}
	for _, o := range opts {
		o(cmd)
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		exitErr, ok := err.(*exec.ExitError)
		if !ok {
			e.t.Fatalf("running keyledger: %v", err)
		}
		code = exitErr.ExitCode()
		if code == -1 { // killed by a signal (a failpoint)
			code = 128 + 9
		}
	}
	return result{Stdout: stdout.String(), Stderr: stderr.String(), Code: code,
		CPU: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
}

// namespaceRole creates a LOGIN role of its own (NOSUPERUSER, random name
// and password), grants it namespaces in this test's journal with the real
// `keyledger journal grant` run as the journal's owner, and returns a URL
// that connects to the journal as that role. Nothing it prints may hold the
// password.
func (e *env) namespaceRole(namespaces ...string) string {
	e.t.Helper()
	role, pw := "kl_ns_"+randomSuffix(e.t), randomSuffix(e.t)
	require.NoError(e.t, shared.pg.EnsureRole(e.t.Context(), role, pw))
	r := e.keyledger(append([]string{"journal", "grant", role}, namespaces...), withDatabase(e.journal.OwnerURL))
	require.Equal(e.t, 0, r.Code, "journal grant: stdout %s stderr %s", r.Stdout, r.Stderr)
	require.NotContains(e.t, r.Stdout+r.Stderr, pw)
	url, err := shared.pg.URLFor(e.journal.OwnerURL, role, pw)
	require.NoError(e.t, err)
	return url
}

// roleOf is the user name in a database URL.
func roleOf(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	return u.User.Username()
}

// ownedJournal makes this test's journal a fresh database migrated by a
// role that is not a superuser (as CloudNativePG's application owner is):
// the owner is then held to row-level security like every other role, and
// sees everything only through its own policy. The operator role is not
// granted anything in it.
func (e *env) ownedJournal() {
	e.t.Helper()
	ctx := e.t.Context()
	db := freshDatabase(e.t)
	owner, pw := "kl_owner_"+randomSuffix(e.t), randomSuffix(e.t)
	require.NoError(e.t, shared.pg.EnsureRole(ctx, owner, pw))
	admin := connect(e.t, db)
	_, err := admin.Exec(ctx, "GRANT CREATE ON DATABASE "+pgx.Identifier{dbName(e.t, db)}.Sanitize()+" TO "+pgx.Identifier{owner}.Sanitize())
	require.NoError(e.t, err)
	ownerURL, err := shared.pg.URLFor(db, owner, pw)
	require.NoError(e.t, err)
	r := e.keyledger([]string{"migrate", "up"}, withDatabase(ownerURL))
	require.Equal(e.t, 0, r.Code, "migrate up as a plain owner: %s", r.Stderr)
	e.journal = &platform.Journal{Name: dbName(e.t, db), OwnerURL: ownerURL}
}

// dbName is the database name in a database URL.
func dbName(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	return strings.TrimPrefix(u.Path, "/")
}
