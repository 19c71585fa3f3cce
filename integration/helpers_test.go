package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// writesBetween counts the writes the API server made to one object after
// resourceVersion from, up to and including the write that produced until,
// by replaying the object's watch history. It proves "exactly one write"
// from the authority's own record, not from what keyledger says.
func writesBetween(t *testing.T, open func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error), name, from, until string) int {
	t.Helper()
	if from == until {
		return 0
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	w, err := open(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: from})
	require.NoError(t, err, "opening watch")
	defer w.Stop()
	writes := 0
	for {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "watch closed before resourceVersion %s was seen", until)
			require.NotEqual(t, watch.Error, ev.Type, "watch error: %v", ev.Object)
			if ev.Type == watch.Bookmark {
				continue
			}
			writes++
			m, err := meta.Accessor(ev.Object)
			require.NoError(t, err)
			if m.GetResourceVersion() == until {
				return writes
			}
		case <-ctx.Done():
			t.Fatalf("resourceVersion %s never appeared in the watch history after %s", until, from)
		}
	}
}

// journalOf reads an operation and its records as the schema owner.
func (e *env) journalOf(mutationID string) (*store.Operation, []store.Record) {
	e.t.Helper()
	st, err := store.Open(e.t.Context(), e.journal.OwnerURL)
	require.NoError(e.t, err)
	defer st.Close()
	op, err := st.Load(e.t.Context(), "", mutationID)
	require.NoError(e.t, err)
	records, err := st.Records(e.t.Context(), op.ID)
	require.NoError(e.t, err)
	return op, records
}

// kinds lists the record kinds in order.
func kinds(records []store.Record) []store.RecordKind {
	out := make([]store.RecordKind, len(records))
	for i, r := range records {
		out[i] = r.Kind
	}
	return out
}

// count counts records of one kind (workflowtest.Count).
func count(records []store.Record, kind store.RecordKind) int {
	return workflowtest.Count(records, kind)
}

// writeCommand writes a command file (mode 0600) and returns its absolute path.
// runTogether starts n runs of the binary with args at the same moment and
// returns how each ended, in start order.
func (e *env) runTogether(n int, args []string, opts ...runOption) []result {
	e.t.Helper()
	results := make([]result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = e.keyledger(args, opts...)
		}()
	}
	close(start)
	wg.Wait()
	return results
}

func (e *env) writeCommand(name string, v any) string {
	e.t.Helper()
	b, err := json.Marshal(v)
	require.NoError(e.t, err)
	path := filepath.Join(e.dir, name)
	require.NoError(e.t, os.WriteFile(path, b, 0o600))
	return path
}

// outcome decodes the one JSON line a run prints on stdout.
func outcome(t *testing.T, r result) map[string]any {
	t.Helper()
	var out map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &out), "stdout must be one JSON line: %q (stderr %s)", r.Stdout, r.Stderr)
	return out
}
