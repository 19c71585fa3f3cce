package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/workflow/credentials"
	"github.com/keyledger/keyledger/workflow/retire"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// The seeded fault soak (issue 36): the three families run concurrently on
// a control plane and a PostgreSQL server of the soak's own, while
// keyledger processes are killed at random moments, duplicated, and
// PostgreSQL and the API server crash, restart and pause. Every operation is
// rerun until a run exits 0; then etcd's history and the journal (read as
// its owner) must show each effect exactly once. SOAK_OPS and SOAK_SEED
// size and replay it (make soak); the default is a small soak for make test.

const (
	defaultSoakOps     = 45
	defaultSoakWorkers = 4
	// soakRunTimeout bounds every keyledger process: reaching it is a hang.
	soakRunTimeout = 90 * time.Second
	// soakSettleTime bounds the reruns of one operation.
	soakSettleTime = 4 * time.Minute
)

// soakConfig is read from SOAK_OPS, SOAK_SEED and SOAK_WORKERS.
type soakConfig struct {
	Ops, Workers int
	Seed         uint64
}

func soakConfigFromEnv(t *testing.T) soakConfig {
	t.Helper()
	c := soakConfig{Ops: defaultSoakOps, Workers: defaultSoakWorkers, Seed: uint64(time.Now().UnixNano())}
	for name, dst := range map[string]*int{"SOAK_OPS": &c.Ops, "SOAK_WORKERS": &c.Workers} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			require.NoError(t, err, "%s must be a positive integer", name)
			require.Positive(t, n, "%s must be a positive integer", name)
			*dst = n
		}
	}
	if v := os.Getenv("SOAK_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "SOAK_SEED must be an unsigned integer")
		c.Seed = s
	}
	return c
}

// soakOp is one operation of the soak and how its first runs are faulted.
type soakOp struct {
	soakExpectation
	Index      int
	path       string // the command file
	kubeconfig string // an identity with exactly the operation's rights
	// Dup is how many runs the first attempt starts at once.
	Dup int
	// Kills holds, per attempt, when to SIGKILL its first run (negative:
	// never).
	Kills []time.Duration
}

// soakRun is how one keyledger process ended.
type soakRun struct {
	Op, Attempt    int
	Code           int
	Killed, Hung   bool
	Stdout, Stderr string
}

// soakPlatform is the soak's own control plane, PostgreSQL and journal:
// the faults must not reach other tests.
type soakPlatform struct {
	e       *env
	pg      *platform.Postgres
	control *platform.APIServerControl
	secrets []string // tokens and the operator's password (canaries)
}

func TestIntegrationSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the real platform (run without -short)")
	}
	if os.Getenv(platform.DatabaseURLEnv) != "" {
		t.Skip("the soak crashes PostgreSQL: it needs its own container, not " + platform.DatabaseURLEnv)
	}
	cfg := soakConfigFromEnv(t)
	fmt.Fprintf(os.Stderr, "soak: seed %d, %d operations, %d workers (replay: make soak SOAK_SEED=%d SOAK_OPS=%d)\n", cfg.Seed, cfg.Ops, cfg.Workers, cfg.Seed, cfg.Ops)
	t.Logf("soak: seed %d, %d operations", cfg.Seed, cfg.Ops)
	p := startSoakPlatform(t)
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	hist, err := watchSecretHistory(t.Context(), p.e.Kube.EtcdURL(), p.e.NS)
	require.NoError(t, err)
	t.Cleanup(hist.stop)
	ops := p.prepareOps(t, rng, cfg.Ops)
	f := &faulter{kube: p.control, pg: p.pg, schedule: faultSchedule(rng, cfg.Ops), started: make(chan int, cfg.Ops), counts: map[faultKind]int{}}
	start := time.Now()
	runs := p.drive(t, f, ops, cfg.Workers)
	elapsed := time.Since(start)
	for _, r := range runs {
		if r.Killed {
			f.counts[faultKillRun]++
		}
	}
	for _, op := range ops {
		if op.Dup > 1 {
			f.counts[faultDuplicate]++
		}
	}
	summary := fmt.Sprintf("soak: seed %d, %d operations, %d runs in %s; faults %v; exits %v", cfg.Seed, cfg.Ops, len(runs), elapsed.Round(time.Second), f.counts, exitTally(runs))
	t.Log(summary)
	fmt.Fprintln(os.Stderr, summary)

	events := p.history(t, hist)
	problems := append([]string(nil), checkHistory(events, expectations(ops))...)
	problems = append(problems, checkRuns(runs)...)
	problems = append(problems, p.checkJournal(t, ops, runs)...)
	problems = append(problems, checkOutputs(runs, p.canaries(events, ops))...)
	for _, err := range f.errs {
		problems = append(problems, err.Error())
	}
	for _, k := range append([]faultKind{faultKillRun, faultDuplicate}, platformFaults...) {
		if f.counts[k] == 0 {
			problems = append(problems, fmt.Sprintf("fault %s never happened", k))
		}
	}
	require.Empty(t, problems, "soak seed %d (%d operations) failed; replay: make soak SOAK_SEED=%d SOAK_OPS=%d", cfg.Seed, cfg.Ops, cfg.Seed, cfg.Ops)

	// A write behind keyledger's back must be caught by the same checks.
	planted, rv := p.plantWrite(t, ops)
	events = p.history(t, hist)
	require.True(t, slices.ContainsFunc(events, func(ev secretEvent) bool { return strconv.FormatInt(ev.Rev, 10) == rv }),
		"etcd's recorded history lacks the planted write (revision %s): the record is incomplete", rv)
	after := checkHistory(events, expectations(ops))
	require.NotEmpty(t, after, "a planted second write to %s went unnoticed: the history check is vacuous (its writes %s of %d events)", planted, writes(eventsOf(events, planted)), len(events))
	require.Contains(t, fmt.Sprint(after), "Secret "+planted+" written", "the planted write is reported by name")
}

func eventsOf(events []secretEvent, name string) []secretEvent {
	var out []secretEvent
	for _, ev := range events {
		if ev.Name == name {
			out = append(out, ev)
		}
	}
	return out
}

func expectations(ops []*soakOp) []soakExpectation {
	out := make([]soakExpectation, len(ops))
	for i, op := range ops {
		out[i] = op.soakExpectation
	}
	return out
}

// startSoakPlatform starts the soak's own control plane and PostgreSQL
// container, builds the binary and makes a journal for one namespace.
func startSoakPlatform(t *testing.T) *soakPlatform {
	t.Helper()
	ctx := t.Context()
	bin := soakBinary(t)
	kube, err := platform.StartKube(ctx, platform.WithControllers("serviceaccount-controller", "namespace-controller"))
	require.NoError(t, err, "starting the soak's control plane")
	t.Cleanup(func() {
		if err := kube.Stop(); err != nil {
			t.Errorf("stopping the soak's control plane: %v", err)
		}
	})
	control, err := kube.APIServerControl()
	require.NoError(t, err)
	t.Cleanup(func() { _ = control.Close() }) // runs before kube.Stop
	pg, err := platform.StartPostgres(ctx)
	require.NoError(t, err, "starting the soak's PostgreSQL")
	t.Cleanup(func() { _ = pg.Terminate(context.Background()) })
	require.NoError(t, pg.MakeDurable(ctx), "a crash must lose no committed journal record")
	e := &env{T: t, Kube: kube, Binary: bin, Dir: t.TempDir()}
	e.NS = kube.Namespace(t)
	e.Journal, err = pg.NewJournal(ctx, "kl_soak_"+suite.RandomSuffix(t), e.NS)
	require.NoError(t, err)
	return &soakPlatform{e: e, pg: pg, control: control, secrets: []string{passwordOf(t, e.Journal.OperatorURL)}}
}

var soakBuild struct {
	once sync.Once
	path string
	err  error
}

// soakBinary builds keyledger once for the soak (the shared platform's
// binary comes with a control plane the soak does not use).
func soakBinary(t *testing.T) string {
	t.Helper()
	soakBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "keyledger-soak-")
		if err != nil {
			soakBuild.err = err
			return
		}
		soakBuild.path = filepath.Join(dir, "keyledger")
		build := exec.Command("go", "build", "-tags", "failpoints", "-o", soakBuild.path, "./cmd/keyledger")
		build.Dir, build.Env = platform.RepoRoot(), append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			soakBuild.err = fmt.Errorf("building keyledger: %v\n%s", err, out)
		}
	})
	require.NoError(t, soakBuild.err)
	return soakBuild.path
}

// passwordOf is the password in a database URL.
func passwordOf(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := urlParse(dbURL)
	require.NoError(t, err)
	pw, _ := u.User.Password()
	return pw
}

// identity makes a ServiceAccount holding exactly rules and returns a
// kubeconfig for it (a token valid for the longest soak).
func (p *soakPlatform) identity(t *testing.T, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	e := p.e
	ctx, c := t.Context(), e.Kube.Client()
	_, err := c.RbacV1().Roles(e.NS).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.RbacV1().RoleBindings(e.NS).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: e.NS}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg, err := e.Kube.ServiceAccountConfig(ctx, e.NS, name, 6*3600)
	require.NoError(t, err)
	p.secrets = append(p.secrets, cfg.BearerToken)
	path, err := e.Kube.KubeconfigForConfig(cfg, t.TempDir())
	require.NoError(t, err)
	return path
}

// prepareOps draws n operations (families in turn) with their faults, and
// creates what each needs: its Secret, its identity, its command file.
func (p *soakPlatform) prepareOps(t *testing.T, rng *rand.Rand, n int) []*soakOp {
	t.Helper()
	families := []soakFamily{familyRetirement, familyCredentials, familyVersioned}
	ops := make([]*soakOp, n)
	for i := range ops {
		op := &soakOp{Index: i, Dup: 1}
		op.Family = families[i%len(families)]
		if rng.IntN(5) == 0 {
			op.Dup = 2 + rng.IntN(2)
		}
		for a := range 2 {
			kill := time.Duration(-1)
			if i < len(families) && a == 0 || rng.IntN(3+3*a) == 0 {
				kill = time.Duration(rng.Int64N(int64(maxSoakKillDelay)))
			}
			op.Kills = append(op.Kills, kill)
		}
		p.prepare(t, op)
		ops[i] = op
	}
	return ops
}

func (p *soakPlatform) prepare(t *testing.T, op *soakOp) {
	t.Helper()
	e := p.e
	var cmd map[string]any
	var rules []rbacv1.PolicyRule
	switch op.Family {
	case familyRetirement:
		op.Mutation, op.KeyID = fmt.Sprintf("soak-ret-%d", op.Index), "k-2026-07"
		s := e.CreateSecret(suite.KeyringSecret(fmt.Sprintf("kr-%d", op.Index), suite.StandardKeyring()))
		op.Names, rules = []string{s.Name}, retire.Rules(s.Name)
		cmd = suite.RetireCommand(s, op.KeyID, op.Mutation)
	case familyCredentials:
		op.Mutation = fmt.Sprintf("soak-cred-%d", op.Index)
		secrets := []suite.PlanSecret{suite.StandardSecret(fmt.Sprintf("cred-%d-a", op.Index))}
		if op.Index%2 == 1 {
			secrets = append(secrets, suite.StandardSecret(fmt.Sprintf("cred-%d-b", op.Index)))
		}
		for _, s := range secrets {
			op.Names = append(op.Names, s.Name)
		}
		cmd = suite.CredentialPlan(e.NS, op.Mutation, secrets)
		rules = credentials.Rules(suite.SpecOf(t, cmd))
	case familyVersioned:
		op.Mutation = fmt.Sprintf("soak-vw-%d", op.Index)
		name := fmt.Sprintf("vw-%d", op.Index)
		op.Before = map[string][]byte{"password": suite.VCanary(fmt.Sprintf("before-%d", op.Index)), "username": []byte("app")}
		op.After = map[string][]byte{"password": suite.VCanary(fmt.Sprintf("after-%d", op.Index)), "username": []byte("app")}
		s := e.CreateSecret(suite.PlainSecret(name, op.Before))
		op.Names, rules = []string{name}, versioned.Rules(name)
		cmd = suite.UpdateCommand(e.NS, name, s.ResourceVersion, op.Mutation, map[string][]byte{"password": op.After["password"]})
	}
	op.path = e.WriteCommand(op.Mutation+".json", cmd)
	op.kubeconfig = p.identity(t, fmt.Sprintf("soak-%d", op.Index), rules)
}

// drive runs every operation to its end on workers goroutines while the
// faulter fires its schedule, and returns every run.
func (p *soakPlatform) drive(t *testing.T, f *faulter, ops []*soakOp, workers int) []soakRun {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	faultsDone := make(chan struct{})
	go func() { defer close(faultsDone); f.run(ctx) }()
	var (
		mu      sync.Mutex
		runs    []soakRun
		next    atomic.Int64
		started atomic.Int64
		wg      sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(ops); i = int(next.Add(1)) - 1 {
				select {
				case f.started <- int(started.Add(1)):
				default:
				}
				got := p.settle(ctx, ops[i])
				mu.Lock()
				runs = append(runs, got...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	cancel()
	<-faultsDone
	p.recover(t)
	return runs
}

// recover leaves the platform running: the API server started and
// resumed, PostgreSQL unpaused and accepting connections.
func (p *soakPlatform) recover(t *testing.T) {
	t.Helper()
	_ = p.control.Resume()
	if err := p.control.Start(context.WithoutCancel(t.Context())); err != nil && err.Error() != "the API server is still running" {
		t.Errorf("restarting the API server after the soak: %v", err)
	}
	_ = p.pg.Unpause(context.WithoutCancel(t.Context()))
	// A crash fired last may still be recovering (57P03).
	if err := p.pg.WaitReady(context.WithoutCancel(t.Context())); err != nil {
		t.Errorf("PostgreSQL after the soak: %v", err)
	}
}

// settle reruns an operation until every run of an attempt settled it (or
// soakSettleTime passes): attempt 0 starts op.Dup runs at once, and the first run of an
// attempt is killed when op.Kills says so.
func (p *soakPlatform) settle(ctx context.Context, op *soakOp) []soakRun {
	var all []soakRun
	deadline := time.Now().Add(soakSettleTime)
	for attempt := 0; time.Now().Before(deadline) && ctx.Err() == nil; attempt++ {
		n, kill := 1, time.Duration(-1)
		if attempt == 0 {
			n = op.Dup
		}
		if attempt < len(op.Kills) {
			kill = op.Kills[attempt]
		}
		got := make([]soakRun, n)
		var wg sync.WaitGroup
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i] = p.runOnce(ctx, op, attempt, map[bool]time.Duration{true: kill, false: -1}[i == 0])
			}()
		}
		wg.Wait()
		all = append(all, got...)
		if !slices.ContainsFunc(got, unsettled) {
			return all
		}
		logUnsettled(op, got)
		time.Sleep(min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second))
	}
	return append(all, soakRun{Op: op.Index, Attempt: -1, Code: -1, Stderr: "never settled"})
}

// unsettled says a run leaves its operation to a rerun: it was killed,
// exited other than 0 (a 75 asks for a rerun; concurrent runs of a plan
// may each start a run of their own), or exited 0 without the journal (a
// plan's sync that could not reach it exits 0 when nothing needs writing,
// "journal":"not-consulted", docs/security.md, and leaves its run open).
func unsettled(r soakRun) bool {
	return r.Code != 0 || r.Killed || runOutcome(r)["journal"] == "not-consulted"
}

// logUnsettled prints how an attempt ended (exit codes and reasons, never
// the runs' output) to follow a long soak.
func logUnsettled(op *soakOp, got []soakRun) {
	ends := make([]string, len(got))
	for i, r := range got {
		ends[i] = fmt.Sprintf("exit %d %v", r.Code, runOutcome(r)["reason"])
		if r.Killed {
			ends[i] = "killed"
		}
	}
	fmt.Fprintf(os.Stderr, "soak: %s attempt %d: %s\n", op.Mutation, got[0].Attempt, strings.Join(ends, ", "))
}

// runOnce runs the operation's command once, bounded by soakRunTimeout, and
// SIGKILLs it after kill when kill is not negative.
func (p *soakPlatform) runOnce(ctx context.Context, op *soakOp, attempt int, kill time.Duration) soakRun {
	ctx, cancel := context.WithTimeout(ctx, soakRunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.e.Binary, "run", op.path)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + p.e.Dir, "KUBECONFIG=" + op.kubeconfig, "KEYLEDGER_DATABASE_URL=" + p.e.Journal.OperatorURL}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	r := soakRun{Op: op.Index, Attempt: attempt}
	if err := cmd.Start(); err != nil {
		r.Code, r.Stderr = -1, "starting keyledger: "+err.Error()
		return r
	}
	var killed atomic.Bool
	if kill >= 0 {
		timer := time.AfterFunc(kill, func() {
			killed.Store(true)
			_ = cmd.Process.Signal(syscall.SIGKILL)
		})
		defer timer.Stop()
	}
	err := cmd.Wait()
	r.Stdout, r.Stderr, r.Code = stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Code = 128 + int(ws.Signal())
		r.Killed = killed.Load() && ws.Signal() == syscall.SIGKILL
	}
	r.Hung = ctx.Err() == context.DeadlineExceeded
	_ = err
	return r
}
