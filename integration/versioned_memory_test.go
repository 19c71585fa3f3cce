package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/workflow/versioned"
)

// seedSecrets creates n Secrets named prefix-0000... in the test's
// namespace (as admin, 8 at a time), each with annotate's annotations.
func (e *env) seedSecrets(prefix string, n int, annotate func(i int) map[string]string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 10*time.Minute)
	defer cancel()
	c := e.kube.Client().CoreV1().Secrets(e.ns)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%04d", prefix, i), Annotations: annotate(i)},
				Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"k": []byte("v")}}
			if _, err := c.Create(ctx, s, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(e.t, err)
	}
}

// More Secrets than versioned.MaxHistoryClaims claiming the live UID: the
// update is refused (exit 2, history-too-large, the count in its summary)
// before anything is written, and `history` is refused the same way; below
// the cap both go on.
func TestIntegrationVersionedHistoryCap(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("capped")
	live := e.createSecret(plainSecret("capped", map[string][]byte{"password": []byte("v0")}))
	e.seedSecrets("claims", versioned.MaxHistoryClaims+1, func(int) map[string]string {
		return map[string]string{versioned.AnnotationSourceUID: string(live.UID)}
	})

	r := e.runCmd(updateCommand(e.ns, "capped", live.ResourceVersion, "mut-capped", map[string][]byte{"password": []byte("v1")}), as)
	out := requireRefused(t, r, versioned.ReasonHistoryTooLarge)
	require.EqualValues(t, versioned.MaxHistoryClaims+1, out["historyClaims"], "stdout %s", r.Stdout)
	require.EqualValues(t, versioned.MaxHistoryClaims, out["maxHistoryClaims"])
	require.Equal(t, live.ResourceVersion, e.getSecret("capped").ResourceVersion, "nothing written")
	require.Empty(t, e.versionsOf(live.UID), "no snapshot taken")

	h := e.keyledger([]string{"history", e.ns + "/capped"}, as)
	require.Equal(t, 2, h.Code, "stdout %s stderr %s", h.Stdout, h.Stderr)
	require.Contains(t, h.Stderr, "[history-too-large, exit 2]")
	require.Contains(t, h.Stderr, fmt.Sprintf("%d Secrets in the namespace claim", versioned.MaxHistoryClaims+1))

	// Two fewer: 255 claimants, and the write's own snapshot makes 256.
	c := e.kube.Client().CoreV1().Secrets(e.ns)
	for _, name := range []string{"claims-0000", "claims-0001"} {
		require.NoError(t, c.Delete(t.Context(), name, metav1.DeleteOptions{}))
	}
	r = e.runCmd(updateCommand(e.ns, "capped", live.ResourceVersion, "mut-capped-2", map[string][]byte{"password": []byte("v1")}), as)
	requireOK(t, r, "completed")
	require.Equal(t, []string{"1"}, e.versionsOf(live.UID))
	h = e.keyledger([]string{"history", e.ns + "/capped"}, as)
	require.Equal(t, 0, h.Code, h.Stderr)
}

// runSummary is keyledger's "run finished" line from stderr.
func runSummary(t *testing.T, r result) map[string]any {
	t.Helper()
	s := sample{}
	for _, line := range strings.Split(r.Stderr, "\n") {
		if strings.Contains(line, `"msg":"run finished"`) {
			s.summary = map[string]any{}
			require.NoError(t, json.Unmarshal([]byte(line), &s.summary))
		}
	}
	require.NotNil(t, s.summary, "no run finished line: %s", r.Stderr)
	return s.summary
}
