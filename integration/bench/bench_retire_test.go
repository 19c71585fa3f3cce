package bench

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/workflow/retire/keyring"
	"github.com/keyledger/keyledger/workflow/retire/keyring/keyringtest"
)

// largestKeyring is the largest manifest the format allows to be valid:
// 16 keys and 63 receipts (room for one more), every identifier 128
// characters long. Any larger manifest is refused as too-large or invalid.
func largestKeyring() *keyring.Manifest {
	id := func(prefix string, i int) string {
		s := fmt.Sprintf("%s-%03d-", prefix, i)
		return s + strings.Repeat("x", 128-len(s))
	}
	var opts []keyringtest.Option
	for i := range 16 {
		k := id("k", i)
		opts = append(opts, keyringtest.WithKey(k, "2026-07-01T00:00:00Z", keyringtest.Material(k)))
	}
	opts = append(opts, keyringtest.WithActive(id("k", 15)), keyringtest.WithGeneration(100))
	for i := range 63 {
		opts = append(opts, keyringtest.WithRetirement(keyring.Retirement{
			KeyID: id("gone", i), RetirementID: id("ret", i), RequestID: id("req", i), MutationID: id("mut", i),
			MaterialDigest: keyring.MaterialDigest(keyringtest.Material(id("gone", i))), Generation: int64(i + 1),
			RetiredAt: "2026-01-01T00:00:00Z",
		}))
	}
	return keyringtest.New(opts...)
}

// TestBenchRetire measures one retirement run as a process against the
// local platform, and a `kubectl get` + `kubectl replace` pair on the same
// kind of Secret as the baseline, interleaved.
func TestBenchRetire(t *testing.T) {
	benchEnabled(t)
	e := suite.Setup(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Log("kubectl not found: the baseline is skipped")
	}
	const runs = 15
	bin := releaseBinary(t)
	m := largestKeyring()
	keyID := m.Keys[0].ID
	var keyledgerSamples, pooledSamples []suite.Sample
	other, compared := compareBinary(), []suite.Sample(nil)
	// The same runs through a session pooler in front of the journal
	// (README, "A session pooler"), interleaved: a session the pooler
	// hands on is warm, where a new one pays for its catalog caches.
	pooledURL := e.PooledIfInstalled("retire", platform.PgBouncerOptions{PoolSize: 8})
	var wall, base []time.Duration
	// The journal's part of a run, replayed by this process on a new
	// session and through the pooler, interleaved with the runs.
	var replay *journalReplay
	var journalNew, journalPooled []time.Duration
	var rss, anon, file []int64
	// retireOnce retires a key from a new copy of the keyring Secret with
	// binary, its journal at dbURL, and checks the one write.
	retireOnce := func(binary, dbURL, name string) suite.Sample {
		t.Helper()
		s := e.CreateSecret(suite.KeyringSecret(name, m))
		path := e.WriteCommand(name+".json", suite.RetireCommand(s, keyID, "mut-"+name))
		ks := measureRun(e, t, binary, []string{"run", path}, dbURL, e.AsRetirerOf(s))
		require.Equal(t, 1, e.SecretWrites(s.Name, s.ResourceVersion, e.GetSecret(s.Name).ResourceVersion))
		return ks
	}
	for i := range runs {
		ks := retireOnce(bin, e.Journal.OperatorURL, fmt.Sprintf("bench-%d", i))
		keyledgerSamples = append(keyledgerSamples, ks)
		wall = append(wall, ks.Wall)
		rss = append(rss, ks.PeakRSS())
		anon = append(anon, ks.KiB("rss_anon_kib"))
		file = append(file, ks.KiB("rss_file_kib"))
		if pooledURL != "" {
			pooledSamples = append(pooledSamples, retireOnce(bin, pooledURL, fmt.Sprintf("pooled-%d", i)))
		}
		if replay == nil {
			r := retirementReplay(e, t, "mut-bench-0")
			replay = &r
		}
		journalNew = append(journalNew, replay.run(t, e.Journal.OperatorURL, fmt.Sprintf("mut-replay-%d", i)))
		if pooledURL != "" {
			journalPooled = append(journalPooled, replay.run(t, pooledURL, fmt.Sprintf("mut-replay-pooled-%d", i)))
		}
		if other != "" {
			compared = append(compared, retireOnce(other, e.Journal.OperatorURL, fmt.Sprintf("compare-%d", i)))
		}
		if kubectl != "" {
			b := e.CreateSecret(suite.KeyringSecret(fmt.Sprintf("base-%d", i), m))
			base = append(base, kubectlGetReplace(t, kubectl, e.Kube.KubeconfigFile(), e.NS, b.Name))
		}
	}
	last := keyledgerSamples[len(keyledgerSamples)-1].Summary
	suite.BenchLine("retire manifest_bytes=%d keys=%d receipts=%d runs=%d", len(m.Encode()), len(m.Keys), len(m.Retirements), runs)
	suite.BenchLine("retire api_requests=%v by_verb=%q pg_transactions=%v", last["api_requests"], last["api_requests_by_verb"], last["pg_transactions"])
	suite.BenchLine("retire wall_median=%s peak_rss_median=%.1fMiB (at exit: anon %.1fMiB, file-backed binary pages %.1fMiB) (targets: <80ms, <40MiB)",
		ms(median(wall)), mib(median(rss)), mib(median(anon)), mib(median(file)))
	if len(base) > 0 {
		suite.BenchLine("baseline kubectl get+replace wall_median=%s", ms(median(base)))
		suite.BenchLine("ratio keyledger/kubectl-pair=%.2f", float64(median(wall))/float64(median(base)))
	}
	benchPhases(t, "retire", keyledgerSamples)
	suite.BenchLine("retire cpu per run (medians, every process on the machine while it ran): %s", cpuReport(machineUses(keyledgerSamples)))
	if pooledURL != "" {
		benchPooled(t, "retire", pooledSamples, wall, base)
	}
	benchCompare(t, "retire", keyledgerSamples, compared, base)
	target := time.Duration(0)
	if len(base) > 0 {
		target = median(base) / 5 // the goal: at most 0.20x the pair
	}
	benchJournalBudget(t, "retire", keyledgerSamples, journalNew, journalPooled, target)
	floor := e.CreateSecret(suite.KeyringSecret("bench-floor", m))
	benchFloors(t, e, kubeconfigOf(e.AsRetirerOf(floor), e.NS, floor.Name), e.NS, floor.Name, pooledURL)
}
