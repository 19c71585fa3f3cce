package credentials

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/kubetest"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// manySecrets is a plan of n Secrets of one generated key each: past one
// read-secrets chunk when n > completeChunk.
func manySecrets(n int) func(Spec) Spec {
	return func(s Spec) Spec {
		s.Secrets = nil
		for i := range n {
			s.Secrets = append(s.Secrets, Secret{Name: fmt.Sprintf("shop-%02d", i),
				Keys: []Key{{Name: "password", Generate: &Generate{Length: 16, Alphabet: AlphabetAlphanumeric}}}})
		}
		return s
	}
}

// overlapKube holds each Secret and ExternalSecret read until a read of
// the other kind is in flight with it (or a bound passes: reads made one
// round after the other never meet), and says whether they met.
type overlapKube struct {
	*credentialsAPI
	mu       sync.Mutex
	inflight map[opKind]int
	met      chan struct{}
	once     sync.Once
}

func newOverlapKube(k *credentialsAPI) *overlapKube {
	return &overlapKube{credentialsAPI: k, inflight: map[opKind]int{}, met: make(chan struct{})}
}

func (o *overlapKube) hold(op opKind) func() {
	o.mu.Lock()
	o.inflight[op]++
	if o.inflight[opGetSecret] > 0 && o.inflight[opGetExternal] > 0 {
		o.once.Do(func() { close(o.met) })
	}
	o.mu.Unlock()
	select {
	case <-o.met:
	case <-time.After(200 * time.Millisecond):
	}
	return func() {
		o.mu.Lock()
		o.inflight[op]--
		o.mu.Unlock()
	}
}

func (o *overlapKube) overlapped() bool {
	select {
	case <-o.met:
		return true
	default:
		return false
	}
}

func (o *overlapKube) GetSecret(ctx context.Context, name string) (*corev1.Secret, error) {
	defer o.hold(opGetSecret)()
	return o.credentialsAPI.GetSecret(ctx, name)
}

func (o *overlapKube) GetExternalSecret(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	defer o.hold(opGetExternal)()
	return o.credentialsAPI.GetExternalSecret(ctx, name)
}

// TestSecretReadsShareTheExternalSecretsRound: the first decision of a run
// reads the planned Secrets in the same concurrent round as their
// ExternalSecrets, and decides from those reads (one GET per Secret, no
// second round), on a first sync and on a rerun. (Reading the Secrets only
// after every ExternalSecret read, or one at a time, never meets.)
func TestSecretReadsShareTheExternalSecretsRound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, manySecrets(4)(basePlan()))
	for _, want := range []string{"completed", "existing"} {
		o := newOverlapKube(e.k)
		f := newFamily(e.cmd, o)
		f.probe, f.poll, f.reprobe, f.random = e.k.probe, pollAtOnce, pollAtOnce, e.random
		plan := e.plan()
		plan.Family = f
		before := e.k.count(opGetSecret, "shop-00")
		res, err := workflow.Operate(context.Background(), e.j, plan, nil)
		require.NoError(t, err)
		require.Equal(t, want, res.Run.Op.Outcome)
		require.True(t, o.overlapped(), "%s: a Secret read and an ExternalSecret read in flight together", want)
		require.Equal(t, 1, e.k.count(opGetSecret, "shop-00")-before, "%s: one read of each planned Secret", want)
	}
}

// TestSecretReadsWaitForAdoption: when the first decision finds an
// ExternalSecret (here one someone else is deleting, waited for in the
// same decision), the Secret reads of that round are not decided from:
// the Secret is read again once the garbage collector released it, and
// its patch is built from that read (applied at once: no failed
// resourceVersion test to resolve).
func TestSecretReadsWaitForAdoption(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(s Spec) Spec {
		s.Adopt = []Adopt{{ExternalSecret: secretApp}}
		return s
	}(basePlan()))
	adoptable(e)
	e.k.gcHold[secretApp] = 2
	e.k.script(on(opGetExternal, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
		k.editExternal(secretApp, func(es *unstructured.Unstructured) {
			now := metav1.Now()
			es.SetDeletionTimestamp(&now)
		})
	}))))
	r := e.run()
	require.Equal(t, "completed", r.Ending())
	require.Equal(t, []string{"patch-secret secret/shop-app", "create-secret secret/shop-bus"}, r.calls())
	require.Empty(t, r.trail(store.RecordResolution, ""), "every call applied as decided")
	requireAdopted(t, e)
}

// countingJournal counts the journal's FindInRuns questions: asked one at
// a time, and asked together (FindEachInRuns, one round trip each).
type countingJournal struct {
	*workflowtest.Journal
	mu            sync.Mutex
	single, batch int
	questions     int
	failBatches   bool
}

func (c *countingJournal) FindInRuns(ctx context.Context, p store.RunRecordParams) (*store.RunRecord, error) {
	c.mu.Lock()
	c.single++
	c.mu.Unlock()
	return c.Journal.FindInRuns(ctx, p)
}

func (c *countingJournal) FindEachInRuns(ctx context.Context, ps []store.RunRecordParams) ([]*store.RunRecord, error) {
	c.mu.Lock()
	c.batch++
	c.questions += len(ps)
	fail := c.failBatches
	c.mu.Unlock()
	if fail {
		return nil, errors.New("connection reset")
	}
	return c.Journal.FindEachInRuns(ctx, ps)
}

func (c *countingJournal) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.single, c.batch, c.questions = 0, 0, 0
}

// runOn runs the plan once on j (as env.run, with j as the journal).
func (e *env) runOn(j workflow.Store) result {
	e.t.Helper()
	res, err := workflow.Operate(context.Background(), j, e.plan(), nil)
	require.NotNil(e.t, res.Run, "prepared: %v", err)
	op, records, serr := e.j.Snapshot(context.Background(), "", res.Run.Op.MutationID)
	require.NoError(e.t, serr)
	return result{res: res, op: op, records: records, err: err}
}

// TestAuthorshipQuestionsAskedTogether: the journal's authorship questions
// about the Secrets found in place are asked in a few round trips (one per
// dependent question: the chunk's record, then a verdict and a read naming
// the UID), never one per Secret, and the decision is what asking them one
// at a time decides.
func TestAuthorshipQuestionsAskedTogether(t *testing.T) {
	t.Parallel()
	const n = 40 // two read-secrets chunks
	t.Run("planted Secrets: unproven", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, manySecrets(n)(basePlan()))
		j := &countingJournal{Journal: e.j}
		for _, s := range e.cmd.Spec.Secrets {
			e.k.putSecret(theirSecret(s.Name, map[string]string{"password": "known-to-them"}))
		}
		r := e.runOn(j)
		require.Equal(t, "existing", r.Ending())
		require.Equal(t, n, r.unproven())
		require.Zero(t, j.single, "no question asked one at a time")
		require.LessOrEqual(t, j.batch, maxGatherRounds)
		require.Equal(t, 2+2*n, j.questions, "each chunk's record, then a verdict and a read naming each UID")
	})
	t.Run("the same plan again: its creates, then the chunk records answer", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, manySecrets(n)(basePlan()))
		j := &countingJournal{Journal: e.j}
		require.Equal(t, "completed", e.runOn(j).Ending())
		j.reset()
		r := e.runOn(j)
		require.Equal(t, "existing", r.Ending())
		require.Zero(t, r.unproven())
		require.Equal(t, 0, j.single)
		require.Equal(t, 2, j.batch, "the chunks' records (none yet), then each nonce's create")
		require.Equal(t, 2+n, j.questions)
		j.reset()
		r = e.runOn(j)
		require.Equal(t, "existing", r.Ending())
		require.Zero(t, r.unproven())
		require.Equal(t, 0, j.single)
		require.Equal(t, 1, j.batch, "one round trip")
		require.Equal(t, 2, j.questions, "the two chunks' records")
	})
	t.Run("another plan's Secrets: the nonce's create asked, then the UID's records", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, manySecrets(n)(basePlan()))
		require.Equal(t, "completed", e.run().Ending())
		other := newEnv(t, manySecrets(n)(basePlan()))
		other.k, other.cmd.Metadata.MutationID = e.k, "m-2"
		j := &countingJournal{Journal: other.j}
		r := other.runOn(j)
		require.Equal(t, "existing", r.Ending())
		require.Equal(t, n, r.unproven(), "another plan's creates prove nothing for this one")
		require.Zero(t, j.single)
		require.Equal(t, maxGatherRounds, j.batch)
		require.Equal(t, 2+3*n, j.questions)
	})
	t.Run("asking together fails: asked one at a time, same decision", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, manySecrets(n)(basePlan()))
		require.Equal(t, "completed", e.run().Ending())
		require.Equal(t, "existing", e.run().Ending())
		j := &countingJournal{Journal: e.j, failBatches: true}
		r := e.runOn(j)
		require.Equal(t, "existing", r.Ending())
		require.Zero(t, r.unproven())
		require.Equal(t, 1, j.batch)
		require.Equal(t, 2, j.single, "the two chunks' records, each asked once")
	})
}

// TestKeptFields: what a decision keeps of a Secret it read holds no value
// (the bytes read are zeroed) and no metadata another writer can grow, but
// everything the decision reads.
func TestKeptFields(t *testing.T) {
	t.Parallel()
	now := metav1.Now()
	yes := true
	value := []byte("known-to-them")
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "shop-app", UID: "u-1", ResourceVersion: "7", DeletionTimestamp: &now,
			Labels: map[string]string{LabelArgoInstance: "shop"},
			Annotations: map[string]string{AnnotationNonce: "n", AnnotationCreatedBy: "m-1:run-1", AnnotationArgoTracking: "t",
				"big.example/annotation": string(make([]byte, 1<<16))},
			OwnerReferences: []metav1.OwnerReference{{Kind: kindExternalSecret, Name: "shop-app"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "someone"}}},
		Type: corev1.SecretTypeOpaque, Immutable: &yes,
		Data: map[string][]byte{"password": value, "empty": nil},
	}
	keptFields(s)
	require.Equal(t, make([]byte, len("known-to-them")), value, "the value read is zeroed")
	require.Equal(t, map[string][]byte{"password": nil, "empty": nil}, s.Data, "the keys stay, without values")
	require.Equal(t, map[string]string{AnnotationNonce: "n", AnnotationCreatedBy: "m-1:run-1", AnnotationArgoTracking: "t"}, s.Annotations)
	require.Nil(t, s.ManagedFields)
	require.Equal(t, "u-1", string(s.UID))
	require.Equal(t, "7", s.ResourceVersion)
	require.NotNil(t, s.DeletionTimestamp)
	require.Equal(t, map[string]string{LabelArgoInstance: "shop"}, s.Labels)
	require.Len(t, s.OwnerReferences, 1)
	require.True(t, *s.Immutable)
	require.Equal(t, corev1.SecretTypeOpaque, s.Type)

	bare := &corev1.Secret{}
	keptFields(bare)
	require.Nil(t, bare.Annotations)
	require.Nil(t, bare.Data, "no data stays no data (a patch adds /data whole)")
}

// TestPrefetchedRound: the round of reads Prefetch starts (while the
// journal connects) is what the first decision of a fresh run decides
// from: each Secret and each ExternalSecret read once in the run. A
// resumed run reads again: its prefetched round is not decided from.
func TestPrefetchedRound(t *testing.T) {
	t.Parallel()
	t.Run("fresh run", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, basePlan())
		plan := e.plan()
		f := e.family()
		plan.Family = f
		f.prefetch(context.Background())
		res, err := workflow.Operate(context.Background(), e.j, plan, nil)
		require.NoError(t, err)
		require.Equal(t, "completed", res.Run.Op.Outcome)
		for _, name := range []string{secretApp, secretBus} {
			require.Equal(t, 1, e.k.count(opGetSecret, name), "%s read once", name)
			require.Equal(t, 1, e.k.count(opGetExternal, name), "%s's ExternalSecret read once", name)
			e.requirePlanned(name, true)
		}
	})
	t.Run("resumed run", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, basePlan())
		e.k.script(readFails(opGetExternal, secretApp))
		first := e.run()
		require.Equal(t, store.StatePrepared, first.op.State, "stopped before any record but its preparation")
		plan := e.plan()
		f := e.family()
		plan.Family = f
		f.prefetch(context.Background())
		res, err := workflow.Operate(context.Background(), e.j, plan, nil)
		require.NoError(t, err)
		require.Equal(t, first.op.MutationID, res.Run.Op.MutationID, "the same run, resumed")
		require.Equal(t, "completed", res.Run.Op.Outcome)
		require.Equal(t, 3, e.k.count(opGetExternal, secretApp), "the failed read, the prefetched one, and the decision's own")
		require.Equal(t, 3, e.k.count(opGetSecret, secretApp), "in the first process's round, prefetched, then read again by the decision")
	})
}
