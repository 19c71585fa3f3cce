package suite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/failpoint"
	"github.com/keyledger/keyledger/workflow/workflowtest"
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

// Env is one test's view of the platform: its own namespace and its own
// migrated journal database.
type Env struct {
	T       *testing.T
	Kube    *platform.Kube
	NS      string
	Journal *platform.Journal
	Binary  string
	Dir     string
	// retirers caches one ServiceAccount kubeconfig per keyring Secret.
	Retirers map[string]string
}

// Setup gives a test the shared platform, a fresh namespace and a fresh
// journal. It skips under -short.
func Setup(t *testing.T) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the real platform (run without -short)")
	}
	shared.once.Do(startPlatform)
	if shared.err != nil {
		t.Fatalf("platform: %v", shared.err)
	}
	ns := shared.kube.Namespace(t)
	j, err := shared.pg.NewJournal(t.Context(), "kl_"+RandomSuffix(t), ns, ToyNamespace)
	if err != nil {
		t.Fatalf("journal: %v", err)
	}
	return &Env{T: t, Kube: shared.kube, NS: ns, Journal: j, Binary: shared.binary, Dir: t.TempDir()}
}

// ToyNamespace is the target namespace of journal-only operations (no
// Kubernetes object behind them, ToyPreparation): every test's journal
// grants the operator role both it and the test's namespace.
const ToyNamespace = "ns"

// RandomSuffix is 12 random hex digits, for names no other test takes.
func RandomSuffix(t *testing.T) string { return RandomHex(t, 6) }

// RandomHex is n random bytes in hex: a name suffix, a password or a
// canary no other run has.
func RandomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// Result is one keyledger process run.
type Result struct {
	Stdout, Stderr string
	Code           int
	// CPU is the process's user and system time (rusage).
	CPU time.Duration
}

// RunOption adjusts one CLI run.
type RunOption func(*exec.Cmd)

// WithEnv adds environment variables (KEY=VALUE).
func WithEnv(kv ...string) RunOption {
	return func(c *exec.Cmd) { c.Env = append(c.Env, kv...) }
}

// WithFailpoint arms a failpoint (requires the failpoints build, which
// setup provides).
func WithFailpoint(name string) RunOption { return WithEnv(failpoint.Env + "=" + name) }

// AsKubeconfig runs as the identity in a kubeconfig file.
func AsKubeconfig(path string) RunOption {
	return func(c *exec.Cmd) { c.Env = append(c.Env, "KUBECONFIG="+path) }
}

// WithDatabase replaces the journal URL.
func WithDatabase(url string) RunOption { return WithEnv("KEYLEDGER_DATABASE_URL=" + url) }

// Keyledger runs the binary with args. By default it runs as the control
// plane's admin against this test's journal as the operator role.
func (e *Env) Keyledger(args []string, opts ...RunOption) Result {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(e.T.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.Binary, args...)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + e.Dir,
		"KUBECONFIG=" + e.Kube.KubeconfigFile(),
		"KEYLEDGER_DATABASE_URL=" + e.Journal.OperatorURL,
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
			e.T.Fatalf("running keyledger: %v", err)
		}
		code = exitErr.ExitCode()
		if code == -1 { // killed by a signal (a failpoint)
			code = 128 + 9
		}
	}
	return Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: code,
		CPU: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
}

// NamespaceRole creates a LOGIN role of its own (NOSUPERUSER, random name
// and password), grants it namespaces in this test's journal with the real
// `keyledger journal grant` run as the journal's owner, and returns a URL
// that connects to the journal as that role. Nothing it prints may hold the
// password.
func (e *Env) NamespaceRole(namespaces ...string) string {
	e.T.Helper()
	role, pw := "kl_ns_"+RandomSuffix(e.T), RandomSuffix(e.T)
	require.NoError(e.T, shared.pg.EnsureRole(e.T.Context(), role, pw))
	r := e.Keyledger(append([]string{"journal", "grant", role}, namespaces...), WithDatabase(e.Journal.OwnerURL))
	require.Equal(e.T, 0, r.Code, "journal grant: stdout %s stderr %s", r.Stdout, r.Stderr)
	require.NotContains(e.T, r.Stdout+r.Stderr, pw)
	url, err := shared.pg.URLFor(e.Journal.OwnerURL, role, pw)
	require.NoError(e.T, err)
	return url
}

// RoleOf is the user name in a database URL.
func RoleOf(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	return u.User.Username()
}

// OwnedJournal makes this test's journal a fresh database migrated by a
// role that is not a superuser (as CloudNativePG's application owner is):
// the owner is then held to row-level security like every other role, and
// sees everything only through its own policy. The operator role is not
// granted anything in it.
func (e *Env) OwnedJournal() {
	e.T.Helper()
	ctx := e.T.Context()
	db := FreshDatabase(e.T)
	owner, pw := "kl_owner_"+RandomSuffix(e.T), RandomSuffix(e.T)
	require.NoError(e.T, shared.pg.EnsureRole(ctx, owner, pw))
	admin := Connect(e.T, db)
	_, err := admin.Exec(ctx, "GRANT CREATE ON DATABASE "+pgx.Identifier{DBName(e.T, db)}.Sanitize()+" TO "+pgx.Identifier{owner}.Sanitize())
	require.NoError(e.T, err)
	ownerURL, err := shared.pg.URLFor(db, owner, pw)
	require.NoError(e.T, err)
	r := e.Keyledger([]string{"migrate", "up"}, WithDatabase(ownerURL))
	require.Equal(e.T, 0, r.Code, "migrate up as a plain owner: %s", r.Stderr)
	e.Journal = &platform.Journal{Name: DBName(e.T, db), OwnerURL: ownerURL}
}

// DBName is the database name in a database URL.
func DBName(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	return strings.TrimPrefix(u.Path, "/")
}

// Postgres is the shared PostgreSQL server (started by Setup).
func Postgres() *platform.Postgres { return shared.pg }

// Binary is the keyledger under test, built with failpoints (by Setup).
func Binary() string { return shared.binary }

// Dir is the shared platform's temporary directory (by Setup).
func Dir() string { return shared.dir }

// JournalOf reads an operation and its records as the schema owner.
func (e *Env) JournalOf(mutationID string) (*store.Operation, []store.Record) {
	e.T.Helper()
	st, err := store.Open(e.T.Context(), e.Journal.OwnerURL)
	require.NoError(e.T, err)
	defer st.Close()
	op, err := st.Load(e.T.Context(), "", mutationID)
	require.NoError(e.T, err)
	records, err := st.Records(e.T.Context(), op.ID)
	require.NoError(e.T, err)
	return op, records
}

// Kinds lists the record kinds in order.
func Kinds(records []store.Record) []store.RecordKind {
	out := make([]store.RecordKind, len(records))
	for i, r := range records {
		out[i] = r.Kind
	}
	return out
}

// Count counts records of one kind (workflowtest.Count).
func Count(records []store.Record, kind store.RecordKind) int {
	return workflowtest.Count(records, kind)
}

// RunTogether starts n runs of the binary with args at the same moment and
// returns how each ended, in start order.
func (e *Env) RunTogether(n int, args []string, opts ...RunOption) []Result {
	e.T.Helper()
	results := make([]Result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = e.Keyledger(args, opts...)
		}()
	}
	close(start)
	wg.Wait()
	return results
}

// WriteCommand writes a command file (mode 0600) and returns its absolute path.
func (e *Env) WriteCommand(name string, v any) string {
	e.T.Helper()
	b, err := json.Marshal(v)
	require.NoError(e.T, err)
	path := filepath.Join(e.Dir, name)
	require.NoError(e.T, os.WriteFile(path, b, 0o600))
	return path
}

// Outcome decodes the one JSON line a run prints on stdout.
func Outcome(t *testing.T, r Result) map[string]any {
	t.Helper()
	var out map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &out), "stdout must be one JSON line: %q (stderr %s)", r.Stdout, r.Stderr)
	return out
}
