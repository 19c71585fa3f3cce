package suite

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// APIRequest is one request keyledger sent through an apiRecorder, with
// what the real API server answered: the answer's kind and whether it
// carried data are read from a JSON answer; a protobuf answer (a whole
// object, as client-go asks for by default) has Kind "protobuf".
type APIRequest struct {
	Method, Path, Accept string
	Status               int
	ContentType          string
	Kind                 string
	HasData              bool
}

// WritesBetween counts the writes the API server made to one object after
// resourceVersion from, up to and including the write that produced until,
// by replaying the object's watch history. It proves "exactly one write"
// from the authority's own record, not from what keyledger says.
func WritesBetween(t *testing.T, open func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error), name, from, until string) int {
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

// SecretEvent is one event of the namespace's Secrets in the API server's
// watch history.
type SecretEvent struct {
	Type   watch.EventType
	Secret *corev1.Secret
}

// secretEventsSince is every event of the namespace's Secrets after
// resourceVersion from, up to now, read from the API server's watch
// history: it writes a marker Secret and replays the history until the
// marker's creation (excluded); bookmarks are skipped.
func (e *Env) secretEventsSince(from string) []SecretEvent {
	e.T.Helper()
	marker := e.CreateSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "zz-history-marker-" + RandomSuffix(e.T)}})
	ctx, cancel := context.WithTimeout(e.T.Context(), 30*time.Second)
	defer cancel()
	w, err := e.Kube.Client().CoreV1().Secrets(e.NS).Watch(ctx, metav1.ListOptions{ResourceVersion: from})
	require.NoError(e.T, err, "opening watch")
	defer w.Stop()
	var out []SecretEvent
	for {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(e.T, ok, "watch closed before the marker was seen")
			require.NotEqual(e.T, watch.Error, ev.Type, "watch error: %v", ev.Object)
			if ev.Type == watch.Bookmark {
				continue
			}
			s, ok := ev.Object.(*corev1.Secret)
			require.True(e.T, ok, "a Secret watch event holds a %T", ev.Object)
			if s.UID == marker.UID {
				return out
			}
			out = append(out, SecretEvent{Type: ev.Type, Secret: s})
		case <-ctx.Done():
			e.T.Fatalf("the marker Secret never appeared in the watch history after %s", from)
		}
	}
}
