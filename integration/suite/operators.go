package suite

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/keyledger/keyledger/integration/platform"
)

// The real External Secrets controller (EXTERNAL_SECRETS_VERSION, built
// from the Go module proxy, its CRDs from the same module) runs out of
// cluster against a control plane of its own: it reconciles every
// ExternalSecret it sees, so it must not share the loopback control plane
// whose adoption tests create ExternalSecrets no controller may touch.
// PostgreSQL and the keyledger binary are the shared platform's.
var esoShared struct {
	once sync.Once
	err  error
	kube *platform.Kube
	eso  *platform.ExternalSecrets
}

// StopESOPlatform stops the controller and its control plane (TestMain).
func StopESOPlatform(failed bool) {
	s := &esoShared
	if s.eso != nil {
		if failed {
			fmt.Fprintln(os.Stderr, "external-secrets: controller log tail:\n"+Tail(s.eso.Log(), 30))
		}
		_ = s.eso.Stop()
	}
	if s.kube != nil {
		if err := s.kube.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the External Secrets control plane:", err)
		}
	}
}

// Tail is the last lines of s.
func Tail(s string, lines int) string {
	all := bytes.Split([]byte(s), []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return string(bytes.Join(all, []byte("\n")))
}

// SecretHistory is every write to the Secret name after resourceVersion
// from, up to now; none of them a delete.
func (e *Env) SecretHistory(name, from string) []*corev1.Secret {
	e.T.Helper()
	var out []*corev1.Secret
	for _, ev := range e.secretEventsSince(from) {
		if ev.Secret.Name == name {
			require.NotEqual(e.T, watch.Deleted, ev.Type, "Secret %s was deleted", name)
			out = append(out, ev.Secret)
		}
	}
	return out
}

// ResourceVersions lists the writes of a history by resourceVersion only
// (a failure message must never print a Secret's data).
func ResourceVersions(history []*corev1.Secret) []string {
	out := make([]string, len(history))
	for i, s := range history {
		out[i] = s.ResourceVersion
	}
	return out
}

func startESOPlatform() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	s := &esoShared
	if s.kube, s.err = platform.StartKube(ctx); s.err != nil {
		return
	}
	start := time.Now()
	s.eso, s.err = platform.StartExternalSecrets(ctx, s.kube)
	if s.err == nil {
		fmt.Fprintf(os.Stderr, "external-secrets: controller ready in %s\n", time.Since(start).Round(time.Millisecond))
	}
}

// SetupESO gives a test the External Secrets control plane with the live
// controller, a fresh namespace and a fresh journal on the shared
// PostgreSQL. KEYLEDGER_OPERATORS=off skips it visibly.
func SetupESO(t *testing.T) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the real platform (run without -short)")
	}
	if reason := platform.OperatorsSkipReason(); reason != "" {
		t.Skip(reason)
	}
	shared.once.Do(startPlatform)
	if shared.err != nil {
		t.Fatalf("platform: %v", shared.err)
	}
	esoShared.once.Do(startESOPlatform)
	if esoShared.err != nil {
		t.Fatalf("External Secrets platform: %v", esoShared.err)
	}
	ns := esoShared.kube.Namespace(t)
	j, err := shared.pg.NewJournal(t.Context(), "kl_"+RandomSuffix(t), ns, ToyNamespace)
	require.NoError(t, err)
	return &Env{T: t, Kube: esoShared.kube, NS: ns, Journal: j, Binary: shared.binary, Dir: t.TempDir()}
}

// ESOLog is the External Secrets controller's log (after SetupESO).
func ESOLog() string { return esoShared.eso.Log() }
