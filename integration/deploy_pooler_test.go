package integration

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/keyledger/keyledger/integration/suite"
)

// pooledJournalKustomization is my-journal/kustomization.yaml with the
// pooler component.
const pooledJournalKustomization = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../deploy/journal
components:
- ../deploy/journal/pooler
`

// journalEgress returns the rules of np that reach the journal's
// namespace (neither DNS nor an ipBlock).
func journalEgress(t *testing.T, np *unstructured.Unstructured) []map[string]any {
	t.Helper()
	egress, _, err := unstructured.NestedSlice(np.Object, "spec", "egress")
	require.NoError(t, err)
	var out []map[string]any
	for _, r := range egress {
		to, _, _ := unstructured.NestedSlice(r.(map[string]any), "to")
		ns, _, _ := unstructured.NestedString(to[0].(map[string]any), "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name")
		if ns == suite.JournalNamespace {
			out = append(out, to[0].(map[string]any))
		}
	}
	return out
}

func TestIntegrationDeployJournalPooler(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test")
	}
	fsys := suite.DeployFS(t)
	require.NoError(t, fsys.WriteFile("/my-journal/kustomization.yaml", []byte(pooledJournalKustomization)))
	journal := suite.Render(t, fsys, "/my-journal")
	require.Empty(t, suite.Audit(journal))

	pooler := suite.Find(t, journal, "Pooler", suite.JournalPooler)
	spec := func(fields ...string) string {
		v, _, err := unstructured.NestedString(pooler.Object, append([]string{"spec"}, fields...)...)
		require.NoError(t, err)
		return v
	}
	require.Equal(t, suite.JournalNamespace, pooler.GetNamespace())
	require.Equal(t, suite.JournalCluster, spec("cluster", "name"))
	require.Equal(t, "rw", spec("type"), "in front of the primary")
	require.Equal(t, "session", spec("pgbouncer", "poolMode"), "keyledger holds its timeouts and locks in the session")
	cluster := suite.Find(t, journal, "Cluster", suite.JournalCluster)
	// PgBouncer counts its pool per pod: all pods together open no more
	// server sessions of a role than the role's connectionLimit.
	instances, _, _ := unstructured.NestedInt64(pooler.Object, "spec", "instances")
	poolSize, err := strconv.ParseInt(spec("pgbouncer", "parameters", "default_pool_size"), 10, 64)
	require.NoError(t, err)
	roles, _, _ := unstructured.NestedSlice(cluster.Object, "spec", "managed", "roles")
	require.Len(t, roles, 1, "the component leaves the rest of the Cluster as it is")
	limit, _, _ := unstructured.NestedInt64(roles[0].(map[string]any), "connectionLimit")
	require.Positive(t, instances)
	require.Equal(t, limit, instances*poolSize, "instances x default_pool_size is the role's connectionLimit")
	require.Equal(t, "DISCARD ALL", spec("pgbouncer", "parameters", "server_reset_query"))
	// A cap over every role, below the server's max_connections (100 unless
	// the Cluster sets it): without it, a burst past max_connections starves
	// the roles refused once (TestIntegrationJournalBurstThroughUncappedPoolerStarves).
	dbCap, err := strconv.ParseInt(spec("pgbouncer", "parameters", "max_db_connections"), 10, 64)
	require.NoError(t, err, "the Pooler caps its server sessions over every role (max_db_connections)")
	maxConnections := int64(100)
	if v, ok, _ := unstructured.NestedString(cluster.Object, "spec", "postgresql", "parameters", "max_connections"); ok {
		maxConnections, err = strconv.ParseInt(v, 10, 64)
		require.NoError(t, err)
	}
	require.Less(t, instances*dbCap, maxConnections, "instances x max_db_connections stays below max_connections")

	names, _, err := unstructured.NestedStringSlice(cluster.Object, "spec", "certificates", "serverAltDNSNames")
	require.NoError(t, err)
	require.Contains(t, names, suite.JournalPoolerHost, "the name the Jobs verify")

	// Without the component: no Pooler, no extra name.
	plain := suite.Render(t, fsys, "/deploy/journal")
	require.False(t, slices.ContainsFunc(plain, func(o *unstructured.Unstructured) bool { return o.GetKind() == "Pooler" }))
	_, found, _ := unstructured.NestedFieldNoCopy(suite.Find(t, plain, "Cluster", suite.JournalCluster).Object, "spec", "certificates")
	require.False(t, found)

	// Every served Job and policy through the pooler: the retirement
	// (the private overlay), the versioned write and the credentials
	// hooks' policy.
	o := validPrivateOverlay()
	o.Pooled = true
	retire := suite.RenderPrivate(t, o)
	require.Empty(t, suite.Audit(retire), "the pooled private overlay passes the deployment audit")
	direct := suite.RenderPrivate(t, validPrivateOverlay())

	served := map[string][]*unstructured.Unstructured{"retirement": retire}
	for _, dir := range []string{"overlays/cloudnativepg-versioned", "credentials"} {
		fsys := suite.DeployFS(t)
		require.NoError(t, fsys.WriteFile("/mine/kustomization.yaml", []byte(fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: team-a
resources:
- ../deploy/%s
components:
- ../deploy/components/cloudnativepg-pooler
`, dir))))
		objs := suite.Render(t, fsys, "/mine")
		require.Empty(t, suite.Audit(objs), dir)
		served[dir] = objs
	}
	for what, objs := range served {
		for _, obj := range objs {
			switch obj.GetKind() {
			case "Job":
				require.Equal(t, suite.JournalPoolerHost, suite.EnvValue(t, obj, "PGHOST"), what)
				require.Contains(t, names, suite.EnvValue(t, obj, "PGHOST"), "%s: the host is in the server certificate", what)
				require.Contains(t, suite.EnvValue(t, obj, "KEYLEDGER_DATABASE_URL"), "sslmode=verify-full", what)
			case "NetworkPolicy":
				rules := journalEgress(t, obj)
				require.Len(t, rules, 1, "%s: one rule into the journal's namespace", what)
				require.Equal(t, map[string]any{"cnpg.io/poolerName": suite.JournalPooler},
					rules[0]["podSelector"].(map[string]any)["matchLabels"], "%s: the pooler's pods only, no instance", what)
			}
		}
	}
	// Nothing else changed: the pooled retirement is the direct one but
	// for the host and the journal rule.
	require.Len(t, retire, len(direct))
	for i := range direct {
		a, b := direct[i].DeepCopy(), retire[i].DeepCopy()
		switch a.GetKind() {
		case "Job":
			for _, j := range []*unstructured.Unstructured{a, b} {
				cs, _, _ := unstructured.NestedSlice(j.Object, "spec", "template", "spec", "containers")
				env, _, _ := unstructured.NestedSlice(cs[0].(map[string]any), "env")
				env[0].(map[string]any)["value"] = "HOST"
				cs[0].(map[string]any)["env"] = env
				require.NoError(t, unstructured.SetNestedSlice(j.Object, cs, "spec", "template", "spec", "containers"))
			}
		case "NetworkPolicy":
			for _, np := range []*unstructured.Unstructured{a, b} {
				egress, _, _ := unstructured.NestedSlice(np.Object, "spec", "egress")
				require.NoError(t, unstructured.SetNestedSlice(np.Object, slices.Delete(egress, 1, 2), "spec", "egress"))
			}
		}
		require.Equal(t, a.Object, b.Object, "%s %s", a.GetKind(), a.GetName())
	}
}

// The served component checks what it replaces (JSON patch test): on a
// kustomization without components/cloudnativepg, or one whose journal
// host or rule changed, the build fails instead of patching another field.
func TestIntegrationDeployPoolerComponentChecksWhatItReplaces(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test")
	}
	overlay := func(t *testing.T, fsys filesys.FileSystem, resource string) error {
		t.Helper()
		require.NoError(t, fsys.WriteFile("/mine/kustomization.yaml", []byte(fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../deploy/%s
components:
- ../deploy/components/cloudnativepg-pooler
`, resource))))
		_, err := suite.TryRender(fsys, "/mine")
		return err
	}
	require.NoError(t, overlay(t, suite.DeployFS(t), "overlays/cloudnativepg"))
	require.Error(t, overlay(t, suite.DeployFS(t), "base"), "no journal host or rule to replace")
	for _, edit := range []struct{ file, from, to string }{
		{"components/cloudnativepg/database-env.yaml", "value: keyledger-journal-rw.keyledger-journal.svc", "value: journal.example.svc"},
		{"components/cloudnativepg/egress-primary.yaml", "cnpg.io/instanceRole: primary", "cnpg.io/instanceRole: replica"},
	} {
		t.Run(edit.file, func(t *testing.T) {
			fsys := suite.DeployFS(t)
			data, err := fsys.ReadFile("/deploy/" + edit.file)
			require.NoError(t, err)
			require.Contains(t, string(data), edit.from)
			require.NoError(t, fsys.WriteFile("/deploy/"+edit.file, []byte(strings.Replace(string(data), edit.from, edit.to, 1))))
			require.Error(t, overlay(t, fsys, "overlays/cloudnativepg"))
		})
	}
}
