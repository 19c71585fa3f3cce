package credentials

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
)

// pipelinedSecrets is the number of Secrets of the pipelined plan: two
// chunks of creates (the engine journals and sends a batch of more than 8
// calls in chunks, 8 then 12 here).
const pipelinedSecrets = 20

// withManySecrets plans pipelinedSecrets Secrets in all: basePlan's two
// and more of one generated key each.
func withManySecrets(s Spec) Spec {
	for i := len(s.Secrets); i < pipelinedSecrets; i++ {
		s.Secrets = append(s.Secrets, Secret{Name: fmt.Sprintf("shop-extra-%02d", i),
			Keys: []Key{{Name: "password", Generate: &Generate{Length: 24, Alphabet: AlphabetAlphanumeric}}}})
	}
	return s
}

// crashAtChunk kills the process at the first transaction that journals
// creates while the operation stays in calling (the second chunk of the
// batch, the first one in flight): before it commits, or right after.
func crashAtChunk(committed bool) func(p store.TransitionParams) (bool, error) {
	done := false
	return func(p store.TransitionParams) (bool, error) {
		if done || p.From != store.StateCalling || p.To != store.StateCalling {
			return true, nil
		}
		for _, r := range p.Records {
			if r.Kind == store.RecordAuthorityCall && r.Step == stepCreateSecret {
				done = true
				return committed, errCrash
			}
		}
		return true, nil
	}
}

// diedAtChunk is the Setup of a pipelined resume row: a first process
// that dies at the second chunk's commit of the plan's creates. Nothing
// whose record is not committed was sent: the second chunk's Secrets
// (never sent: the process died at their commit) and the rest are absent.
func diedAtChunk(committed bool) func(*env) {
	return func(e *env) {
		e.t.Helper()
		*e = *rowEnv(e.t, withManySecrets, nil)
		e.crash = crashAtChunk(committed)
		first := e.run()
		require.ErrorIs(e.t, first.err, errCrash)
		require.Equal(e.t, store.StateCalling, first.op.State, "the journal holds where the process died")
		journaled := map[string]bool{}
		for _, r := range first.records {
			if r.Kind == store.RecordAuthorityCall {
				journaled[strings.TrimPrefix(r.Target.String(), "secret/")] = true
			}
		}
		require.Len(e.t, journaled, map[bool]int{true: pipelinedSecrets, false: 8}[committed])
		for i, s := range e.cmd.Spec.Secrets {
			sent := e.k.count(opCreateSecret, s.Name)
			require.Equal(e.t, boolInt(i < 8), sent, "%s: only the first chunk was sent", s.Name)
			if sent > 0 {
				require.True(e.t, journaled[s.Name], "%s: sent only once its call was journaled", s.Name)
			}
		}
		e.died = first.op.MutationID
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestPipelinedResumeTable: a process dies in the middle of a batch of
// creates sent in chunks (one chunk in flight, the next one's records
// being committed); the next process settles every journaled call from
// the durable facts (the nonce of the first chunk's Secrets: ours; the
// second chunk's, never sent: absent, created again; those never
// journaled: created by the next decision), and each Secret is written
// once.
func TestPipelinedResumeTable(t *testing.T) {
	t.Parallel()
	check := func(committed bool) func(t *testing.T, e *env, r result) {
		return resumed(func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, counts(pipelinedSecrets, pipelinedSecrets, 0, 0, 0), r.secretsCount())
			for _, s := range e.cmd.Spec.Secrets {
				require.Equal(t, 1, e.k.written("secret/"+s.Name), "%s written once", s.Name)
				require.Equal(t, 1, e.k.count(opCreateSecret, s.Name), "%s POSTed once", s.Name)
				e.requirePlanned(s.Name, true)
			}
			var ours, absent int
			for _, line := range r.trail(store.RecordResolution, stepCreateSecret) {
				switch {
				case strings.HasSuffix(line, " ours/created-by-this-mutation"):
					ours++
				case strings.HasSuffix(line, " not-applied/absent"):
					absent++
				default:
					t.Fatalf("unexpected resolution %q", line)
				}
			}
			require.LessOrEqual(t, ours, 8, "the first chunk's answers the dead process did not journal")
			require.Equal(t, map[bool]int{true: pipelinedSecrets - 8, false: 0}[committed], absent, "the second chunk: journaled, never sent")
		})
	}
	runTable(t, []row{
		{Name: "calling: died committing the second chunk, the first in flight", Setup: diedAtChunk(false), Check: check(false)},
		{Name: "calling: died right after the second chunk was journaled, before it was sent", Setup: diedAtChunk(true), Check: check(true)},
	})
}
