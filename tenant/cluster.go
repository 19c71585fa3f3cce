package tenant

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// ManagedRoleKind is the Kind of a Change to the Cluster's
// spec.managed.roles entry of a namespace's role.
const ManagedRoleKind = "ManagedRole"

// managedRole is the Cluster's spec.managed.roles entry of n's role:
// login and nothing else (row-level security confines it; never
// bypassrls), its password from n.RoleSecret. Absent (offboarding):
// CloudNativePG drops the role; an entry removed from the list would only
// leave the role unmanaged, still able to log in.
func managedRole(n Names, present bool) map[string]any {
	if !present {
		// With the CRD's defaults spelled out, as the API server stores
		// the entry: an entry read back equals the one written.
		return map[string]any{"name": n.Role, "ensure": "absent", "connectionLimit": int64(-1), "inherit": true}
	}
	return map[string]any{
		"name": n.Role, "ensure": "present", "comment": "keyledger Jobs and hooks of namespace " + n.Namespace,
		"login": true, "superuser": false, "createrole": false, "createdb": false, "replication": false,
		"bypassrls": false, "inherit": false, "connectionLimit": int64(16),
		"passwordSecret": map[string]any{"name": n.RoleSecret},
	}
}

// ensureRole makes the Cluster's entry of n's role the one managedRole
// gives, with a JSON patch that tests the Cluster's resourceVersion: the
// list is atomic in the CRD (no list-map keys), so the patch replaces or
// appends only this entry and fails, rather than clobbers, when another
// writer changed the Cluster since it was read. It reads again up to three
// times.
func ensureRole(ctx context.Context, a *Admin, n Names, present bool) (Change, error) {
	c := Change{Kind: ManagedRoleKind, Namespace: JournalNamespace, Name: n.Role, DryRun: a.DryRun}
	for range 3 {
		patch, action, err := rolePatch(ctx, a, n, present)
		if err != nil {
			return c, err
		}
		c.Action = action
		if patch == nil || a.DryRun {
			return c, nil
		}
		_, err = a.Dynamic.Resource(clusterKind.GVR).Namespace(JournalNamespace).Patch(ctx, JournalCluster, types.JSONPatchType, patch, metav1.PatchOptions{})
		if err == nil {
			return c, nil
		}
		if !conflict(err) {
			return c, apiError("changing the Cluster's managed role "+n.Role, err)
		}
	}
	return c, changedUnder(clusterKind, JournalNamespace, JournalCluster)
}

// rolePatch reads the Cluster and returns the JSON patch that makes n's
// entry right (nil when it is), and what it does.
func rolePatch(ctx context.Context, a *Admin, n Names, present bool) ([]byte, Action, error) {
	cluster, err := readCluster(ctx, a)
	if err != nil {
		return nil, "", err
	}
	want := managedRole(n, present)
	roles, _, _ := unstructured.NestedSlice(cluster.Object, "spec", "managed", "roles")
	_, hasManaged, _ := unstructured.NestedMap(cluster.Object, "spec", "managed")
	i := slices.IndexFunc(roles, func(r any) bool { m, _ := r.(map[string]any); return m["name"] == n.Role })
	ops := []map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": cluster.GetResourceVersion()}}
	var action Action
	switch {
	case i >= 0 && reflect.DeepEqual(roles[i], want):
		if present {
			return nil, Unchanged, nil
		}
		return nil, Absent, nil
	case i >= 0:
		ops = append(ops, map[string]any{"op": "replace", "path": fmt.Sprintf("/spec/managed/roles/%d", i), "value": want})
		action = Updated
	case len(roles) > 0:
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/managed/roles/-", "value": want})
		action = Created
	case hasManaged: // "add" sets the member, also over an empty or null list
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/managed/roles", "value": []any{want}})
		action = Created
	default:
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/managed", "value": map[string]any{"roles": []any{want}}})
		action = Created
	}
	if !present {
		action = Deleted
	}
	patch, err := json.Marshal(ops)
	return patch, action, err
}

// readCluster reads the journal's Cluster; absent (or no CloudNativePG)
// is journal-cluster-missing.
func readCluster(ctx context.Context, a *Admin) (*unstructured.Unstructured, error) {
	u, err := a.Dynamic.Resource(clusterKind.GVR).Namespace(JournalNamespace).Get(ctx, JournalCluster, metav1.GetOptions{})
	if notFound(err) {
		return nil, refuse(ReasonJournalClusterMissing,
			"install the journal first (deploy/README.md, Once per cluster: the journal), then run the same command again",
			"no CloudNativePG Cluster %s in namespace %s", JournalCluster, JournalNamespace)
	}
	if err != nil {
		return nil, apiError("reading the Cluster "+JournalCluster, err)
	}
	return u, nil
}

// roleApplied says whether CloudNativePG reports n's role reconciled with
// the password of the Secret at resourceVersion rv, and what it reports
// when it cannot reconcile it.
func roleApplied(u *unstructured.Unstructured, n Names, rv string) (bool, []string) {
	reconciled, _, _ := unstructured.NestedStringSlice(u.Object, "status", "managedRolesStatus", "byStatus", "reconciled")
	applied, _, _ := unstructured.NestedString(u.Object, "status", "managedRolesStatus", "passwordStatus", n.Role, "resourceVersion")
	problems, _, _ := unstructured.NestedStringSlice(u.Object, "status", "managedRolesStatus", "cannotReconcile", n.Role)
	return slices.Contains(reconciled, n.Role) && applied == rv, problems
}

// waitApplied waits (bounded by a.Wait) until CloudNativePG reports the
// role reconciled with the password Secret's current resourceVersion.
func waitApplied(ctx context.Context, a *Admin, n Names) error {
	if a.DryRun {
		return nil
	}
	var problems []string
	err := a.poll(ctx, func(ctx context.Context) (bool, error) {
		s, found, err := get[metav1.PartialObjectMetadata](ctx, a, secretKind, JournalNamespace, n.RoleSecret)
		if err != nil || !found {
			return false, err
		}
		u, err := readCluster(ctx, a)
		if err != nil {
			return false, err
		}
		var ok bool
		ok, problems = roleApplied(u, n, s.ResourceVersion)
		return ok, nil
	})
	return waitError(err, n, "its password applied", problems)
}

// waitDropped waits (bounded by a.Wait) until the role is gone from the
// journal's server.
func waitDropped(ctx context.Context, a *Admin, n Names) error {
	if a.DryRun {
		return nil
	}
	err := a.poll(ctx, func(ctx context.Context) (bool, error) {
		exists, err := a.Journal.RoleExists(ctx, n.Role)
		return !exists, err
	})
	var problems []string
	if u, rerr := readCluster(ctx, a); rerr == nil {
		_, problems = roleApplied(u, n, "")
	}
	return waitError(err, n, "dropped", problems)
}

// poll runs cond every a.Poll until it holds, fails, or a.Wait passes.
func (a *Admin) poll(ctx context.Context, cond wait.ConditionWithContextFunc) error {
	every := a.Poll
	if every <= 0 {
		every = time.Second
	}
	return wait.PollUntilContextTimeout(ctx, every, a.Wait, true, cond)
}

func waitError(err error, n Names, what string, problems []string) error {
	if err == nil || !wait.Interrupted(err) {
		return err
	}
	status := fmt.Sprintf("kubectl -n %s get cluster %s -o jsonpath='{.status.managedRolesStatus}'", JournalNamespace, JournalCluster)
	if len(problems) > 0 {
		return unavailable(ReasonRoleCannotReconcile, "correct what CloudNativePG reports ("+status+"), then run the same command again",
			"CloudNativePG cannot reconcile the role %s: %s", n.Role, strings.Join(problems, "; "))
	}
	return unavailable(ReasonRoleNotReconciled, "check that the Cluster is healthy and its operator running ("+status+"), then run the same command again (a longer --wait if it is only slow)",
		"CloudNativePG did not report the role %s %s within --wait", n.Role, what)
}
