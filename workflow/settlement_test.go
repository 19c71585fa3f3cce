package workflow

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
)

// Settled is the one definition of "done": the newest call of a step on a
// target, settled by the newest answer or resolution after it.
func TestSettled(t *testing.T) {
	t.Parallel()
	call := func(attempt, batch int) store.Record {
		return store.Record{Kind: store.RecordAuthorityCall, Step: "s", Target: store.SecretTarget("", "a"), Attempt: attempt, Batch: batch}
	}
	result := func(status AnswerStatus) store.Record {
		return store.Record{Kind: store.RecordAuthorityResult, Step: "s", Target: store.SecretTarget("", "a"), Status: status}
	}
	resolution := func(kind VerdictKind) store.Record {
		return store.Record{Kind: store.RecordResolution, Step: "s", Target: store.SecretTarget("", "a"), Status: kind}
	}
	other := store.Record{Kind: store.RecordAuthorityResult, Step: "s", Target: store.SecretTarget("", "b"), Status: Applied}
	tests := []struct {
		name    string
		records []store.Record
		settled bool
		by      store.RecordKind
		attempt int
	}{
		{"never called", []store.Record{other}, false, "", 0},
		{"applied", []store.Record{call(1, 1), result(Applied)}, true, store.RecordAuthorityResult, 1},
		{"sent, no answer yet", []store.Record{call(1, 1)}, false, "", 0},
		{"rejected", []store.Record{call(1, 1), result(Rejected)}, false, "", 0},
		{"lost, not resolved", []store.Record{call(1, 1), result(Unknown)}, false, "", 0},
		{"lost, resolved ours", []store.Record{call(1, 1), result(Unknown), resolution(Ours)}, true, store.RecordResolution, 1},
		{"lost, undetermined, then ours on a rerun", []store.Record{call(1, 1), result(Unknown), resolution(Undetermined), resolution(Ours)}, true, store.RecordResolution, 1},
		{"lost, resolved theirs", []store.Record{call(1, 1), result(Unknown), resolution(Theirs)}, false, "", 0},
		{"not applied, sent again, open", []store.Record{call(1, 1), result(Unknown), resolution(NotApplied), call(2, 2)}, false, "", 0},
		{"not applied, sent again, applied", []store.Record{call(1, 1), result(Unknown), resolution(NotApplied), call(2, 2), result(Applied)}, true, store.RecordAuthorityResult, 2},
		{"an older call's answer does not settle a newer call", []store.Record{call(1, 1), result(Applied), call(2, 2)}, false, "", 0},
		{"another target's answer settles nothing", []store.Record{call(1, 1), other}, false, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			run := &Run{Records: tt.records}
			s, ok := run.Settled("s", store.SecretTarget("", "a"))
			require.Equal(t, tt.settled, ok)
			require.Equal(t, tt.by, s.By.Kind)
			require.Equal(t, tt.attempt, s.Call.Attempt)
		})
	}
}

// The engine's open calls are exactly the newest batch's calls that
// Settled does not settle; unanswered ones are those with no answer at all.
func TestOpenCallsFollowSettled(t *testing.T) {
	t.Parallel()
	rec := func(kind store.RecordKind, name string, batch int, status store.Status) store.Record {
		return store.Record{Kind: kind, Step: "create", Target: store.SecretTarget("", name), Batch: batch, Status: status}
	}
	run := &Run{Records: []store.Record{
		rec(store.RecordAuthorityCall, "old", 1, ""),
		rec(store.RecordAuthorityResult, "old", 0, Applied),
		rec(store.RecordAuthorityCall, "a", 2, ""),
		rec(store.RecordAuthorityCall, "b", 2, ""),
		rec(store.RecordAuthorityCall, "c", 2, ""),
		rec(store.RecordAuthorityResult, "a", 0, Applied),
		rec(store.RecordAuthorityResult, "b", 0, Unknown),
	}}
	targets := func(records []store.Record) []string {
		var out []string
		for _, r := range records {
			out = append(out, r.Target.String())
		}
		return out
	}
	require.Equal(t, []string{"secret/b", "secret/c"}, targets(run.unsettled()))
	require.Equal(t, []string{"secret/c"}, targets(run.unanswered()))
	require.Equal(t, 2, run.lastBatch())
}

// Each runs every index exactly once, never more than limit at once, and
// as many at once as limit allows: the first limit calls each wait until
// limit are in flight, which a pool of fewer would never reach.
func TestEach(t *testing.T) {
	t.Parallel()
	const limit = 3
	for _, n := range []int{0, 1, 2, 3, 40} {
		var mu sync.Mutex
		ran := make([]int, n)
		inFlight, most := 0, 0
		full := make(chan struct{})
		Each(n, limit, func(i int) {
			mu.Lock()
			ran[i]++
			inFlight++
			most = max(most, inFlight)
			if inFlight == limit && most == limit && i < limit {
				close(full)
			}
			mu.Unlock()
			if n >= limit && i < limit {
				select {
				case <-full:
				case <-time.After(10 * time.Second):
					t.Errorf("%d calls: never %d in flight", n, limit)
				}
			}
			time.Sleep(time.Millisecond)
			mu.Lock()
			inFlight--
			mu.Unlock()
		})
		for i, c := range ran {
			require.Equal(t, 1, c, "index %d of %d", i, n)
		}
		require.LessOrEqual(t, most, limit)
		if n >= limit {
			require.Equal(t, limit, most, "%d calls", n)
		}
	}
}
