package suite

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/stretchr/testify/require"
)

// PlanOutput is what the tests read of `keyledger plan -o json`.
type PlanOutput struct {
	Operation string `json:"operation"`
	Journal   string `json:"journal"`
	Replay    bool   `json:"replay"`
	Calls     []struct {
		Answer string         `json:"answer"`
		Batch  int            `json:"batch"`
		Final  bool           `json:"final"`
		Verb   string         `json:"verb"`
		Step   string         `json:"step"`
		Target string         `json:"target"`
		Detail map[string]any `json:"detail"`
	} `json:"calls"`
	Reads   []map[string]any `json:"reads"`
	Outcome string           `json:"outcome"`
	Reason  string           `json:"reason"`
	Stopped string           `json:"stopped"`
	Writes  int              `json:"writes"`
}

// Plan runs `keyledger plan -o json FILE` and decodes its output.
func (e *Env) Plan(path string, opts ...RunOption) PlanOutput {
	e.T.Helper()
	r := e.Keyledger([]string{"plan", "-o", "json", path}, opts...)
	require.Equal(e.T, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	var p PlanOutput
	require.NoError(e.T, json.Unmarshal([]byte(r.Stdout), &p), "stdout %s", r.Stdout)
	return p
}

// Planned lists the writes of a plan's calls (those it expects applied)
// as "TYPE kind/name", the form SecretEvents uses: create is ADDED, update
// and patch MODIFIED, delete DELETED.
func (p PlanOutput) Planned() []string {
	event := map[string]string{"create": "ADDED", "update": "MODIFIED", "patch": "MODIFIED", "delete": "DELETED"}
	out := []string{}
	for _, c := range p.Calls {
		if c.Answer != "applied" {
			continue
		}
		out = append(out, event[c.Verb]+" "+c.Target)
	}
	sort.Strings(out)
	return out
}

// SecretEvents returns the writes the API server made to the namespace's
// Secrets after resourceVersion from, as "TYPE secret/NAME", sorted.
func (e *Env) SecretEvents(from string) []string {
	e.T.Helper()
	out := []string{}
	for _, ev := range e.secretEventsSince(from) {
		out = append(out, fmt.Sprintf("%s secret/%s", ev.Type, ev.Secret.Name))
	}
	sort.Strings(out)
	return out
}
