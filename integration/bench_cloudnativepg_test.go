package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/integration/platform"
)

// TestBenchRetireCloudNativePG measures what the journal's synchronous
// replication costs a retirement: the median run against the journal on
// the three-instance Cluster (a commit waits for a standby's flush), then
// the same Cluster scaled to one instance without synchronous replication,
// in the same run, from this machine through the -rw Service.
func TestBenchRetireCloudNativePG(t *testing.T) {
	benchEnabled(t)
	if reason := platform.OperatorsSkipReason(); reason != "" {
		t.Skip(reason)
	}
	ne := setupNode(t)
	j := deployCloudNativePGJournal(ne)
	bin := nodeShared.binary // the release build inside the image
	const runs = 9
	round := func(label string) time.Duration {
		var wall []time.Duration
		for i := range runs {
			m := standardKeyring()
			s := ne.createSecret(keyringSecret(fmt.Sprintf("bench-%s-%d", label, i), m))
			path := ne.writeCommand(fmt.Sprintf("bench-%s-%d.json", label, i), retireCommand(s, "k-2026-07", fmt.Sprintf("mut-bench-%s-%d", label, i)))
			cmd := exec.Command(bin, "run", path)
			ne.asRetirerOf(s)(cmd)
			env := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + ne.dir, "KEYLEDGER_DATABASE_URL=" + ne.journal.OperatorURL}, cmd.Env...)
			wall = append(wall, measure(t, bin, []string{"run", path}, env).wall)
		}
		return median(wall)
	}
	three := round("three")

	// One instance, no synchronous replication (with dataDurability
	// required and no standby, commits would wait forever).
	patch := []byte(`{"spec":{"instances":1,"postgresql":{"synchronous":null}}}`)
	_, err := ne.dynamicClient().Resource(clusterGVR).Namespace(journalNamespace).Patch(t.Context(), journalCluster, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	j.waitCluster("one Ready instance", 5*time.Minute, func(s clusterStatus) bool {
		return s.Instances == 1 && s.ReadyInstances == 1 && s.Phase == "Cluster in healthy state"
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, j.owner)
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
	one := round("one")
	benchLine("retire-cloudnativepg runs=%d three_instances_sync_median_ms=%.1f one_instance_median_ms=%.1f ratio=%.2f",
		runs, float64(three.Microseconds())/1000, float64(one.Microseconds())/1000, float64(three)/float64(one))
}
