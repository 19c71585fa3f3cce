package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
)

// Every kustomization, and a private overlay filled as deploy/README.md
// says, passes the audit.
func TestIntegrationDeployAudit(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test")
	}
	fsys := suite.DeployFS(t)
	components := map[string]bool{} // the Jobs whose ADR-0262 numbers were checked
	for _, dir := range kustomizations {
		objs := suite.Render(t, fsys, "/deploy/"+dir)
		if findings := suite.Audit(objs); len(findings) > 0 {
			t.Errorf("%s: %v", dir, findings) // every directory's findings, not only the first's
		}
		for _, o := range objs {
			if o.GetKind() == "Job" {
				c, _, _ := unstructured.NestedString(o.Object, "spec", "template", "metadata", "labels", "app.kubernetes.io/component")
				components[c] = true
			}
		}
	}
	for _, c := range []string{"retire", "versioned", suite.ControlComponent, "migrate", "grant"} {
		require.True(t, components[c], "no %s Job was audited (got %v)", c, components)
	}
	require.Empty(t, suite.Audit(suite.RenderPrivate(t, validPrivateOverlay())), "private overlay")
}

func validPrivateOverlay() suite.PrivateOverlay {
	return suite.PrivateOverlay{Namespace: "team-a", NameSuffix: "audit", SecretName: "keyring", Canary: "192.0.2.10:443",
		Command: []byte(`{"kind":"KeyRetirement"}`), APIServerIP: "10.0.0.1", APIServerPort: 6443}
}

// The audit can fail: each mutation of the rendered objects (or of the
// private overlay an operator writes) is reported with its finding.
func TestIntegrationDeployAuditCatchesMutations(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test")
	}
	base := suite.RenderPrivate(t, validPrivateOverlay())
	require.Empty(t, suite.Audit(base))
	set := func(kind, prefix string, value any, fields ...string) func(t *testing.T, objs []*unstructured.Unstructured) {
		return func(t *testing.T, objs []*unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedField(suite.Find(t, objs, kind, prefix).Object, value, fields...))
		}
	}
	ruleOf := func(kind, prefix string, mutate func(r map[string]any)) func(t *testing.T, objs []*unstructured.Unstructured) {
		return func(t *testing.T, objs []*unstructured.Unstructured) {
			role := suite.Find(t, objs, kind, prefix)
			rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
			mutate(rules[0].(map[string]any))
			require.NoError(t, unstructured.SetNestedSlice(role.Object, rules, "rules"))
		}
	}
	rule := func(mutate func(r map[string]any)) func(t *testing.T, objs []*unstructured.Unstructured) {
		return ruleOf("Role", "keyledger-retire", mutate)
	}
	container := func(init bool, mutate func(c map[string]any)) func(t *testing.T, objs []*unstructured.Unstructured) {
		return func(t *testing.T, objs []*unstructured.Unstructured) {
			job := suite.Find(t, objs, "Job", "keyledger-retire")
			field := "containers"
			if init {
				field = "initContainers"
			}
			cs, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", field)
			mutate(cs[0].(map[string]any))
			require.NoError(t, unstructured.SetNestedSlice(job.Object, cs, "spec", "template", "spec", field))
		}
	}
	egressRule := func(rule map[string]any) func(t *testing.T, objs []*unstructured.Unstructured) {
		return func(t *testing.T, objs []*unstructured.Unstructured) {
			np := suite.Find(t, objs, "NetworkPolicy", "keyledger-retire")
			egress, _, _ := unstructured.NestedSlice(np.Object, "spec", "egress")
			require.NoError(t, unstructured.SetNestedSlice(np.Object, append(egress, rule), "spec", "egress"))
		}
	}
	tcp := func(port int64) []any { return []any{map[string]any{"protocol": "TCP", "port": port}} }
	cases := []struct {
		name    string
		mutate  func(t *testing.T, objs []*unstructured.Unstructured)
		finding string
	}{
		{"wildcard-verb", rule(func(r map[string]any) { r["verbs"] = []any{"*"} }), suite.FindingWildcard},
		{"wildcard-resource", rule(func(r map[string]any) { r["resources"] = []any{"*"} }), suite.FindingWildcard},
		{"role-without-resource-names", rule(func(r map[string]any) { delete(r, "resourceNames") }), suite.FindingNoResourceNames},
		{"second-secret-name", rule(func(r map[string]any) {
			r["resourceNames"] = append(r["resourceNames"].([]any), "other-keyring")
		}), suite.FindingResourceNames},
		{"patch-verb", rule(func(r map[string]any) { r["verbs"] = append(r["verbs"].([]any), "patch") }), suite.FindingWriteRight},
		{"cluster-role-widened", ruleOf("ClusterRole", "keyledger-access-review", func(r map[string]any) {
			r["resources"] = append(r["resources"].([]any), "subjectaccessreviews")
		}), suite.FindingWriteRight},
		{"service-account-automount", set("ServiceAccount", "keyledger-retire", true, "automountServiceAccountToken"), suite.FindingAutomount},
		{"service-account-automount-unset", func(t *testing.T, objs []*unstructured.Unstructured) {
			unstructured.RemoveNestedField(suite.Find(t, objs, "ServiceAccount", "keyledger-retire").Object, "automountServiceAccountToken")
		}, suite.FindingAutomount},
		{"pod-automount", set("Job", "keyledger-retire", true, "spec", "template", "spec", "automountServiceAccountToken"), suite.FindingAutomount},
		{"writable-root", container(false, func(c map[string]any) {
			c["securityContext"].(map[string]any)["readOnlyRootFilesystem"] = false
		}), suite.FindingWritableRoot},
		{"init-writable-root", container(true, func(c map[string]any) {
			delete(c["securityContext"].(map[string]any), "readOnlyRootFilesystem")
		}), suite.FindingWritableRoot},
		{"seccomp-missing", func(t *testing.T, objs []*unstructured.Unstructured) {
			job := suite.Find(t, objs, "Job", "keyledger-retire")
			unstructured.RemoveNestedField(job.Object, "spec", "template", "spec", "securityContext", "seccompProfile")
			container(false, func(c map[string]any) { delete(c["securityContext"].(map[string]any), "seccompProfile") })(t, objs)
		}, suite.FindingSeccomp},
		{"capabilities-kept", container(false, func(c map[string]any) {
			delete(c["securityContext"].(map[string]any), "capabilities")
		}), suite.FindingCapabilities},
		{"capability-added", container(true, func(c map[string]any) {
			c["securityContext"].(map[string]any)["capabilities"] = map[string]any{"drop": []any{"ALL"}, "add": []any{"NET_RAW"}}
		}), suite.FindingCapabilities},
		{"egress-wide-cidr", egressRule(map[string]any{"to": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/24"}}}, "ports": tcp(443)}), suite.FindingEgressWide},
		{"egress-everywhere", egressRule(map[string]any{"to": []any{map[string]any{"ipBlock": map[string]any{"cidr": "0.0.0.0/0"}}}, "ports": tcp(443)}), suite.FindingEgressWide},
		{"egress-namespace-wide", egressRule(map[string]any{"to": []any{map[string]any{"podSelector": map[string]any{}}}, "ports": tcp(5432)}), suite.FindingEgressTemplate},
		{"egress-any-port", egressRule(map[string]any{"to": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.2/32"}}}}), suite.FindingEgressTemplate},
		{"egress-replica", egressRule(map[string]any{"to": []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{
			"cnpg.io/cluster": "keyledger-journal", "cnpg.io/instanceRole": "replica"}}}}, "ports": tcp(5432)}), suite.FindingEgressTemplate},
		{"egress-every-instance", egressRule(map[string]any{"to": []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{
			"cnpg.io/cluster": "keyledger-journal"}}}}, "ports": tcp(5432)}), suite.FindingEgressTemplate},
		{"egress-pooler-and-instances", egressRule(map[string]any{"to": []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{
			"cnpg.io/cluster": "keyledger-journal", "cnpg.io/poolerName": "keyledger-journal-pooler"}}}}, "ports": tcp(5432)}), suite.FindingEgressTemplate},
		{"egress-pooler-any-port", egressRule(map[string]any{"to": []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{
			"cnpg.io/poolerName": "keyledger-journal-pooler"}}}}, "ports": tcp(9127)}), suite.FindingEgressTemplate},
		{"egress-unrestricted", set("NetworkPolicy", "keyledger-retire", []any{"Ingress"}, "spec", "policyTypes"), suite.FindingEgressUnfenced},
		{"command-mutable", set("ConfigMap", suite.CommandConfigMapPrefix, false, "immutable"), suite.FindingCommandMutable},
		{"command-directory-mount", container(false, func(c map[string]any) {
			m := c["volumeMounts"].([]any)[0].(map[string]any)
			delete(m, "subPath")
			m["mountPath"] = "/etc/keyledger"
		}), suite.FindingCommandMount},
		{"command-mount-writable", container(false, func(c map[string]any) {
			c["volumeMounts"].([]any)[0].(map[string]any)["readOnly"] = false
		}), suite.FindingCommandMount},
		{"init-mounts-token", container(true, func(c map[string]any) {
			c["volumeMounts"] = []any{map[string]any{"name": "kube-api-access", "mountPath": suite.InClusterServiceAccount, "readOnly": true}}
		}), suite.FindingInitMounts},
		{"long-token", func(t *testing.T, objs []*unstructured.Unstructured) {
			job := suite.Find(t, objs, "Job", "keyledger-retire")
			vols, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "volumes")
			for _, v := range vols {
				if src, ok, _ := unstructured.NestedSlice(v.(map[string]any), "projected", "sources"); ok {
					src[0].(map[string]any)["serviceAccountToken"].(map[string]any)["expirationSeconds"] = int64(3600)
					require.NoError(t, unstructured.SetNestedSlice(v.(map[string]any), src, "projected", "sources"))
				}
			}
			require.NoError(t, unstructured.SetNestedSlice(job.Object, vols, "spec", "template", "spec", "volumes"))
		}, suite.FindingTokenLifetime},
		{"token-without-ca", func(t *testing.T, objs []*unstructured.Unstructured) {
			job := suite.Find(t, objs, "Job", "keyledger-retire")
			vols, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "volumes")
			for _, v := range vols {
				if src, ok, _ := unstructured.NestedSlice(v.(map[string]any), "projected", "sources"); ok {
					require.NoError(t, unstructured.SetNestedSlice(v.(map[string]any), []any{src[0], src[2]}, "projected", "sources"))
				}
			}
			require.NoError(t, unstructured.SetNestedSlice(job.Object, vols, "spec", "template", "spec", "volumes"))
		}, suite.FindingTokenMount},
		{"token-mounted-elsewhere", container(false, func(c map[string]any) {
			c["volumeMounts"].([]any)[1].(map[string]any)["mountPath"] = "/token"
		}), suite.FindingTokenMount},
		{"job-retries", set("Job", "keyledger-retire", int64(3), "spec", "backoffLimit"), suite.FindingJobRetries},
		// ADR-0262's numbers, exactly: a drift that the bounds above
		// accept (a shorter deadline, a different memory limit) fails too.
		{"adr-backoff", set("Job", "keyledger-retire", int64(1), "spec", "backoffLimit"), suite.FindingADRBackoff},
		{"adr-deadline-shorter", set("Job", "keyledger-retire", int64(240), "spec", "activeDeadlineSeconds"), suite.FindingADRDeadline},
		{"adr-deadline-longer", set("Job", "keyledger-retire", int64(600), "spec", "activeDeadlineSeconds"), suite.FindingADRDeadline},
		{"adr-deadline-missing", func(t *testing.T, objs []*unstructured.Unstructured) {
			unstructured.RemoveNestedField(suite.Find(t, objs, "Job", "keyledger-retire").Object, "spec", "activeDeadlineSeconds")
		}, suite.FindingADRDeadline},
		{"adr-pod-user", set("Job", "keyledger-retire", int64(10002), "spec", "template", "spec", "securityContext", "runAsUser"), suite.FindingADRUser},
		{"adr-pod-group", set("Job", "keyledger-retire", int64(0), "spec", "template", "spec", "securityContext", "runAsGroup"), suite.FindingADRUser},
		{"adr-fs-group", set("Job", "keyledger-retire", int64(2000), "spec", "template", "spec", "securityContext", "fsGroup"), suite.FindingADRUser},
		{"adr-container-user", container(false, func(c map[string]any) {
			c["securityContext"].(map[string]any)["runAsUser"] = int64(10002)
		}), suite.FindingADRUser},
		{"adr-init-group", container(true, func(c map[string]any) {
			c["securityContext"].(map[string]any)["runAsGroup"] = int64(10)
		}), suite.FindingADRUser},
		{"adr-memory-larger", container(false, func(c map[string]any) {
			c["resources"].(map[string]any)["limits"] = map[string]any{"memory": "256Mi"}
		}), suite.FindingADRMemory},
		{"adr-memory-smaller", container(true, func(c map[string]any) {
			c["resources"].(map[string]any)["limits"] = map[string]any{"memory": "64Mi"}
		}), suite.FindingADRMemory},
		{"adr-token-shorter", func(t *testing.T, objs []*unstructured.Unstructured) {
			job := suite.Find(t, objs, "Job", "keyledger-retire")
			vols, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "volumes")
			for _, v := range vols {
				if src, ok, _ := unstructured.NestedSlice(v.(map[string]any), "projected", "sources"); ok {
					src[0].(map[string]any)["serviceAccountToken"].(map[string]any)["expirationSeconds"] = int64(599)
					require.NoError(t, unstructured.SetNestedSlice(v.(map[string]any), src, "projected", "sources"))
				}
			}
			require.NoError(t, unstructured.SetNestedSlice(job.Object, vols, "spec", "template", "spec", "volumes"))
		}, suite.FindingADRToken},
		{"memory-unlimited", container(false, func(c map[string]any) { delete(c["resources"].(map[string]any), "limits") }), suite.FindingMemoryLimit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := make([]*unstructured.Unstructured, len(base))
			for i, o := range base {
				objs[i] = o.DeepCopy()
			}
			tc.mutate(t, objs)
			findings := suite.Audit(objs)
			require.NotEmpty(t, findings, "the audit must fail")
			want := tc.finding
			require.True(t, slices.ContainsFunc(findings, func(f string) bool { return strings.HasPrefix(f, want+":") }),
				"want %s among %v", want, findings)
		})
	}
	// An operator's overlay that replaces the command without repeating
	// the immutable option renders a mutable ConfigMap: caught.
	forgot := validPrivateOverlay()
	forgot.ForgetImmutable = true
	findings := suite.Audit(suite.RenderPrivate(t, forgot))
	require.True(t, slices.ContainsFunc(findings, func(f string) bool { return strings.HasPrefix(f, suite.FindingCommandMutable+":") }), "%v", findings)
}

// The rendered credentials hook's Job carries ADR-0262's numbers where they
// apply: UID/GID 10001, a 128Mi limit, activeDeadlineSeconds 300. Where it
// differs, the difference is pinned as exactly: backoffLimit 2 (a hook is
// desired state: Argo CD's retried pod resumes the same run, where a
// one-shot Job's rerun is the operator's decision). Like the deploy Jobs it
// mounts no automounted token, only one projected token of 600 s. The Job
// is read from the render golden file, which TestRenderCredentialsGolden
// proves is what `keyledger render credentials` writes.
func TestIntegrationDeployAuditCredentialsHookNumbers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test")
	}
	raw, err := os.ReadFile(filepath.Join(platform.RepoRoot(), "cmd", "keyledger", "app", "testdata", "render-credentials.golden.yaml"))
	require.NoError(t, err)
	var job batchv1.Job
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		if strings.Contains(doc, "\nkind: Job\n") {
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &job))
		}
	}
	require.NotEmpty(t, job.Name, "the golden file holds the hook Job")
	hook := suite.JobNumbers{Deadline: suite.ADRDeadline, Backoff: 2, Token: true}
	a := &suite.Auditor{}
	a.ADRNumbers("Job/"+job.Name, job, hook)
	require.Empty(t, a.Findings)
	require.NotNil(t, job.Spec.Template.Spec.AutomountServiceAccountToken, "the hook pod says whether the token is automounted")
	require.False(t, *job.Spec.Template.Spec.AutomountServiceAccountToken, "the hook pod's only token is the projected one")

	for name, mutate := range map[string]func(j *batchv1.Job){
		"no-deadline":  func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = nil },
		"more-retries": func(j *batchv1.Job) { three := int32(3); j.Spec.BackoffLimit = &three },
		"root-group":   func(j *batchv1.Job) { root := int64(0); j.Spec.Template.Spec.SecurityContext.RunAsGroup = &root },
		"memory-256Mi": func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("256Mi")
		},
		"memory-absent": func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Resources.Limits = nil },
		"token-hour": func(j *batchv1.Job) {
			for _, v := range j.Spec.Template.Spec.Volumes {
				if v.Projected != nil {
					for _, src := range v.Projected.Sources {
						if src.ServiceAccountToken != nil {
							hour := int64(3600)
							src.ServiceAccountToken.ExpirationSeconds = &hour
						}
					}
				}
			}
		},
		"token-absent": func(j *batchv1.Job) {
			j.Spec.Template.Spec.Volumes = slices.DeleteFunc(j.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Projected != nil })
		},
	} {
		j := job.DeepCopy()
		mutate(j)
		a := &suite.Auditor{}
		a.ADRNumbers("Job/"+j.Name, *j, hook)
		require.NotEmpty(t, a.Findings, name)
	}
}
