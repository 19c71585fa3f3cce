package app

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
)

// A journaled ending's detail never overrides the words keyledger writes on
// stdout: its colliding keys are dropped, its other keys kept.
func TestOutcomeLineSummaryCannotOverride(t *testing.T) {
	t.Parallel()
	forged := store.DetailOf(map[string]any{"outcome": "forged-outcome", "kind": "forged-kind", "mutationId": "forged-mutation",
		"reason": "forged-reason", "error": "forged-error", "generation": 5.0})
	cases := map[string]outcomeLine{
		"every word set": {Kind: "KeyRetirement", MutationID: "mut-7", Outcome: "existing", Reason: "real-reason", Error: "real error"},
		// Empty words are left off the line; the summary must not fill them.
		"no reason, no error": {Kind: "KeyRetirement", MutationID: "mut-7", Outcome: "existing"},
	}
	for name, line := range cases {
		t.Run(name, func(t *testing.T) {
			line.Summary = forged
			b, err := json.Marshal(line)
			require.NoError(t, err)
			var got map[string]any
			require.NoError(t, json.Unmarshal(b, &got))
			want := map[string]any{"kind": line.Kind, "mutationId": line.MutationID, "outcome": line.Outcome, "generation": 5.0}
			if line.Reason != "" {
				want["reason"] = line.Reason
			}
			if line.Error != "" {
				want["error"] = line.Error
			}
			require.Equal(t, want, got)
		})
	}
	fields, dropped := summaryFields(forged)
	require.Equal(t, 5, dropped)
	require.Equal(t, map[string]json.RawMessage{"generation": json.RawMessage("5")}, fields)
}
