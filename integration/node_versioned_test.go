package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// versionedOverlay renders the private overlay deploy/README.md tells an
// operator to write for one versioned write (writeVersionedOverlay), with
// the node's API server endpoint and the node test image.
func (ne *nodeEnv) versionedOverlay(suffix, live, canary string, command map[string]any, edits ...func(*versionedOverlay)) []*unstructured.Unstructured {
	t := ne.t
	t.Helper()
	cmd, err := json.Marshal(command)
	require.NoError(t, err)
	fsys := deployFS(t)
	apiIP, apiPort := ne.apiEndpoint()
	o := versionedOverlay{Namespace: ne.ns, NameSuffix: suffix, LiveSecret: live, Canary: canary, Command: cmd,
		APIServerIP: apiIP, APIServerPort: apiPort, ImageName: imageName(nodeShared.image), ImageTag: imageTag(nodeShared.image)}
	for _, edit := range edits {
		edit(&o)
	}
	dir := writeVersionedOverlay(t, fsys, o)
	objs := render(t, fsys, dir)
	require.Empty(t, audit(objs), "the overlay passes the deployment audit")
	ne.cleanupClusterScoped(objs)
	return objs
}

// versionedOverlay is what an operator fills in for one versioned write.
type versionedOverlay struct {
	Namespace, NameSuffix, LiveSecret, Canary string
	Command                                   []byte
	APIServerIP                               string
	APIServerPort                             int
	ImageName, ImageTag                       string
	// Pooled adds components/cloudnativepg-pooler.
	Pooled bool
}

// writeVersionedOverlay lays out, at /my-write in fsys, the private overlay
// deploy/README.md tells an operator to write for one versioned write:
// overlays/cloudnativepg-versioned, the filled api-egress component, the
// command as an immutable Secret, the live Secret's name in the Role and the
// canary in the gate. It returns the overlay's path.
func writeVersionedOverlay(t *testing.T, fsys filesys.FileSystem, o versionedOverlay) string {
	t.Helper()
	fillAPIEgress(t, fsys, "/my-write", o.APIServerIP, o.APIServerPort)
	require.NoError(t, fsys.WriteFile("/my-write/command.json", o.Command))
	pooler := ""
	if o.Pooled {
		pooler = "- ../deploy/components/cloudnativepg-pooler\n"
	}
	require.NoError(t, fsys.WriteFile("/my-write/kustomization.yaml", []byte(fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: "%[1]s"
nameSuffix: "-%[2]s"
resources:
- ../deploy/overlays/cloudnativepg-versioned
components:
- api-egress
%[7]ssecretGenerator:
- name: keyledger-versioned-command
  behavior: replace
  files:
  - command.json
  options:
    immutable: true
patches:
- target:
    kind: Role
    name: keyledger-versioned
  patch: |-
    - op: replace
      path: /rules/1/resourceNames
      value: [%[3]q]
- target:
    kind: Job
    name: keyledger-versioned
  patch: |-
    - op: replace
      path: /spec/template/spec/initContainers/0/env/0/value
      value: %[4]q
images:
- name: keyledger
  newName: %[5]s
  newTag: %[6]s
`, o.Namespace, o.NameSuffix, o.LiveSecret, o.Canary, o.ImageName, o.ImageTag, pooler))))
	return "/my-write"
}

// Versioned writes as Jobs on a real kubelet, behind the same fence as a
// retirement: an update, then a restore of the archived version, each one
// Job whose command (it holds values) comes from an immutable Secret
// mounted as one file. The Role is exactly versioned.Rules; no value
// reaches a log. In its namespace with its own journal role against the one
// journal of keyledger-journal (a part of TestIntegrationNodeTenancy).
func nodeVersionedJob(t *testing.T) nodeTenant {
	ne := setupNode(t)
	ne.joinJournal()
	canary := ne.canaryPod()
	oldValue, newValue := "node-canary-old-"+randomHexT(t), "node-canary-new-"+randomHexT(t)
	live := ne.createSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shop-db"}, Data: map[string][]byte{"password": []byte(oldValue)}})

	run := func(suffix string, command map[string]any) map[string]any {
		t.Helper()
		ne.applyAll(ne.versionedOverlay(suffix, live.Name, canary, command))
		end := ne.waitJob("keyledger-versioned-"+suffix, 3*time.Minute)
		require.True(t, end.Complete, "Job %s failed: %s", suffix, ne.describe(end.Pod))
		log := ne.logs(end.Pod, "keyledger") + ne.logs(end.Pod, "preflight")
		for _, v := range []string{oldValue, newValue, base64.StdEncoding.EncodeToString([]byte(oldValue)), base64.StdEncoding.EncodeToString([]byte(newValue))} {
			require.NotContains(t, log, v, "no value in the Job's logs")
		}
		return outcomeLine(t, ne.logs(end.Pod, "keyledger"))
	}

	updated := run("update", map[string]any{
		"apiVersion": "keyledger.dev/v1", "kind": "SecretUpdate",
		"metadata": map[string]any{"requestId": "req-node-update", "mutationId": "mut-node-update"},
		"spec": map[string]any{"namespace": ne.ns, "name": live.Name, "expectedResourceVersion": live.ResourceVersion,
			"data": map[string]any{"password": base64.StdEncoding.EncodeToString([]byte(newValue))}},
	})
	require.Equal(t, "completed", updated["outcome"])
	afterUpdate := ne.getSecret(live.Name)
	require.Equal(t, newValue, string(afterUpdate.Data["password"]))

	restored := run("restore", map[string]any{
		"apiVersion": "keyledger.dev/v1", "kind": "SecretRestore",
		"metadata": map[string]any{"requestId": "req-node-restore", "mutationId": "mut-node-restore"},
		"spec":     map[string]any{"namespace": ne.ns, "name": live.Name, "version": 1, "expectedResourceVersion": afterUpdate.ResourceVersion},
	})
	require.Equal(t, "completed", restored["outcome"])
	afterRestore := ne.getSecret(live.Name)
	require.Equal(t, oldValue, string(afterRestore.Data["password"]), "version 1 (the value before the update) is live again")
	require.Equal(t, live.UID, afterRestore.UID)

	// The kubelet makes the Secret volume file group-readable (fsGroup):
	// without --fs-group the run refuses it as not private, before anything.
	objs := ne.versionedOverlay("no-fs-group", live.Name, canary, map[string]any{
		"apiVersion": "keyledger.dev/v1", "kind": "SecretRestore",
		"metadata": map[string]any{"requestId": "req-node-nofsgroup", "mutationId": "mut-node-nofsgroup"},
		"spec":     map[string]any{"namespace": ne.ns, "name": live.Name, "version": 2, "expectedResourceVersion": afterRestore.ResourceVersion},
	})
	job := find(t, objs, "Job", "keyledger-versioned")
	containers, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
	main := containers[0].(map[string]any)
	require.Equal(t, []any{"run", "--fs-group", "10001", "/etc/keyledger/command.json"}, main["args"])
	main["args"] = []any{"run", "/etc/keyledger/command.json"}
	require.NoError(t, unstructured.SetNestedSlice(job.Object, containers, "spec", "template", "spec", "containers"))
	ne.applyAll(objs)
	end := ne.waitJob("keyledger-versioned-no-fs-group", 3*time.Minute)
	require.True(t, end.Failed)
	require.Equal(t, 64, containerExit(end.Pod.Status.ContainerStatuses, "keyledger"), ne.describe(end.Pod))
	require.Contains(t, ne.logs(end.Pod, "keyledger"), "not-private")
	require.Equal(t, afterRestore.ResourceVersion, ne.getSecret(live.Name).ResourceVersion)

	// The history, read from this machine through the journal: both
	// archived states are listed as keyledger's own, without values.
	r := ne.keyledger([]string{"history", ne.ns + "/" + live.Name, "-o", "json"})
	require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.NotContains(t, r.Stdout, oldValue)
	require.NotContains(t, r.Stdout, newValue)
	var hist map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &hist), r.Stdout)
	versions, _ := hist["versions"].([]any)
	require.Len(t, versions, 2, "the update and the restore each archived the state they replaced: %s", r.Stdout)
	return nodeTenant{ns: ne.ns, roleURL: ne.journal.OperatorURL, mutations: []string{"mut-node-update", "mut-node-restore"}}
}
