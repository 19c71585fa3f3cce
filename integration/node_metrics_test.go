package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The journal's metrics and its in-cluster reader on the real
// CloudNativePG Cluster of TestIntegrationNodeCloudNativePGJournal:
// deploy/journal's custom queries (metrics.yaml) served by the primary's
// instance manager on port 9187, and deploy/journal/inspect's Job.

// metricsPort is CloudNativePG's metrics endpoint on every instance.
const metricsPort = "9187"

// metricSample is one line of the Prometheus text format: a metric's name, its
// labels and its value.
type metricSample struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// parseMetrics reads the samples of a text-format metrics page.
func parseMetrics(page string) ([]metricSample, error) {
	var out []metricSample
	for _, line := range strings.Split(page, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("not a metricSample line: %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, fmt.Errorf("metricSample %s: %w", m[1], err)
		}
		s := metricSample{name: m[1], labels: map[string]string{}, value: v}
		for _, l := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.labels[l[1]] = l[2]
		}
		out = append(out, s)
	}
	return out, nil
}

// valueOf is the value of the one metricSample of name whose labels include
// labels, 0 when there is none (a count with no row).
func valueOf(samples []metricSample, name string, labels map[string]string) float64 {
	for _, s := range samples {
		if s.name != name {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && s.labels[k] == v
		}
		if match {
			return s.value
		}
	}
	return 0
}

// scrapePrimary reads the metrics page of the Cluster's current primary,
// from this machine at the pod's IP.
func (j *cnpgJournal) scrapePrimary(ctx context.Context) (string, error) {
	st, err := j.status(ctx)
	if err != nil {
		return "", err
	}
	pod, err := j.ne.kube.Client().CoreV1().Pods(journalNamespace).Get(ctx, st.CurrentPrimary, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if pod.Status.PodIP == "" {
		return "", fmt.Errorf("primary %s has no IP yet", pod.Name)
	}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(pod.Status.PodIP, metricsPort), Path: "/metrics"}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("metrics endpoint: %s", resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// pollMetrics scrapes the primary until cond holds for its samples (the
// instance manager reruns the queries once their results are 30 s old),
// bounded by limit, and returns the last page.
func (j *cnpgJournal) pollMetrics(what string, limit time.Duration, cond func([]metricSample) bool) string {
	t := j.ne.t
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	var page string
	var last error
	err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := j.scrapePrimary(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		page = p
		samples, err := parseMetrics(p)
		if err != nil {
			return false, err
		}
		return cond(samples), nil
	})
	require.NoError(t, err, "metrics: %s not seen within %s (last error %v; keyledger lines: %s)", what, limit, last, keyledgerLines(page))
	return page
}

// keyledgerLines is every sample of a metrics page from keyledger's
// queries, and every error of them (cnpg_errors_total names the failed
// query).
func keyledgerLines(page string) string {
	var b strings.Builder
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "cnpg_keyledger_") || queryError(line) {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// queryError: line is CloudNativePG's count of a keyledger query's errors.
func queryError(line string) bool {
	return strings.HasPrefix(line, "cnpg_errors_total{") && strings.Contains(line, `errorUserQueries="keyledger_`)
}

// metricsCountRefusal: the primary's metrics endpoint serves keyledger's
// journal metrics (the earlier subtests' operations counted for the served
// namespace), and one retirement refused key-active (journaled, exit 2)
// raises the refusal count of that namespace and reason by exactly one.
// The page names no mutation ID, Secret, value, password or address.
func metricsCountRefusal(j *cnpgJournal) {
	ne := j.ne
	t := ne.t
	refusal := map[string]string{"target_namespace": ne.ns, "family": "retirement", "reason": "key-active"}
	page := j.pollMetrics("the served namespace's operations", 3*time.Minute, func(s []metricSample) bool {
		return valueOf(s, "cnpg_keyledger_operations_count", map[string]string{"target_namespace": ne.ns}) > 0
	})
	samples, err := parseMetrics(page)
	require.NoError(t, err)
	before := valueOf(samples, "cnpg_keyledger_refusals_count", refusal)
	t.Logf("before the refused run:\n%s", keyledgerLines(page))

	s := ne.createSecret(keyringSecret("metrics-keyring", standardKeyring()))
	const mutation = "mut-cnpg-metrics-refused"
	path := ne.writeCommand(mutation+".json", retireCommand(s, "k-2026-08", mutation))
	r := ne.keyledger([]string{"run", path}, ne.asRetirerOf(s))
	require.Equal(t, 2, r.Code, "retiring the active key is refused: %s %s", r.Stdout, r.Stderr)
	require.Equal(t, "key-active", outcome(t, r)["reason"])

	page = j.pollMetrics("the refusal counted", 3*time.Minute, func(s []metricSample) bool {
		return valueOf(s, "cnpg_keyledger_refusals_count", refusal) != before
	})
	samples, err = parseMetrics(page)
	require.NoError(t, err)
	require.Equal(t, before+1, valueOf(samples, "cnpg_keyledger_refusals_count", refusal), "exactly one more refusal")
	t.Logf("after the refused run:\n%s", keyledgerLines(page))
	for _, line := range strings.Split(page, "\n") {
		require.False(t, queryError(line), "a keyledger query failed: %s", line)
	}
	j.requireNoSecrets(page, mutation, s.Name)
}

// requireNoSecrets: text names none of the given identifiers, no key
// material, no password of the journal's roles, no DSN and no address of
// the journal.
func (j *cnpgJournal) requireNoSecrets(text string, identifiers ...string) {
	t := j.ne.t
	t.Helper()
	for _, id := range identifiers {
		require.NotContains(t, text, id)
	}
	requireNoValues(t, text, allMaterial())
	for _, dsn := range []string{j.owner, j.ne.journal.OperatorURL} {
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		pw, _ := u.User.Password()
		require.NotContains(t, text, pw, "a journal password")
		require.NotContains(t, text, u.Hostname(), "the journal's address")
	}
	require.NotContains(t, text, "postgres://")
	require.NotContains(t, text, "postgresql://")
	require.NotContains(t, text, "password=")
}

// journalListInCluster runs deploy/journal/inspect (journal list as the
// schema owner, inside the journal's namespace) through a private overlay
// that sets only the image: its log names the operations of the earlier
// subtests, every namespace's, and no password, DSN or address.
func journalListInCluster(j *cnpgJournal) {
	t := j.ne.t
	fsys := deployFS(t)
	require.NoError(t, fsys.WriteFile("/my-inspect/kustomization.yaml", []byte(fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../deploy/journal/inspect
images:
- name: keyledger
  newName: %s
  newTag: %s
`, imageName(nodeShared.image), imageTag(nodeShared.image)))))
	j.journal.applyAll(render(t, fsys, "/my-inspect"))
	end := j.journal.waitJob("keyledger-journal-list", 3*time.Minute)
	require.True(t, end.Complete, "journal list Job failed: %s", j.journal.describe(end.Pod))
	log := j.journal.logs(end.Pod, "inspect")
	t.Logf("journal list in the cluster:\n%s", log)
	require.Contains(t, log, "MUTATION")
	for _, want := range []string{"mut-cnpg-job", "mut-cnpg-metrics-refused"} {
		require.Regexp(t, `(?m)^`+regexp.QuoteMeta(want)+`\s`, log, "the list names %s", want)
	}
	require.Regexp(t, `(?m)^mut-cnpg-metrics-refused\s.*\srefused\s+refused\s+key-active\s`, log)
	j.requireNoSecrets(log)
	j.journal.deleteJob("keyledger-journal-list") // as the README does after reading
}
