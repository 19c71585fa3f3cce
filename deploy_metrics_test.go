package keyledger_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// shippedMetrics is every metric deploy/journal/metrics.yaml defines, as
// CloudNativePG names it (cnpg_<query>_<column>), with its labels.
func shippedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("deploy", "journal", "metrics.yaml"))
	require.NoError(t, err)
	var cm corev1.ConfigMap
	require.NoError(t, yaml.UnmarshalStrict(data, &cm))
	var queries map[string]struct {
		Query           string                                    `json:"query"`
		Primary         bool                                      `json:"primary"`
		TargetDatabases []string                                  `json:"target_databases"`
		Name            string                                    `json:"name"`
		Metrics         []map[string]struct{ Usage, Name string } `json:"metrics"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(cm.Data["queries"]), &queries))
	metrics := map[string][]string{}
	for key, q := range queries {
		prefix := "cnpg_" + key
		if q.Name != "" {
			prefix = "cnpg_" + q.Name
		}
		var labels, values []string
		for _, m := range q.Metrics {
			require.Len(t, m, 1, "%s: one column per metrics entry", key)
			for column, c := range m {
				switch c.Usage {
				case "LABEL":
					labels = append(labels, column)
				case "GAUGE", "COUNTER":
					if c.Name != "" {
						column = c.Name
					}
					values = append(values, prefix+"_"+column)
				default:
					t.Fatalf("%s: column %s: usage %q", key, column, c.Usage)
				}
			}
		}
		for _, v := range values {
			metrics[v] = labels
		}
	}
	require.NotEmpty(t, metrics)
	return metrics
}

// alertRule is one rule of deploy/journal/alerts.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// shippedAlerts renders deploy/journal/alerts as a user applies it and
// returns its rules.
func shippedAlerts(t *testing.T) []alertRule {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join("deploy", "journal", "alerts"))
	require.NoError(t, err)
	require.Len(t, res.Resources(), 1)
	r := res.Resources()[0]
	require.Equal(t, "PrometheusRule", r.GetKind())
	require.Equal(t, "keyledger-journal", r.GetNamespace(), "beside the journal")
	data, err := r.MarshalJSON()
	require.NoError(t, err)
	var rule struct {
		Spec struct {
			Groups []struct {
				Name  string      `json:"name"`
				Rules []alertRule `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	require.NoError(t, json.Unmarshal(data, &rule))
	var rules []alertRule
	for _, g := range rule.Spec.Groups {
		rules = append(rules, g.Rules...)
	}
	require.NotEmpty(t, rules)
	return rules
}

var (
	metricName = regexp.MustCompile(`\bcnpg_[a-z0-9_]+`)
	byLabels   = regexp.MustCompile(`\bby \(([^)]*)\)`)
	labelRef   = regexp.MustCompile(`\$labels\.([a-z_]+)`)
)

// alertFindings lists every metric an alert names that the shipped queries
// do not define, and every label it groups by or prints that its metrics
// do not carry.
func alertFindings(rules []alertRule, metrics map[string][]string) []string {
	var findings []string
	for _, r := range rules {
		text := r.Expr
		for _, a := range r.Annotations {
			text += "\n" + a
		}
		var labels []string
		for _, name := range metricName.FindAllString(text, -1) {
			l, ok := metrics[name]
			if !ok {
				findings = append(findings, r.Alert+": unknown metric "+name)
			}
			labels = append(labels, l...)
		}
		var used []string
		for _, m := range byLabels.FindAllStringSubmatch(r.Expr, -1) {
			for _, l := range strings.Split(m[1], ",") {
				used = append(used, strings.TrimSpace(l))
			}
		}
		for _, m := range labelRef.FindAllStringSubmatch(text, -1) {
			used = append(used, m[1])
		}
		for _, l := range used {
			if !slices.Contains(labels, l) {
				findings = append(findings, r.Alert+": unknown label "+l)
			}
		}
	}
	return findings
}

// The example alerts parse, and every metric and label they name is one
// the shipped custom queries define: an alert on a metric nobody serves
// would never fire.
func TestJournalAlertsNameShippedMetrics(t *testing.T) {
	metrics := shippedMetrics(t)
	rules := shippedAlerts(t)
	for _, r := range rules {
		require.NotEmpty(t, r.Alert)
		require.NotEmpty(t, metricName.FindAllString(r.Expr, -1), "%s names a keyledger metric", r.Alert)
		require.NotEmpty(t, r.Labels["severity"], r.Alert)
	}
	require.Empty(t, alertFindings(rules, metrics))

	// The check can fail: a misspelt metric, and a label no metric has.
	bad := slices.Clone(rules)
	bad[0].Expr = strings.Replace(bad[0].Expr, "cnpg_keyledger_", "cnpg_keyledgr_", 1)
	require.NotEmpty(t, alertFindings(bad, metrics))
	bad = slices.Clone(rules)
	bad[0].Expr = strings.Replace(bad[0].Expr, "by (", "by (pod, ", 1)
	require.NotEmpty(t, alertFindings(bad, metrics))
}

// The journal's base ships the queries and the Cluster reads them; the
// alerts are applied on their own (the PrometheusRule CRD may be absent).
func TestJournalBaseShipsMetricsNotAlerts(t *testing.T) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join("deploy", "journal"))
	require.NoError(t, err)
	var configMaps []string
	for _, r := range res.Resources() {
		require.NotEqual(t, "PrometheusRule", r.GetKind())
		if r.GetKind() == "ConfigMap" {
			configMaps = append(configMaps, r.GetName())
		}
		if r.GetKind() != "Cluster" {
			continue
		}
		data, err := r.MarshalJSON()
		require.NoError(t, err)
		var c struct {
			Spec struct {
				Monitoring struct {
					CustomQueriesConfigMap []struct{ Name, Key string } `json:"customQueriesConfigMap"`
				} `json:"monitoring"`
			} `json:"spec"`
		}
		require.NoError(t, json.Unmarshal(data, &c))
		require.Equal(t, []struct{ Name, Key string }{{"keyledger-journal-metrics", "queries"}}, c.Spec.Monitoring.CustomQueriesConfigMap)
	}
	require.Equal(t, []string{"keyledger-journal-metrics"}, configMaps)
	require.NotEmpty(t, shippedMetrics(t))
}
