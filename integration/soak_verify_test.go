package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// The soak's checks of the runs (exit codes, hangs, outputs) and of the
// journal read as its owner.

func urlParse(s string) (*url.URL, error) { return url.Parse(s) }

// soakExitCodes are the codes a run may end with under faults: done, a
// dependency failing before or after the preparation was durable, and 77
// (kubernetes-forbidden or permission-mismatch only: a restarted API server
// forbids requests and denies access reviews until its RBAC caches are
// filled; keyledger reads those as 69 while /readyz says the server is not
// ready, and a few still come after it says it is: docs/failures.md). A refusal (2) or a usage error (64) would be a fault misread as a
// final answer; 1 is a bug.
var soakExitCodes = []int{0, 69, 75, 77}

// soak77Reasons are the reasons of a 77 a restarted API server causes.
var soak77Reasons = []any{"kubernetes-forbidden", "permission-mismatch"}

// checkRuns reports a hang, an operation that never settled, an exit code
// outside soakExitCodes (a kill the soak sent aside), and a run that exited
// 0 without one outcome line.
func checkRuns(runs []soakRun) []string {
	var out []string
	for _, r := range runs {
		switch {
		case r.Attempt < 0:
			out = append(out, fmt.Sprintf("operation %d never settled (no run exited 0 with the journal within %s)", r.Op, soakSettleTime))
		case r.Hung:
			out = append(out, fmt.Sprintf("operation %d attempt %d: hung (no exit within %s)", r.Op, r.Attempt, soakRunTimeout))
		case r.Killed:
		case !slices.Contains(soakExitCodes, r.Code):
			out = append(out, fmt.Sprintf("operation %d attempt %d: exit %d, want one of %v: stdout %s stderr %s", r.Op, r.Attempt, r.Code, soakExitCodes, r.Stdout, lastLines(r.Stderr, 3)))
		case r.Code == 77 && !slices.Contains(soak77Reasons, runOutcome(r)["reason"]):
			out = append(out, fmt.Sprintf("operation %d attempt %d: exit 77 with reason %v, want one of %v", r.Op, r.Attempt, runOutcome(r)["reason"], soak77Reasons))
		case r.Code == 0:
			if o := runOutcome(r); !slices.Contains([]string{"completed", "existing", "converged"}, fmt.Sprint(o["outcome"])) {
				out = append(out, fmt.Sprintf("operation %d attempt %d: exit 0 with stdout %q", r.Op, r.Attempt, r.Stdout))
			}
		}
	}
	return out
}

// exitTally counts the runs per exit code ("killed" for the soak's kills).
func exitTally(runs []soakRun) map[string]int {
	out := map[string]int{}
	for _, r := range runs {
		if r.Killed {
			out["killed"]++
		} else {
			out[fmt.Sprint(r.Code)]++
		}
	}
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// runOutcome decodes a run's one stdout line (nil when it is not one JSON
// object).
func runOutcome(r soakRun) map[string]any {
	var o map[string]any
	if strings.Count(r.Stdout, "\n") != 1 || json.Unmarshal([]byte(r.Stdout), &o) != nil {
		return nil
	}
	return o
}

// checkJournal reads the journal as its owner: every operation ends
// completed with its completion record (a plan: its last run), and every
// run that printed "completed" names an operation that holds one.
func (p *soakPlatform) checkJournal(t *testing.T, ops []*soakOp, runs []soakRun) []string {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, p.e.Journal.OwnerURL)
	require.NoError(t, err)
	defer st.Close()
	var out []string
	for _, op := range ops {
		id := op.Mutation
		if op.Family == familyCredentials {
			all, err := st.Runs(ctx, op.Mutation)
			if err != nil || len(all) == 0 {
				out = append(out, fmt.Sprintf("plan %s: no run in the journal (%v)", op.Mutation, err))
				continue
			}
			id = all[len(all)-1].MutationID
		}
		out = append(out, completedInJournal(ctx, st, id, fmt.Sprintf("operation %s (runs %s)", op.Mutation, runEnds(runs, op.Index)))...)
	}
	for _, r := range runs {
		o := runOutcome(r)
		if r.Code != 0 || o["outcome"] != "completed" {
			continue
		}
		id := fmt.Sprint(o["mutationId"])
		if run, ok := o["run"].(string); ok {
			id = run
		}
		out = append(out, completedInJournal(ctx, st, id, fmt.Sprintf("operation %d attempt %d printed completed, but", r.Op, r.Attempt))...)
	}
	return out
}

// runEnds lists how each run of one operation ended, in order of attempts.
func runEnds(runs []soakRun, op int) string {
	var ends []string
	for _, r := range runs {
		if r.Op != op {
			continue
		}
		o := runOutcome(r)
		end := fmt.Sprintf("%d:exit %d %v", r.Attempt, r.Code, o["outcome"])
		if o["journal"] != nil {
			end += fmt.Sprintf(" journal %v", o["journal"])
		}
		if r.Killed {
			end = fmt.Sprintf("%d:killed", r.Attempt)
		}
		ends = append(ends, end)
	}
	return strings.Join(ends, ", ")
}

func completedInJournal(ctx context.Context, st *store.Store, id, who string) []string {
	op, err := st.Load(ctx, "", id)
	if err != nil {
		return []string{fmt.Sprintf("%s: %s not in the journal: %v", who, id, err)}
	}
	records, err := st.Records(ctx, op.ID)
	if err != nil {
		return []string{fmt.Sprintf("%s: reading %s's records: %v", who, id, err)}
	}
	if op.State != store.StateCompleted || suite.Count(records, store.RecordCompletion) != 1 {
		return []string{fmt.Sprintf("%s: %s is %s with %d completion records", who, id, op.State, suite.Count(records, store.RecordCompletion))}
	}
	return nil
}

// canaries are what no output may hold: every Secret value etcd saw, the
// keyring material, the versioned data, tokens, the password, the database
// URLs, every address and every file path the soak handed keyledger.
func (p *soakPlatform) canaries(events []secretEvent, ops []*soakOp) []string {
	out := slices.Clone(p.secrets)
	for _, ev := range events {
		if ev.Secret == nil {
			continue
		}
		for _, v := range ev.Secret.Data {
			if len(v) >= 8 {
				out = append(out, string(v))
			}
		}
	}
	for _, m := range suite.AllMaterial() {
		out = append(out, string(m))
	}
	j := p.e.Journal
	out = append(out, j.OperatorURL, j.OwnerURL, p.pg.AdminURL(), p.e.Dir)
	for _, u := range []string{j.OperatorURL, p.e.Kube.Host(), p.e.Kube.EtcdURL()} {
		if parsed, err := url.Parse(u); err == nil {
			out = append(out, parsed.Host)
		}
	}
	for _, op := range ops {
		out = append(out, op.path, op.kubeconfig)
	}
	return out
}

// checkOutputs reports every run whose stdout or stderr holds a canary (or
// its base64 form). The report names the run, never the canary.
func checkOutputs(runs []soakRun, canaries []string) []string {
	var out []string
	for _, r := range runs {
		text := r.Stdout + r.Stderr
		for i, c := range canaries {
			if strings.Contains(text, c) || strings.Contains(text, base64.StdEncoding.EncodeToString([]byte(c))) {
				out = append(out, fmt.Sprintf("operation %d attempt %d: its output holds canary %d", r.Op, r.Attempt, i))
			}
		}
	}
	return out
}

// soakMarkerPrefix names the Secrets the soak writes to close a stretch of
// etcd's history.
const soakMarkerPrefix = "zz-soak-marker-"

// history writes a marker Secret and returns etcd's history up to it,
// without the markers.
func (p *soakPlatform) history(t *testing.T, h *etcdHistory) []secretEvent {
	t.Helper()
	marker := soakMarkerPrefix + suite.RandomSuffix(t)
	p.e.CreateSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: marker}})
	events, err := h.until(t.Context(), marker)
	require.NoError(t, err, "reading etcd's history")
	return slices.DeleteFunc(events, func(ev secretEvent) bool { return strings.HasPrefix(ev.Name, soakMarkerPrefix) })
}

// plantWrite writes a new password into the first plan's first Secret
// behind keyledger's back, as the admin, and returns its name and the
// resourceVersion it wrote.
func (p *soakPlatform) plantWrite(t *testing.T, ops []*soakOp) (name, resourceVersion string) {
	t.Helper()
	i := slices.IndexFunc(ops, func(op *soakOp) bool { return op.Family == familyCredentials })
	require.GreaterOrEqual(t, i, 0, "the soak has a plan")
	name = ops[i].Names[0]
	s := p.e.GetSecret(name)
	s.Data["password"] = []byte(strings.Repeat("P", 32))
	updated, err := p.e.Kube.Client().CoreV1().Secrets(p.e.NS).Update(t.Context(), s, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NotEqual(t, s.ResourceVersion, updated.ResourceVersion, "the planted write changed the Secret")
	return name, updated.ResourceVersion
}
