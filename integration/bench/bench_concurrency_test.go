package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/integration/suite"
)

// lockSampler samples, every few milliseconds from a connection of its own,
// the heavyweight locks PostgreSQL sessions of one database wait for
// (pg_locks not granted, joined with pg_stat_activity), while keyledger
// processes run. A wait seen in consecutive samples (same waiting process,
// same lock) is one wait.
type lockSampler struct {
	cancel  context.CancelFunc
	done    chan struct{}
	samples int
	// waits are the distinct waits, by "locktype mode relation".
	waits map[string]int
	seen  map[string]bool
	// statements are the waiting statements (SQL text, no parameters), by wait.
	statements map[string]string
	err        error
}

// lockWaitsQuery lists the lock requests not granted in this database.
const lockWaitsQuery = `
	SELECT l.pid, l.locktype, l.mode, coalesce(l.relation::regclass::text, ''),
	       coalesce(l.transactionid::text, '') || coalesce(l.virtualxid, '') || coalesce(l.objid::text, '') || '/' || coalesce(l.page::text, '') || '/' || coalesce(l.tuple::text, ''),
	       left(regexp_replace(a.query, '\s+', ' ', 'g'), 160)
	  FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
	 WHERE NOT l.granted AND a.datname = current_database()`

// sampleLocks starts sampling the database at url (a superuser's, which
// sees every session's activity) every interval.
func sampleLocks(t *testing.T, url string, interval time.Duration) *lockSampler {
	t.Helper()
	conn := suite.Connect(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	s := &lockSampler{cancel: cancel, done: make(chan struct{}), waits: map[string]int{}, seen: map[string]bool{}, statements: map[string]string{}}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			if err := s.sample(ctx, conn); err != nil {
				if ctx.Err() == nil {
					s.err = err
				}
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *lockSampler) sample(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, lockWaitsQuery)
	if err != nil {
		return err
	}
	defer rows.Close()
	now := map[string]bool{}
	for rows.Next() {
		var pid int
		var locktype, mode, relation, object, query string
		if err := rows.Scan(&pid, &locktype, &mode, &relation, &object, &query); err != nil {
			return err
		}
		key := fmt.Sprintf("%d %s %s %s %s", pid, locktype, mode, relation, object)
		now[key] = true
		if !s.seen[key] {
			kind := strings.TrimSpace(fmt.Sprintf("%s %s %s", locktype, mode, relation))
			s.waits[kind]++
			s.statements[kind] = query
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	s.samples++
	s.seen = now
	return nil
}

// stop ends sampling and returns the number of distinct waits.
func (s *lockSampler) stop(t *testing.T) int {
	t.Helper()
	s.cancel()
	<-s.done
	require.NoError(t, s.err, "sampling pg_locks")
	n := 0
	for _, c := range s.waits {
		n += c
	}
	return n
}

// kinds is "type mode relation=count, ..." of the waits, most frequent first.
func (s *lockSampler) kinds() string {
	if len(s.waits) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(s.waits))
	for k := range s.waits {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return s.waits[keys[i]] > s.waits[keys[j]] || s.waits[keys[i]] == s.waits[keys[j]] && keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, s.waits[k])
	}
	return strings.Join(parts, ", ")
}

// concurrentRun is one keyledger process of a concurrent batch.
type concurrentRun struct {
	wall time.Duration
	res  suite.Result
}

// runConcurrently starts one process per command at once (the same
// moment, after all are prepared) and waits for all; elapsed is from the
// start to the last exit. It never fails the test from another goroutine.
func runConcurrently(t *testing.T, cmds []*exec.Cmd) (runs []concurrentRun, elapsed time.Duration) {
	t.Helper()
	runs = make([]concurrentRun, len(cmds))
	outs := make([]struct{ stdout, stderr strings.Builder }, len(cmds))
	errs := make([]error, len(cmds))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, cmd := range cmds {
		cmd.Stdout, cmd.Stderr = &outs[i].stdout, &outs[i].stderr
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			began := time.Now()
			errs[i] = cmd.Run()
			runs[i].wall = time.Since(began)
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed = time.Since(began)
	for i := range cmds {
		runs[i].res = suite.Result{Stdout: outs[i].stdout.String(), Stderr: outs[i].stderr.String()}
		if errs[i] != nil {
			exitErr, ok := errs[i].(*exec.ExitError)
			if !ok {
				t.Fatalf("running keyledger: %v", errs[i])
			}
			runs[i].res.Code = exitErr.ExitCode()
		}
	}
	return runs, elapsed
}

// releaseCmd is a keyledger process of the release binary, with the
// environment e.keyledger gives it (as the options say).
func releaseCmd(e *suite.Env, ctx context.Context, bin string, args []string, opts ...suite.RunOption) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.Dir, "KUBECONFIG=" + e.Kube.KubeconfigFile(),
		"KEYLEDGER_DATABASE_URL=" + e.Journal.OperatorURL}
	for _, o := range opts {
		o(cmd)
	}
	return cmd
}

// percentile is the nearest-rank p-th percentile (0 < p <= 100).
func percentile(xs []time.Duration, p float64) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(s))+0.999999) - 1
	return s[max(0, min(rank, len(s)-1))]
}

// TestBenchConcurrentRuns runs 1, 8 and 32 keyledger processes (the
// release binary) at once against one PostgreSQL, each retiring a key of a
// keyring Secret of its own (distinct targets, distinct operations, one
// namespace and its namespace role), 32 runs per level (32 rounds of 1, 4
// of 8, 1 of 32). It prints throughput, the median and p99 process wall
// time, and the lock waits sampled in pg_locks while they ran: every wait
// there is between distinct operations (goal: none). Then 32 processes run
// one credential plan at once, and the API server's watch history counts
// the writes to each planned Secret (goal: one).
func TestBenchConcurrentRuns(t *testing.T) {
	benchEnabled(t)
	e := suite.Setup(t)
	bin := releaseBinary(t)
	m := suite.StandardKeyring()
	const perLevel = 32
	type prepared struct {
		path string
		as   suite.RunOption
		s    *corev1.Secret
	}
	prepare := func(level, i int) prepared {
		name := fmt.Sprintf("conc-%d-%d", level, i)
		s := e.CreateSecret(suite.KeyringSecret(name, m))
		path := e.WriteCommand(name+".json", suite.RetireCommand(s, "k-2026-06", "mut-"+name))
		return prepared{path: path, as: e.AsRetirerOf(s), s: s}
	}
	// Every process's session and a first transaction of the schema, once,
	// so that the first level does not pay for the catalog caches alone.
	warm := prepare(0, 0)
	require.Equal(t, 0, e.Keyledger([]string{"run", warm.path}, warm.as, withBinary(bin)).Code)

	for _, level := range []int{1, 8, 32} {
		batch := make([]prepared, perLevel)
		for i := range batch {
			batch[i] = prepare(level, i)
		}
		sampler := sampleLocks(t, e.Journal.OwnerURL, 3*time.Millisecond)
		var walls []time.Duration
		var elapsed time.Duration
		for round := range perLevel / level {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			cmds := make([]*exec.Cmd, level)
			for i := range cmds {
				p := batch[round*level+i]
				cmds[i] = releaseCmd(e, ctx, bin, []string{"run", p.path}, p.as)
			}
			runs, took := runConcurrently(t, cmds)
			cancel()
			elapsed += took
			for i, r := range runs {
				require.Equal(t, 0, r.res.Code, "run %d of %d at once: stdout %s stderr %s", i, level, r.res.Stdout, r.res.Stderr)
				require.Equal(t, "completed", suite.Outcome(t, r.res)["outcome"])
				walls = append(walls, r.wall)
			}
		}
		waits := sampler.stop(t)
		for kind, stmt := range sampler.statements {
			t.Logf("concurrent=%d wait %s in: %s", level, kind, stmt)
		}
		suite.BenchLine("concurrent-runs concurrent=%d runs=%d throughput=%.1f/s wall_median=%s wall_p99=%s lock_waits=%d (%s) pg_locks_samples=%d (goal: lock_waits=0)",
			level, len(walls), float64(len(walls))/elapsed.Seconds(), ms(median(walls)), ms(percentile(walls, 99)), waits, sampler.kinds(), sampler.samples)
		for _, p := range batch {
			require.Equal(t, 1, e.SecretWrites(p.s.Name, p.s.ResourceVersion, e.GetSecret(p.s.Name).ResourceVersion), "%s written once", p.s.Name)
		}
	}

	// 32 runs of one plan at once: one write per Secret.
	const planSecrets = 8
	secrets, names := suite.ConcurrentPlanSecrets(planSecrets)
	plan := suite.CredentialPlan(e.NS, "mut-conc-plan", secrets)
	path := e.WriteCommand("conc-plan.json", plan)
	as := e.AsCredentialRunner(plan)
	from := e.SecretsRV()
	sampler := sampleLocks(t, e.Journal.OwnerURL, 3*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmds := make([]*exec.Cmd, 32)
	for i := range cmds {
		cmds[i] = releaseCmd(e, ctx, bin, []string{"run", path}, as)
	}
	runs, took := runConcurrently(t, cmds)
	waits := sampler.stop(t)
	var walls []time.Duration
	outcomes := map[string]int{}
	for i, r := range runs {
		outcomes[suite.ConcurrentPlanOutcome(t, i, r.res)]++
		walls = append(walls, r.wall)
	}
	writes := e.SecretWritesSince(from)
	perSecret := make([]string, 0, len(names))
	most := 0
	for _, n := range names {
		perSecret = append(perSecret, fmt.Sprintf("%d", writes[n]))
		most = max(most, writes[n])
	}
	suite.BenchLine("concurrent-plan concurrent=32 secrets=%d elapsed=%s wall_median=%s wall_p99=%s outcomes=%v",
		planSecrets, ms(took), ms(median(walls)), ms(percentile(walls, 99)), outcomes)
	suite.BenchLine("concurrent-plan writes_per_secret=[%s] max=%d (API server watch history; goal: 1 each)", strings.Join(perSecret, " "), most)
	suite.BenchLine("concurrent-plan lock_waits=%d (%s): runs of one plan drive one operation, so these are waits within one operation", waits, sampler.kinds())
	for _, n := range names {
		require.Equal(t, 1, writes[n], "%s written once", n)
	}
}
