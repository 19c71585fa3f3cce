package versioned

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/kubetest"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// orderJournal notes the order of the preparation and the journal's
// provenance reads.
type orderJournal struct {
	*workflowtest.Journal
	order []string
}

func (j *orderJournal) Prepare(ctx context.Context, p store.PrepareParams) (*store.Operation, bool, error) {
	j.order = append(j.order, "prepare")
	return j.Journal.Prepare(ctx, p)
}

func (j *orderJournal) StepRecords(ctx context.Context, p store.StepRecordsParams) ([][]store.Record, error) {
	j.order = append(j.order, "step-records")
	return j.Journal.StepRecords(ctx, p)
}

// TestDigestWaitReadsAhead: the history listed by the prefetch and the
// journal's provenance of it are read before the operation is prepared
// (while an update's digest is still being computed), and the first
// decision takes them: one listing and one journal read per run, and the
// same records as a run without the prefetch, which reads them after the
// preparation. The digest still pending then is the one journaled.
func TestDigestWaitReadsAhead(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, prefetch bool) (*orderJournal, outcome, *env) {
		t.Helper()
		e := newEnv(t)
		cmd := twoVersions(e)
		e.api.ResetCounts()
		j := &orderJournal{Journal: e.j}
		// A digest left pending by Load (it is done by the time it is
		// resolved: the order below does not depend on it).
		p := &pendingDigest{done: make(chan struct{}), value: cmd.Digest}
		cmd.Digest, cmd.pending = "", p
		close(p.done)
		pl := plan(cmd, e.api, e.limit)
		ctx := context.Background()
		require.NoError(t, pl.Precheck(ctx))
		if prefetch {
			pl.Prefetch(ctx)
		}
		res, err := workflow.Operate(ctx, j, pl, nil)
		o := outcome{mutationID: cmd.Metadata.MutationID, res: res, err: err}
		_, o.records, _ = e.j.Snapshot(ctx, "", cmd.Metadata.MutationID)
		require.Equal(t, "completed", o.Ending())
		require.Equal(t, p.value, res.Run.Op.CommandDigest)
		pruned(t, e, o)
		return j, o, e
	}

	j, o, e := run(t, true)
	require.Equal(t, []string{"step-records", "prepare"}, j.order, "the journal is read before the preparation")
	require.Equal(t, map[kubetest.Verb]int{kubetest.Get: 2, kubetest.List: 1, kubetest.Create: 1, kubetest.Delete: 1, kubetest.Update: 1}, e.api.VerbCounts(),
		"the precheck's GET, the prefetch's LIST, the archive's re-read before the live write")

	j2, o2, e2 := run(t, false)
	require.Equal(t, []string{"prepare", "step-records"}, j2.order, "without the prefetch the first decision reads the journal")
	require.Equal(t, e.api.VerbCounts(), e2.api.VerbCounts())
	require.Equal(t, digests(o2.records), digests(o.records), "the same records either way")
	require.Equal(t, o2.Trail(), o.Trail())
}

// TestRunReadsBindOnlyAPreparedRun: the precheck's read (and the listing
// made ahead) serve the first decision only of an operation that has
// journaled nothing but its preparation; a resumed operation with records
// reads afresh (what those records did is not in the reads).
func TestRunReadsBindOnlyAPreparedRun(t *testing.T) {
	t.Parallel()
	prep := store.Record{Kind: store.RecordPreparation, Step: string(store.RecordPreparation)}
	ahead := func() *family {
		return &family{cmd: &Command{}, seen: &runReads{liveRead: true, listed: "uid-1"}}
	}

	f := ahead()
	fresh := &workflow.Run{Records: []store.Record{prep}}
	m := f.runReads(fresh)
	require.True(t, m.liveRead, "a prepared run takes the reads")
	require.Equal(t, "uid-1", string(m.listed))

	f = ahead()
	resumed := &workflow.Run{Records: []store.Record{prep, {Kind: store.RecordAuthorityCall, Step: StepCreateSnapshot, Target: store.SecretTarget(testNamespace, "x")}}}
	m = f.runReads(resumed)
	require.False(t, m.liveRead, "a resumed run reads the live Secret afresh")
	require.Empty(t, m.listed, "and lists afresh")
}
