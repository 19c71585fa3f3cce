package versioned

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/kubetest"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

const (
	testNamespace = "shop"
	testName      = "orders-db"
)

// env is one unit-test world: the API double, one journal shared by every
// command run in it, and the retention limit.
type env struct {
	t     *testing.T
	api   secretsAPI
	j     *workflowtest.Journal
	limit int
	seq   int
	// first is the outcome of a run a row's setup made before the run
	// under test (a resume).
	first outcome
	// failMove, when set, makes the journal refuse the first transition it
	// matches (the process "crashes" before committing it): the operation
	// stays where it was.
	failMove func(p store.TransitionParams) bool
	// cmd is the command a row's Setup made (see given).
	cmd *Command
}

// Run runs the row's command, counting the double's calls of this run
// only.
func (e *env) Run() outcome {
	e.t.Helper()
	e.api.ResetCounts()
	e.api.snapshotReads.Store(0)
	return e.run(e.cmd)
}

// Finish: nothing beyond each row's Check.
func (e *env) Finish(*testing.T) {}

func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{t: t, api: newSecretsAPI(testNamespace, testName), j: workflowtest.NewJournal(), limit: DefaultHistoryLimit}
}

// seedLive stores the live Secret (someone else's create) with version
// annotation version ("" for none) and data k1, v1, k2, v2, ...
func (e *env) seedLive(version string, kv ...string) *corev1.Secret {
	s := kubetest.NewSecret(testName, kubetest.WithData(kv...), kubetest.WithAnnotations())
	if version != "" {
		kubetest.WithAnnotations(AnnotationVersion, version)(s)
	}
	return e.api.SeedSecret(s)
}

func (e *env) command(kind string) *Command {
	e.seq++
	id := fmt.Sprintf("mut-%03d", e.seq)
	return &Command{Kind: kind, Metadata: command.Metadata{RequestID: "req-" + id, MutationID: id},
		Digest: fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(id+kind))), Namespace: testNamespace, Name: testName}
}

// update sets kv on the live Secret read at rv ("" creates it).
func (e *env) update(rv string, kv ...string) *Command {
	c := e.command(command.KindSecretUpdate)
	c.ExpectedResourceVersion, c.Data = rv, kubetest.Data(kv...)
	return c
}

func (e *env) restore(rv string, version int64) *Command {
	c := e.command(command.KindSecretRestore)
	c.ExpectedResourceVersion, c.Version = rv, version
	return c
}

func (e *env) delete(rv string, keepHistory bool) *Command {
	c := e.command(command.KindSecretDelete)
	c.ExpectedResourceVersion, c.KeepHistory = rv, keepHistory
	return c
}

// live returns the stored live Secret (nil when absent).
func (e *env) live() *corev1.Secret { return e.api.Secret(testName) }

// rv is the live Secret's resourceVersion now.
func (e *env) rv() string {
	e.t.Helper()
	s := e.live()
	require.NotNil(e.t, s, "live Secret")
	return s.ResourceVersion
}

// snap returns the stored snapshot of version n of the live UID uid.
func (e *env) snap(uid types.UID, n int64) *corev1.Secret { return e.api.Secret(SnapshotName(uid, n)) }

// history runs n updates through the family on a live Secret seeded at
// version 1: genuine snapshots v1..vn (journaled), live at version n+1.
func (e *env) history(n int) *corev1.Secret {
	e.t.Helper()
	e.seedLive("1", "password", "v1")
	for i := range n {
		o := e.run(e.update(e.rv(), "password", fmt.Sprintf("v%d", i+2)))
		require.NoError(e.t, o.err, "history update %d", i+1)
	}
	return e.live()
}

// plant stores a look-alike of the snapshot of version n of live: the same
// name, labels and annotations keyledger would write, and a nonce no
// journal holds. Nothing proves it keyledger's.
func (e *env) plant(live *corev1.Secret, n int64) *corev1.Secret {
	return e.api.SeedSecret(lookalike(live, n))
}

// outcome is how one run ended and what it journaled.
type outcome struct {
	mutationID string
	res        *workflow.Result
	err        error
	records    []store.Record
}

// run runs cmd as `keyledger run` does after the permission matrix: the
// precheck, the prefetch, then the operation on the env's journal.
func (e *env) run(cmd *Command) outcome {
	e.t.Helper()
	p := plan(cmd, e.api, e.limit)
	ctx := context.Background()
	if err := p.Precheck(ctx); err != nil {
		return outcome{mutationID: cmd.Metadata.MutationID, err: err}
	}
	p.Prefetch(ctx)
	var st workflow.Store = e.j
	if e.failMove != nil {
		st = &failingJournal{Journal: e.j, fail: e.failMove}
	}
	res, err := workflow.Operate(ctx, st, p, nil)
	o := outcome{mutationID: cmd.Metadata.MutationID, res: res, err: err}
	if _, recs, serr := e.j.Snapshot(ctx, "", cmd.Metadata.MutationID); serr == nil {
		o.records = recs
	}
	return o
}

// failingJournal refuses the first transition fail matches, as a crash
// before its commit would leave the journal.
type failingJournal struct {
	*workflowtest.Journal
	fail func(p store.TransitionParams) bool
}

var errCrash = errors.New("crash before the commit")

func (f *failingJournal) Transition(ctx context.Context, p store.TransitionParams) (*store.Operation, error) {
	if f.fail != nil && f.fail(p) {
		f.fail = nil
		return nil, errCrash
	}
	return f.Journal.Transition(ctx, p)
}

// Ending is the run's ending, in workflowtest.Ending's spelling.
func (o outcome) Ending() string { return workflowtest.Ending(o.res, o.err) }

// Trail is the operation's journal in short: calls, answers, resolutions
// and the ending. Snapshot targets are named by their version ("v3").
func (o outcome) Trail() []string {
	out := []string{}
	for _, r := range o.records {
		target := ""
		if text := r.Target.String(); strings.HasPrefix(text, "secret/keyledger-h-") && strings.LastIndex(text, "-v") > 0 {
			target = " " + text[strings.LastIndex(text, "-v")+1:]
		}
		switch r.Kind {
		case store.RecordAuthorityCall:
			out = append(out, "call "+r.Step+target)
		case store.RecordAuthorityResult:
			out = append(out, "result "+r.Step+target+" "+join(string(r.Status), string(r.Reason)))
		case store.RecordResolution:
			out = append(out, "resolve "+r.Step+target+" "+join(string(r.Status), string(r.Reason)))
		case store.RecordRefusal:
			out = append(out, "refuse "+string(r.Reason))
		case store.RecordCompletion:
			out = append(out, "complete "+string(r.Status))
		}
	}
	return out
}

func join(status, reason string) string {
	if reason == "" {
		return status
	}
	return status + "/" + reason
}

// observations counts the operation's read-live observations.
func (o outcome) observations() int {
	n := 0
	for _, r := range o.records {
		if r.Kind == store.RecordObservation && r.Step == StepReadLive {
			n++
		}
	}
	return n
}

// ending is the detail of the completion or refusal record.
func (o outcome) ending() map[string]any {
	return workflowtest.Fields((&workflow.Run{Records: o.records}).Ending())
}

// last returns the newest record of kind and step.
func (o outcome) last(kind store.RecordKind, step string) store.Record {
	for i := len(o.records) - 1; i >= 0; i-- {
		if o.records[i].Kind == kind && o.records[i].Step == step {
			return o.records[i]
		}
	}
	return store.Record{}
}
