package integration

import (
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/keyledger/keyledger/integration/suite"
)

// Versioned writes as Jobs on a real kubelet, behind the same fence as a
// retirement: an update, then a restore of the archived version, each one
// Job whose command (it holds values) comes from an immutable Secret
// mounted as one file. The Role is exactly versioned.Rules; no value
// reaches a log. In its namespace with its own journal role against the one
// journal of keyledger-journal (a part of TestIntegrationNodeTenancy).
func nodeVersionedJob(t *testing.T) nodeTenant {
	ne := setupNode(t)
	ne.JoinJournal()
	canary := ne.CanaryPod()
	oldValue, newValue := "node-canary-old-"+suite.RandomHex(t, 16), "node-canary-new-"+suite.RandomHex(t, 16)
	live := ne.CreateSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shop-db"}, Data: map[string][]byte{"password": []byte(oldValue)}})

	run := func(suffix string, command map[string]any) map[string]any {
		t.Helper()
		ne.ApplyAll(ne.VersionedOverlay(suffix, live.Name, canary, command))
		end := ne.WaitJob("keyledger-versioned-"+suffix, 3*time.Minute)
		require.True(t, end.Complete, "Job %s failed: %s", suffix, ne.Describe(end.Pod))
		log := ne.Logs(end.Pod, "keyledger") + ne.Logs(end.Pod, "preflight")
		for _, v := range []string{oldValue, newValue, base64.StdEncoding.EncodeToString([]byte(oldValue)), base64.StdEncoding.EncodeToString([]byte(newValue))} {
			require.NotContains(t, log, v, "no value in the Job's logs")
		}
		return suite.OutcomeLine(t, ne.Logs(end.Pod, "keyledger"))
	}

	updated := run("update", map[string]any{
		"apiVersion": "keyledger.dev/v1", "kind": "SecretUpdate",
		"metadata": map[string]any{"requestId": "req-node-update", "mutationId": "mut-node-update"},
		"spec": map[string]any{"namespace": ne.NS, "name": live.Name, "expectedResourceVersion": live.ResourceVersion,
			"data": map[string]any{"password": base64.StdEncoding.EncodeToString([]byte(newValue))}},
	})
	require.Equal(t, "completed", updated["outcome"])
	afterUpdate := ne.GetSecret(live.Name)
	require.Equal(t, newValue, string(afterUpdate.Data["password"]))

	restored := run("restore", map[string]any{
		"apiVersion": "keyledger.dev/v1", "kind": "SecretRestore",
		"metadata": map[string]any{"requestId": "req-node-restore", "mutationId": "mut-node-restore"},
		"spec":     map[string]any{"namespace": ne.NS, "name": live.Name, "version": 1, "expectedResourceVersion": afterUpdate.ResourceVersion},
	})
	require.Equal(t, "completed", restored["outcome"])
	afterRestore := ne.GetSecret(live.Name)
	require.Equal(t, oldValue, string(afterRestore.Data["password"]), "version 1 (the value before the update) is live again")
	require.Equal(t, live.UID, afterRestore.UID)

	// The kubelet makes the Secret volume file group-readable (fsGroup):
	// without --fs-group the run refuses it as not private, before anything.
	objs := ne.VersionedOverlay("no-fs-group", live.Name, canary, map[string]any{
		"apiVersion": "keyledger.dev/v1", "kind": "SecretRestore",
		"metadata": map[string]any{"requestId": "req-node-nofsgroup", "mutationId": "mut-node-nofsgroup"},
		"spec":     map[string]any{"namespace": ne.NS, "name": live.Name, "version": 2, "expectedResourceVersion": afterRestore.ResourceVersion},
	})
	job := suite.Find(t, objs, "Job", "keyledger-versioned")
	containers, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
	main := containers[0].(map[string]any)
	require.Equal(t, []any{"run", "--fs-group", "10001", "/etc/keyledger/command.json"}, main["args"])
	main["args"] = []any{"run", "/etc/keyledger/command.json"}
	require.NoError(t, unstructured.SetNestedSlice(job.Object, containers, "spec", "template", "spec", "containers"))
	ne.ApplyAll(objs)
	end := ne.WaitJob("keyledger-versioned-no-fs-group", 3*time.Minute)
	require.True(t, end.Failed)
	require.Equal(t, 64, suite.ContainerExit(end.Pod.Status.ContainerStatuses, "keyledger"), ne.Describe(end.Pod))
	require.Contains(t, ne.Logs(end.Pod, "keyledger"), "not-private")
	require.Equal(t, afterRestore.ResourceVersion, ne.GetSecret(live.Name).ResourceVersion)

	// The history, read from this machine through the journal: both
	// archived states are listed as keyledger's own, without values.
	r := ne.Keyledger([]string{"history", ne.NS + "/" + live.Name, "-o", "json"})
	require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.NotContains(t, r.Stdout, oldValue)
	require.NotContains(t, r.Stdout, newValue)
	var hist map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &hist), r.Stdout)
	versions, _ := hist["versions"].([]any)
	require.Len(t, versions, 2, "the update and the restore each archived the state they replaced: %s", r.Stdout)
	return nodeTenant{ns: ne.NS, roleURL: ne.Journal.OperatorURL, mutations: []string{"mut-node-update", "mut-node-restore"}}
}
