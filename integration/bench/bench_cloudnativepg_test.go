package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
)

// TestBenchRetireCloudNativePG measures what the journal's synchronous
// replication costs a retirement: the median run against the journal on
// the three-instance Cluster (a commit waits for a standby's flush), then
// the same Cluster scaled to one instance without synchronous replication,
// in the same run, from this machine through the -rw Service. On the
// three-instance Cluster each run is paired with one through the journal's
// Pooler (deploy/journal/pooler, session mode), interleaved: what a warm
// session saves on the real deployment.
func TestBenchRetireCloudNativePG(t *testing.T) {
	benchEnabled(t)
	if reason := platform.OperatorsSkipReason(); reason != "" {
		t.Skip(reason)
	}
	ne := suite.SetupNode(t)
	j := suite.DeployCloudNativePGJournal(ne)
	bin := suite.NodeBinary() // the release build inside the image
	const runs = 9
	run := func(label string, i int, journalURL string) time.Duration {
		m := suite.StandardKeyring()
		s := ne.CreateSecret(suite.KeyringSecret(fmt.Sprintf("bench-%s-%d", label, i), m))
		path := ne.WriteCommand(fmt.Sprintf("bench-%s-%d.json", label, i), suite.RetireCommand(s, "k-2026-07", fmt.Sprintf("mut-bench-%s-%d", label, i)))
		return measureRun(ne.Env, t, bin, []string{"run", path}, journalURL, ne.AsRetirerOf(s)).Wall
	}
	j.WaitPooler(4 * time.Minute)
	pooledURL := j.PoolerURL()
	var threeWalls, pooledWalls []time.Duration
	for i := range runs {
		threeWalls = append(threeWalls, run("three", i, ne.Journal.OperatorURL))
		pooledWalls = append(pooledWalls, run("pooled", i, pooledURL))
	}
	three, pooled := median(threeWalls), median(pooledWalls)
	suite.BenchLine("retire-cloudnativepg-pooled runs=%d through_pooler_median_ms=%.1f direct_median_ms=%.1f ratio pooled/direct=%.2f",
		runs, float64(pooled.Microseconds())/1000, float64(three.Microseconds())/1000, float64(pooled)/float64(three))

	// One instance, no synchronous replication (with dataDurability
	// required and no standby, commits would wait forever).
	patch := []byte(`{"spec":{"instances":1,"postgresql":{"synchronous":null}}}`)
	_, err := ne.DynamicClient().Resource(suite.ClusterGVR).Namespace(suite.JournalNamespace).Patch(t.Context(), suite.JournalCluster, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	j.WaitCluster("one Ready instance", 5*time.Minute, func(s suite.ClusterStatus) bool {
		return s.Instances == 1 && s.ReadyInstances == 1 && s.Phase == "Cluster in healthy state"
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, j.Owner)
		if err == nil {
			var names string
			qerr := conn.QueryRow(ctx, "SHOW synchronous_standby_names").Scan(&names)
			_ = conn.Close(context.Background())
			if qerr == nil && names == "" {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("the single instance still names synchronous standbys")
		case <-time.After(time.Second):
		}
	}
	var oneWalls []time.Duration
	for i := range runs {
		oneWalls = append(oneWalls, run("one", i, ne.Journal.OperatorURL))
	}
	one := median(oneWalls)
	suite.BenchLine("retire-cloudnativepg runs=%d three_instances_sync_median_ms=%.1f one_instance_median_ms=%.1f ratio=%.2f",
		runs, float64(three.Microseconds())/1000, float64(one.Microseconds())/1000, float64(three)/float64(one))
}
