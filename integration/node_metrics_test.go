package integration

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
)

// The journal's metrics and its in-cluster reader on the real
// CloudNativePG Cluster of TestIntegrationNodeCloudNativePGJournal:
// deploy/journal's custom queries (metrics.yaml) served by the primary's
// instance manager on port 9187, and deploy/journal/inspect's Job.

// valueOf is the value of the one MetricSample of name whose labels include
// labels, 0 when there is none (a count with no row).
func valueOf(samples []suite.MetricSample, name string, labels map[string]string) float64 {
	for _, s := range samples {
		if s.Name != name {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && s.Labels[k] == v
		}
		if match {
			return s.Value
		}
	}
	return 0
}

// metricsCountRefusal: the primary's metrics endpoint serves keyledger's
// journal metrics (the earlier subtests' operations counted for the served
// namespace), and one retirement refused key-active (journaled, exit 2)
// raises the refusal count of that namespace and reason by exactly one.
// The page names no mutation ID, Secret, value, password or address.
func metricsCountRefusal(j *suite.CNPGJournal) {
	ne := j.Ne
	t := ne.T
	refusal := map[string]string{"target_namespace": ne.NS, "family": "retirement", "reason": "key-active"}
	page := j.PollMetrics("the served namespace's operations", 3*time.Minute, func(s []suite.MetricSample) bool {
		return valueOf(s, "cnpg_keyledger_operations_count", map[string]string{"target_namespace": ne.NS}) > 0
	})
	samples, err := suite.ParseMetrics(page)
	require.NoError(t, err)
	before := valueOf(samples, "cnpg_keyledger_refusals_count", refusal)
	t.Logf("before the refused run:\n%s", suite.KeyledgerLines(page))

	s := ne.CreateSecret(suite.KeyringSecret("metrics-keyring", suite.StandardKeyring()))
	const mutation = "mut-cnpg-metrics-refused"
	path := ne.WriteCommand(mutation+".json", suite.RetireCommand(s, "k-2026-08", mutation))
	r := ne.Keyledger([]string{"run", path}, ne.AsRetirerOf(s))
	require.Equal(t, 2, r.Code, "retiring the active key is refused: %s %s", r.Stdout, r.Stderr)
	require.Equal(t, "key-active", suite.Outcome(t, r)["reason"])

	page = j.PollMetrics("the refusal counted", 3*time.Minute, func(s []suite.MetricSample) bool {
		return valueOf(s, "cnpg_keyledger_refusals_count", refusal) != before
	})
	samples, err = suite.ParseMetrics(page)
	require.NoError(t, err)
	require.Equal(t, before+1, valueOf(samples, "cnpg_keyledger_refusals_count", refusal), "exactly one more refusal")
	t.Logf("after the refused run:\n%s", suite.KeyledgerLines(page))
	for _, line := range strings.Split(page, "\n") {
		require.False(t, suite.QueryError(line), "a keyledger query failed: %s", line)
	}
	j.RequireNoSecrets(page, mutation, s.Name)
}

// journalListInCluster runs deploy/journal/inspect (journal list as the
// schema owner, inside the journal's namespace) through a private overlay
// that sets only the image: its log names the operations of the earlier
// subtests, every namespace's, and no password, DSN or address.
func journalListInCluster(j *suite.CNPGJournal) {
	t := j.Ne.T
	fsys := suite.DeployFS(t)
	require.NoError(t, fsys.WriteFile("/my-inspect/kustomization.yaml", []byte(fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../deploy/journal/inspect
images:
- name: keyledger
  newName: %s
  newTag: %s
`, suite.ImageName(suite.NodeImage()), suite.ImageTag(suite.NodeImage())))))
	j.Journal.ApplyAll(suite.Render(t, fsys, "/my-inspect"))
	end := j.Journal.WaitJob("keyledger-journal-list", 3*time.Minute)
	require.True(t, end.Complete, "journal list Job failed: %s", j.Journal.Describe(end.Pod))
	log := j.Journal.Logs(end.Pod, "inspect")
	t.Logf("journal list in the cluster:\n%s", log)
	require.Contains(t, log, "MUTATION")
	for _, want := range []string{"mut-cnpg-job", "mut-cnpg-metrics-refused"} {
		require.Regexp(t, `(?m)^`+regexp.QuoteMeta(want)+`\s`, log, "the list names %s", want)
	}
	require.Regexp(t, `(?m)^mut-cnpg-metrics-refused\s.*\srefused\s+refused\s+key-active\s`, log)
	j.RequireNoSecrets(log)
	j.Journal.DeleteJob("keyledger-journal-list") // as the README does after reading
}
