package workflow_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/kube/kubefake"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// TestExecutePrefetchesOnceThePermissionMatrixHeld: Plan.Prefetch is
// called once the permission matrix held, before the journal is opened;
// a matrix that does not hold calls neither.
func TestExecutePrefetchesOnceThePermissionMatrixHeld(t *testing.T) {
	t.Parallel()
	for _, allowed := range []bool{true, false} {
		fake, client := kubefake.NewClientset()
		fake.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
			review := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
			review.Status.Allowed = allowed
			return true, review, nil
		})
		var (
			mu    sync.Mutex
			order []string
		)
		note := func(s string) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, s)
		}
		family := &scripted{decide: func(*workflow.Run, func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
			note("decide")
			return workflow.Decision{Complete: &workflow.Completion{Outcome: workflow.OutcomeExisting}}
		}, resolve: noResolve}
		plan := workflow.Plan{Prepare: toy("m"), Family: family,
			Access:   []kube.AccessCheck{{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "x", Allowed: true}},
			Prefetch: func(context.Context) { note("prefetch") }}
		deps := workflow.Deps{Kube: client, OpenStore: func(context.Context) (workflow.Store, error) {
			note("open journal")
			return workflowtest.NewJournal(), nil
		}}
		_, err := workflow.Execute(t.Context(), deps, plan)
		if allowed {
			require.NoError(t, err)
			// The journal connects beside the prefetch (and the precheck):
			// both before the first decision.
			require.ElementsMatch(t, []string{"prefetch", "open journal"}, order[:2])
			require.Equal(t, "decide", order[2])
			continue
		}
		var mismatch *workflow.PermissionMismatch
		require.ErrorAs(t, err, &mismatch)
		require.Empty(t, order, "nothing read, nothing opened")
	}
}

// closeCounting is a journal that counts its Close calls.
type closeCounting struct {
	workflow.Store
	closed *atomic.Int32
}

func (c closeCounting) Close() { c.closed.Add(1); c.Store.Close() }

// TestExecuteConnectsTheJournalBesideThePrecheck: the journal connects
// while the precheck runs, never before the permission matrix held; a
// precheck that fails ends the run with its error and closes the journal
// that opened meanwhile (or stops the open), and a journal that does not
// open is still unavailable once the precheck passed.
func TestExecuteConnectsTheJournalBesideThePrecheck(t *testing.T) {
	t.Parallel()
	access := []kube.AccessCheck{{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "x", Allowed: true}}
	complete := &scripted{decide: func(*workflow.Run, func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
		return workflow.Decision{Complete: &workflow.Completion{Outcome: workflow.OutcomeExisting}}
	}, resolve: noResolve}
	allowing := func(allowed bool) kube.Interface {
		fake, client := kubefake.NewClientset()
		fake.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
			review := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
			review.Status.Allowed = allowed
			return true, review, nil
		})
		return client
	}
	// The precheck waits for the journal's open to start: a run that
	// opened it only after the precheck would never get past it (the
	// bound only keeps such a run from hanging the test).
	waitFor := func(ch <-chan struct{}) error {
		select {
		case <-ch:
			return nil
		case <-time.After(30 * time.Second):
			return errors.New("the journal was not connecting during the precheck")
		}
	}
	refused := errors.New("precheck refused")

	t.Run("matrix refused: nothing opened, no precheck", func(t *testing.T) {
		var opened, prechecked atomic.Int32
		deps := workflow.Deps{Kube: allowing(false), OpenStore: func(context.Context) (workflow.Store, error) {
			opened.Add(1)
			return workflowtest.NewJournal(), nil
		}}
		plan := workflow.Plan{Prepare: toy("m"), Family: complete, Access: access,
			Precheck: func(context.Context) error { prechecked.Add(1); return nil }}
		_, err := workflow.Execute(t.Context(), deps, plan)
		var mismatch *workflow.PermissionMismatch
		require.ErrorAs(t, err, &mismatch)
		require.Zero(t, opened.Load(), "PostgreSQL is not contacted before the permission matrix held")
		require.Zero(t, prechecked.Load())
	})
	t.Run("precheck passes: one journal, opened beside it", func(t *testing.T) {
		var closed atomic.Int32
		started := make(chan struct{})
		deps := workflow.Deps{Kube: allowing(true), OpenStore: func(context.Context) (workflow.Store, error) {
			close(started)
			return closeCounting{workflowtest.NewJournal(), &closed}, nil
		}}
		plan := workflow.Plan{Prepare: toy("m"), Family: complete, Access: access,
			Precheck: func(context.Context) error { return waitFor(started) }}
		res, err := workflow.Execute(t.Context(), deps, plan)
		require.NoError(t, err)
		require.Equal(t, workflow.OutcomeExisting, res.Outcome)
		require.Equal(t, int32(1), closed.Load())
	})
	t.Run("precheck fails after the journal opened: closed", func(t *testing.T) {
		var closed atomic.Int32
		opened := make(chan struct{})
		deps := workflow.Deps{Kube: allowing(true), OpenStore: func(context.Context) (workflow.Store, error) {
			defer close(opened)
			return closeCounting{workflowtest.NewJournal(), &closed}, nil
		}}
		plan := workflow.Plan{Prepare: toy("m"), Family: complete, Access: access,
			Precheck: func(context.Context) error {
				if err := waitFor(opened); err != nil {
					return err
				}
				return refused
			}}
		_, err := workflow.Execute(t.Context(), deps, plan)
		require.ErrorIs(t, err, refused, "the precheck's error, unchanged")
		require.Equal(t, int32(1), closed.Load(), "no connection is left")
	})
	t.Run("precheck fails while the journal connects: the open stops", func(t *testing.T) {
		started := make(chan struct{})
		var ended atomic.Bool
		deps := workflow.Deps{Kube: allowing(true), OpenStore: func(ctx context.Context) (workflow.Store, error) {
			close(started)
			<-ctx.Done() // an open that would not end by itself
			ended.Store(true)
			return nil, ctx.Err()
		}}
		plan := workflow.Plan{Prepare: toy("m"), Family: complete, Access: access,
			Precheck: func(context.Context) error {
				if err := waitFor(started); err != nil {
					return err
				}
				return refused
			}}
		_, err := workflow.Execute(t.Context(), deps, plan)
		require.ErrorIs(t, err, refused)
		var unavailable *workflow.Unavailable
		require.False(t, errors.As(err, &unavailable), "a failed precheck is not the journal's failure")
		require.True(t, ended.Load(), "the open has returned when the run ends")
	})
	t.Run("precheck passes, the journal does not open: unavailable", func(t *testing.T) {
		deps := workflow.Deps{Kube: allowing(true), OpenStore: func(context.Context) (workflow.Store, error) {
			return nil, errors.New("database unreachable")
		}}
		plan := workflow.Plan{Prepare: toy("m"), Family: complete, Access: access,
			Precheck: func(context.Context) error { return nil }}
		_, err := workflow.Execute(t.Context(), deps, plan)
		var unavailable *workflow.Unavailable
		require.ErrorAs(t, err, &unavailable)
		require.Equal(t, "postgresql", unavailable.Dependency)
	})
}
