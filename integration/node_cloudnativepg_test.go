package integration

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/store"
)

// The journal on the real CloudNativePG operator: the release manifest of
// CLOUDNATIVEPG_VERSION installed on the test node, deploy/journal applied
// with kustomize as deploy/README.md tells a user (a private overlay that
// replaces the example role with the served namespace's and sets the image;
// the per-namespace password Secrets, grant Job and CA ConfigMap of "Once
// per served namespace"), reconciled to
// three Ready instances with the synchronous replication the Cluster
// declares, the migration and grant Jobs run. One Cluster serves every
// subtest (it takes minutes to bring up on two cores); the failover
// subtests lose its primary mid-operation.
const journalService = journalCluster + "-rw"

var (
	clusterGVR = schema.GroupVersionResource{Group: "postgresql.cnpg.io", Version: "v1", Resource: "clusters"}
	poolerGVR  = schema.GroupVersionResource{Group: "postgresql.cnpg.io", Version: "v1", Resource: "poolers"}
)

// cnpgJournal is the deployed journal as a test sees it.
type cnpgJournal struct {
	ne      *nodeEnv // the served namespace
	journal *nodeEnv // the journal's namespace
	role    string   // the served namespace's database role
	caFile  string
	owner   string // the schema owner's URL from this machine (verify-ca)
	binary  string // keyledger with failpoints compiled in
}

// clusterStatus is what the tests read from the Cluster's status.
type clusterStatus struct {
	Phase                         string
	ReadyInstances, Instances     int64
	CurrentPrimary, TargetPrimary string
	TimelineID                    int64
	RolesReconciled               []string // managed roles CloudNativePG has created
}

func (j *cnpgJournal) status(ctx context.Context) (clusterStatus, error) {
	dyn := j.ne.dynamicClient()
	u, err := dyn.Resource(clusterGVR).Namespace(journalNamespace).Get(ctx, journalCluster, metav1.GetOptions{})
	if err != nil {
		return clusterStatus{}, err
	}
	var s clusterStatus
	s.Phase, _, _ = unstructured.NestedString(u.Object, "status", "phase")
	s.ReadyInstances, _, _ = unstructured.NestedInt64(u.Object, "status", "readyInstances")
	s.Instances, _, _ = unstructured.NestedInt64(u.Object, "status", "instances")
	s.CurrentPrimary, _, _ = unstructured.NestedString(u.Object, "status", "currentPrimary")
	s.TargetPrimary, _, _ = unstructured.NestedString(u.Object, "status", "targetPrimary")
	s.TimelineID, _, _ = unstructured.NestedInt64(u.Object, "status", "timelineID")
	s.RolesReconciled, _, _ = unstructured.NestedStringSlice(u.Object, "status", "managedRolesStatus", "byStatus", "reconciled")
	return s, nil
}

// waitCluster waits until cond holds for the Cluster's status.
func (j *cnpgJournal) waitCluster(what string, limit time.Duration, cond func(clusterStatus) bool) clusterStatus {
	t := j.ne.t
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	var last clusterStatus
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := j.status(ctx)
		if err != nil {
			return false, nil
		}
		last = s
		return cond(s), nil
	})
	require.NoError(t, err, "Cluster: %s not reached within %s (last status %+v; node logs in %s)", what, limit, last, j.ne.node.StateDir())
	return last
}

func healthy(s clusterStatus) bool {
	return s.ReadyInstances == 3 && s.CurrentPrimary != "" && s.CurrentPrimary == s.TargetPrimary &&
		s.Phase == "Cluster in healthy state"
}

// deployCloudNativePGJournal installs the operator and the journal and
// returns the served namespace's view, its journal URLs from this machine
// set (through the -rw Service's ClusterIP, verify-ca: a ClusterIP is not
// in the server certificate).
func deployCloudNativePGJournal(ne *nodeEnv) *cnpgJournal {
	t, ctx, c := ne.t, ne.t.Context(), ne.kube.Client()
	t.Helper()
	cnpg, err := platform.InstallCloudNativePG(ctx, ne.kube, ne.node, 8)
	require.NoError(t, err)
	t.Logf("CloudNativePG operator %s, operand %s", cnpg.OperatorImage, cnpg.PostgresImage)

	jn := *ne
	jn.env = &env{t: t, kube: ne.kube, ns: journalNamespace, dir: t.TempDir()}
	j := &cnpgJournal{ne: ne, journal: &jn, role: "keyledger_" + strings.ReplaceAll(ne.ns, "-", "_"),
		binary: failpointBinary(t)}

	// The served namespace's role password (README: "Once per served
	// namespace"): a basic-auth Secret in the journal's namespace for
	// CloudNativePG, the same password in keyledger-journal-credentials of
	// the served namespace for its Jobs.
	_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: journalNamespace}}, metav1.CreateOptions{})
	require.NoError(t, err, "the journal's namespace must be free (the node's stand-in journal of the other node tests lives there too)")
	// The Cluster is the heaviest thing on the node, and the other node
	// tests put their stand-in journal into the same namespace: the whole
	// namespace goes when this test ends, and is waited for.
	t.Cleanup(func() { removeJournalNamespace(t, ne) })
	pw := randomHexT(t)
	for _, s := range []struct{ ns, name string }{{journalNamespace, "keyledger-role-" + ne.ns}, {ne.ns, "keyledger-journal-credentials"}} {
		_, err := c.CoreV1().Secrets(s.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.name}, Type: corev1.SecretTypeBasicAuth,
			Data: map[string][]byte{"username": []byte(j.role), "password": []byte(pw)}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	fsys := deployFS(t)
	require.NoError(t, fsys.WriteFile("/my-journal/kustomization.yaml", []byte(fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../deploy/journal
components:
- ../deploy/journal/pooler
patches:
- target:
    kind: Cluster
    name: %[1]s
  patch: |-
    - op: replace
      path: /spec/managed/roles/0
      value: {name: %[2]s, ensure: present, login: true, superuser: false, createrole: false,
              createdb: false, replication: false, bypassrls: false, inherit: false,
              connectionLimit: 16, passwordSecret: {name: keyledger-role-%[3]s}}
images:
- name: keyledger
  newName: %[4]s
  newTag: %[5]s
`, journalCluster, j.role, ne.ns, imageName(nodeShared.image), imageTag(nodeShared.image)))))
	var cluster, migrate []*unstructured.Unstructured
	for _, o := range render(t, fsys, "/my-journal") {
		if o.GetKind() == "Job" {
			migrate = append(migrate, o)
		} else {
			cluster = append(cluster, o)
		}
	}
	// The Cluster first; the migration Job once it is ready (README).
	start := time.Now()
	jn.applyAll(cluster)
	st := j.waitCluster("three Ready instances", 10*time.Minute, healthy)
	t.Logf("Cluster healthy after %s: %+v", time.Since(start).Round(time.Second), st)

	jn.applyAll(migrate)
	end := jn.waitJob("keyledger-migrate", 3*time.Minute)
	log := jn.logs(end.Pod, "migrate")
	require.True(t, end.Complete, "migration Job failed: %s", log)
	require.Contains(t, log, `"dirty":false`)

	// The served namespace's role, as CloudNativePG reports it, before
	// its grant.
	j.waitCluster("the role "+j.role+" reconciled", 2*time.Minute, func(s clusterStatus) bool {
		return slices.Contains(s.RolesReconciled, j.role)
	})
	fsys = deployFS(t)
	require.NoError(t, fsys.WriteFile("/my-grant/kustomization.yaml", []byte(fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../deploy/journal/grant
patches:
- target:
    kind: Job
    name: keyledger-grant
  patch: |-
    - op: replace
      path: /metadata/name
      value: keyledger-grant-%[1]s
    - op: replace
      path: /spec/template/spec/containers/0/args
      value: ["journal", "grant", %[2]q, %[1]q]
images:
- name: keyledger
  newName: %[3]s
  newTag: %[4]s
`, ne.ns, j.role, imageName(nodeShared.image), imageTag(nodeShared.image)))))
	jn.applyAll(render(t, fsys, "/my-grant"))
	end = jn.waitJob("keyledger-grant-"+ne.ns, 3*time.Minute)
	require.True(t, end.Complete, "grant Job failed: %s", jn.describe(end.Pod))

	// The CA's public certificate for the served namespace (a ConfigMap:
	// the CA Secret holds its private key too).
	ca, err := c.CoreV1().Secrets(journalNamespace).Get(ctx, journalCluster+"-ca", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().ConfigMaps(ne.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "keyledger-journal-ca"},
		Data: map[string]string{"ca.crt": string(ca.Data["ca.crt"])}}, metav1.CreateOptions{})
	require.NoError(t, err)
	j.caFile = filepath.Join(ne.dir, "journal-ca.crt")
	require.NoError(t, os.WriteFile(j.caFile, ca.Data["ca.crt"], 0o600))

	app, err := c.CoreV1().Secrets(journalNamespace).Get(ctx, journalCluster+"-app", metav1.GetOptions{})
	require.NoError(t, err)
	svc, err := c.CoreV1().Services(journalNamespace).Get(ctx, journalService, metav1.GetOptions{})
	require.NoError(t, err)
	hostURL := func(user, pw string) string {
		u := url.URL{Scheme: "postgres", User: url.UserPassword(user, pw), Host: net.JoinHostPort(svc.Spec.ClusterIP, "5432"),
			Path: "/keyledger", RawQuery: "sslmode=verify-ca&connect_timeout=5&sslrootcert=" + url.QueryEscape(j.caFile)}
		return u.String()
	}
	j.owner = hostURL(string(app.Data["username"]), string(app.Data["password"]))
	ne.journal = &platform.Journal{Name: "keyledger", OwnerURL: j.owner, OperatorURL: hostURL(j.role, pw)}
	return j
}

// retirementJobTwice runs deploy/'s retirement Job of one command twice
// against the journal at host (the Job's PGHOST): completed, then
// existing; the Secret is written once, the operation completed.
func (ne *nodeEnv) retirementJobTwice(suffix, secretName, mutation, host string, edits ...func(*privateOverlay)) {
	t := ne.t
	t.Helper()
	canary := ne.canaryPod()
	before := standardKeyring()
	s := ne.createSecret(keyringSecret(secretName, before))
	objs := ne.retirementOverlay(suffix, s.Name, canary, retireCommand(s, "k-2026-07", mutation), true, edits...)
	rendered := find(t, objs, "Job", "keyledger-retire")
	require.Equal(t, host, envValue(t, rendered, "PGHOST"))
	require.Contains(t, envValue(t, rendered, "KEYLEDGER_DATABASE_URL"), "sslmode=verify-full")
	job := "keyledger-retire-" + suffix
	var firstRV string
	for i, want := range []string{"completed", "existing"} {
		if i > 0 {
			ne.deleteJob(job)
		}
		ne.applyAll(objs)
		end := ne.waitJob(job, 3*time.Minute)
		require.True(t, end.Complete, "run %d failed: %s", i+1, ne.describe(end.Pod))
		require.Equal(t, want, outcomeLine(t, ne.logs(end.Pod, "keyledger"))["outcome"], "run %d", i+1)
		after := ne.getSecret(s.Name)
		if i == 0 {
			firstRV = after.ResourceVersion
			requireRetired(t, after, "k-2026-07", mutation, before)
		}
		require.Equal(t, firstRV, after.ResourceVersion, "the second Job writes nothing")
	}
	require.Equal(t, 1, ne.secretWrites(s.Name, s.ResourceVersion, firstRV), "the Secret was written once")
	op, _ := ne.journalOf(mutation)
	require.Equal(t, store.StateCompleted, op.State)
}

// waitPooler waits until the Pooler's Deployment has all its replicas
// available and returns its pods' IPs.
func (j *cnpgJournal) waitPooler(limit time.Duration) []string {
	t := j.ne.t
	t.Helper()
	c := j.ne.kube.Client()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	var ips []string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments(journalNamespace).Get(ctx, journalPooler, metav1.GetOptions{})
		if err != nil || d.Spec.Replicas == nil || d.Status.AvailableReplicas != *d.Spec.Replicas || d.Status.UpdatedReplicas != *d.Spec.Replicas {
			return false, nil
		}
		pods, err := c.CoreV1().Pods(journalNamespace).List(ctx, metav1.ListOptions{LabelSelector: "cnpg.io/poolerName=" + journalPooler})
		if err != nil {
			return false, nil
		}
		ips = ips[:0]
		for _, p := range pods.Items {
			if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				ips = append(ips, p.Status.PodIP)
			}
		}
		return len(ips) == int(*d.Spec.Replicas), nil
	})
	require.NoError(t, err, "the Pooler %s not available within %s (node logs in %s)", journalPooler, limit, j.ne.node.StateDir())
	return ips
}

// poolerURL is the served namespace's journal URL from this machine
// through the Pooler's Service (its ClusterIP, verify-ca as the -rw URL).
func (j *cnpgJournal) poolerURL() string {
	t := j.ne.t
	t.Helper()
	svc, err := j.ne.kube.Client().CoreV1().Services(journalNamespace).Get(t.Context(), journalPooler, metav1.GetOptions{})
	require.NoError(t, err)
	u, err := url.Parse(j.ne.journal.OperatorURL)
	require.NoError(t, err)
	u.Host = net.JoinHostPort(svc.Spec.ClusterIP, "5432")
	return u.String()
}

// roleClients is the client address of every other session of the served
// namespace's role on the primary, read as that role (PostgreSQL shows a
// session's client address to its own role, not to the schema owner).
func (j *cnpgJournal) roleClients() []string {
	t := j.ne.t
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, j.ne.journal.OperatorURL)
	require.True(t, err == nil, "connecting to the journal's primary failed") // the error names the user and address
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT host(client_addr) FROM pg_stat_activity
		WHERE usename = current_user AND pid <> pg_backend_pid() AND client_addr IS NOT NULL`)
	require.NoError(t, err)
	addrs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return addrs
}

// endRoleSessions ends every other session of the served namespace's role
// on the primary (a role may end its own: pg_terminate_backend) and waits
// until none is left, the pooler's idle server sessions of earlier runs
// with them (PgBouncer drops a server session the server closed). A session
// of the role on the primary after that is one a later run made.
func (j *cnpgJournal) endRoleSessions() {
	t := j.ne.t
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, j.ne.journal.OperatorURL)
	require.True(t, err == nil, "connecting to the journal's primary failed") // the error names the user and address
	defer conn.Close(context.Background())
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var left int
		err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE usename = current_user AND pid <> pg_backend_pid()`).Scan(&left)
		return err == nil && left == 0, nil
	})
	require.NoError(t, err, "sessions of %s still on the primary: %v", j.role, j.roleClients())
}

// requireRunsThroughPooler: the role has sessions on the primary, and each
// comes from a pooler pod (pods). After endRoleSessions and a run, that is
// the run's path: a session the run's process opened straight to the
// primary would have ended with it and left none, where the pooler keeps
// its server session open for the next client.
func (j *cnpgJournal) requireRunsThroughPooler(pods []string) {
	t := j.ne.t
	t.Helper()
	clients := j.roleClients()
	t.Logf("sessions of %s on the primary, by client address: %v (pooler pods %v)", j.role, clients, pods)
	require.NotEmpty(t, clients, "the pooler keeps the role's server session after the run")
	for _, addr := range clients {
		require.Contains(t, pods, addr, "a session of %s not from a pooler pod", j.role)
	}
}

// removeJournalNamespace deletes the Pooler and the Cluster, then the
// journal's namespace, and waits until the namespace is gone. If it is not
// gone in time, the error says what is left in it (the namespace's status
// conditions name what its deletion waits for).
func removeJournalNamespace(t *testing.T, ne *nodeEnv) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dyn := ne.dynamicClient()
	for _, o := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{{poolerGVR, journalPooler}, {clusterGVR, journalCluster}} {
		err := dyn.Resource(o.gvr).Namespace(journalNamespace).Delete(ctx, o.name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the %s %s: %v", o.gvr.Resource, o.name, err)
		}
	}
	c := ne.kube.Client()
	if err := c.CoreV1().Namespaces().Delete(ctx, journalNamespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting the journal's namespace: %v", err)
		return
	}
	var last *corev1.Namespace
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		ns, err := c.CoreV1().Namespaces().Get(ctx, journalNamespace, metav1.GetOptions{})
		if err == nil {
			last = ns
		}
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		var left []string
		if last != nil {
			for _, cond := range last.Status.Conditions {
				if cond.Status == corev1.ConditionTrue {
					left = append(left, fmt.Sprintf("%s: %s", cond.Type, cond.Message))
				}
			}
		}
		t.Errorf("the journal's namespace is not gone: %v (%s)", err, strings.Join(left, "; "))
	}
}

var failpointBinaryOnce struct {
	sync.Once
	path string
	err  error
}

// failpointBinary builds keyledger with failpoints compiled in (the node
// suite's own binary is the release build inside the image).
func failpointBinary(t *testing.T) string {
	t.Helper()
	b := &failpointBinaryOnce
	b.Do(func() {
		b.path = filepath.Join(nodeShared.dir, "keyledger-failpoints")
		build := exec.Command("go", "build", "-tags", "failpoints", "-o", b.path, "./cmd/keyledger")
		build.Dir = platform.RepoRoot()
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building keyledger with failpoints: %v\n%s", err, out)
		}
	})
	require.NoError(t, b.err)
	return b.path
}

// journalRows is every operation and record the journal holds, each row as
// PostgreSQL renders it (row_to_json), keyed by table and id: read as the
// schema owner from whatever instance is primary now.
func (j *cnpgJournal) journalRows() map[string]string {
	t := j.ne.t
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var conn *pgx.Conn
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := pgx.Connect(ctx, j.owner)
		if err != nil {
			return false, nil
		}
		conn = c
		return true, nil
	})
	require.NoError(t, err, "connecting to the journal's primary")
	defer conn.Close(context.Background())
	rows := map[string]string{}
	for _, table := range []string{"operations", "records"} {
		res, err := conn.Query(ctx, fmt.Sprintf(`SELECT id::text, row_to_json(t)::text FROM keyledger.%s t`, table))
		require.NoError(t, err)
		for res.Next() {
			var id, row string
			require.NoError(t, res.Scan(&id, &row))
			rows[table+"/"+id] = row
		}
		require.NoError(t, res.Err())
	}
	return rows
}

// loseThePrimary force-deletes the primary's pod (no grace: a node loss as
// the pod sees it) and waits until the operator has promoted a standby
// (a new current primary on a later timeline, read from the Cluster's
// status) and the Cluster is whole again.
func (j *cnpgJournal) loseThePrimary() (before, after clusterStatus) {
	t := j.ne.t
	t.Helper()
	before = j.waitCluster("healthy before the loss", 5*time.Minute, healthy)
	err := j.ne.kube.Client().CoreV1().Pods(journalNamespace).Delete(t.Context(), before.CurrentPrimary,
		metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
	require.NoError(t, err)
	start := time.Now()
	promoted := j.waitCluster("a standby promoted", 5*time.Minute, func(s clusterStatus) bool {
		return s.CurrentPrimary != before.CurrentPrimary && s.CurrentPrimary == s.TargetPrimary && s.TimelineID > before.TimelineID
	})
	t.Logf("primary %s lost; %s promoted on timeline %d after %s", before.CurrentPrimary, promoted.CurrentPrimary,
		promoted.TimelineID, time.Since(start).Round(time.Second))
	after = j.waitCluster("healthy after the failover", 8*time.Minute, healthy)
	require.Equal(t, promoted.CurrentPrimary, after.CurrentPrimary, "no second failover")
	return before, after
}

// requireRowsKept requires every row of before in after, byte for byte.
func requireRowsKept(t *testing.T, before, after map[string]string) {
	t.Helper()
	for k, row := range before {
		got, ok := after[k]
		require.True(t, ok, "journal row %s committed before the loss is gone after it", k)
		require.Equal(t, row, got, "journal row %s changed across the failover", k)
	}
}

func TestIntegrationNodeCloudNativePGJournal(t *testing.T) {
	if reason := platform.OperatorsSkipReason(); reason != "" {
		t.Skip(reason)
	}
	ne := setupNode(t)
	j := deployCloudNativePGJournal(ne)
	ne.binary = j.binary
	t.Run("synchronous-replication", func(t *testing.T) {
		// What the primary enforces, as PostgreSQL holds it: a commit
		// returns once one of the two standbys has flushed it.
		ctx := t.Context()
		conn, err := pgx.Connect(ctx, j.owner)
		require.True(t, err == nil, "connecting to the journal's primary failed") // the error names the user and address
		defer conn.Close(context.Background())
		var names, commit string
		require.NoError(t, conn.QueryRow(ctx, "SHOW synchronous_standby_names").Scan(&names))
		require.NoError(t, conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&commit))
		t.Logf("synchronous_standby_names = %s, synchronous_commit = %s", names, commit)
		require.True(t, strings.HasPrefix(names, "ANY 1 ("), "quorum of one standby: %q", names)
		st, err := j.status(ctx)
		require.NoError(t, err)
		for _, pod := range []string{journalCluster + "-1", journalCluster + "-2", journalCluster + "-3"} {
			if pod != st.CurrentPrimary {
				require.Contains(t, names, `"`+pod+`"`, "every standby is a candidate")
			}
		}
		require.Equal(t, "on", commit, "the commit waits for the standby's flush")
	})

	t.Run("retirement-job-through-rw-service", func(t *testing.T) {
		// deploy/'s retirement Job against this Cluster: its -rw Service by
		// name, verify-full against the Cluster's CA (the ConfigMap above).
		ne.retirementJobTwice("run", "job-keyring", "mut-cnpg-job", journalService+"."+journalNamespace+".svc")
	})

	t.Run("retirement-job-through-the-pooler", func(t *testing.T) {
		// The same Job through the journal's session pooler
		// (deploy/journal/pooler, components/cloudnativepg-pooler): its
		// Service by name, verify-full against the same CA (the Pooler's
		// names are in the server certificate), the served namespace's own
		// role authenticated by PgBouncer with the password PostgreSQL
		// holds for it and passed through to the primary. The Job's policy
		// reaches the pooler's pods only: every session of the role on the
		// primary comes from a pooler pod, and outlives the Job (a warm
		// session for the next run).
		pods := j.waitPooler(4 * time.Minute)
		j.endRoleSessions()
		ne.retirementJobTwice("pooled", "pooled-keyring", "mut-cnpg-pooled", journalPoolerHost, func(o *privateOverlay) { o.Pooled = true })
		j.requireRunsThroughPooler(pods)
	})

	t.Run("credentials-hook-through-the-pooler", func(t *testing.T) {
		// The credentials hook as Argo CD runs it, rendered with
		// --journal-pooler and fenced by deploy/credentials with
		// components/cloudnativepg-pooler: the first sync creates the
		// planned Secrets, the second writes nothing, each a run of the
		// plan journaled through the pooler.
		pods := j.waitPooler(4 * time.Minute)
		j.endRoleSessions()
		apiIP, apiPort := ne.apiEndpoint()
		ne.applyAll(renderCredentialsFence(t, ne.ns, apiIP, apiPort, "../deploy/components/cloudnativepg-pooler"))
		const mutation = "mut-cnpg-pooled-hook"
		plan := credentialPlan(ne.ns, mutation, []planSecret{standardSecret("pooled-cache-app"), standardSecret("pooled-bus-users")})
		dir := ne.renderHook(plan, "--journal-pooler", journalPooler)
		ne.applyHook(dir)
		created := map[string]string{}
		for _, n := range []string{"pooled-cache-app", "pooled-bus-users"} {
			s := ne.getSecret(n)
			requireAlphabet(t, s.Data["password"], 32, alphanumeric)
			created[n] = s.ResourceVersion
		}
		ne.applyHook(dir)
		for n, rv := range created {
			require.Equal(t, rv, ne.getSecret(n).ResourceVersion, "the second sync writes nothing to %s", n)
		}
		for _, run := range []string{":run-1", ":run-2"} {
			op, _ := ne.journalOf(mutation + run)
			require.Equal(t, store.StateCompleted, op.State, "%s%s", mutation, run)
		}
		j.requireRunsThroughPooler(pods)
	})

	t.Run("versioned-job-through-the-pooler", func(t *testing.T) {
		// deploy/'s versioned-write Job through the pooled overlay: an
		// update, completed, its values in no log, every session of the
		// role on the primary a pooler pod's.
		pods := j.waitPooler(4 * time.Minute)
		j.endRoleSessions()
		canary := ne.canaryPod()
		oldValue, newValue := "cnpg-canary-old-"+randomHexT(t), "cnpg-canary-new-"+randomHexT(t)
		live := ne.createSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pooled-db"}, Data: map[string][]byte{"password": []byte(oldValue)}})
		objs := ne.versionedOverlay("pooled", live.Name, canary, map[string]any{
			"apiVersion": "keyledger.dev/v1", "kind": "SecretUpdate",
			"metadata": map[string]any{"requestId": "req-cnpg-pooled-update", "mutationId": "mut-cnpg-pooled-update"},
			"spec": map[string]any{"namespace": ne.ns, "name": live.Name, "expectedResourceVersion": live.ResourceVersion,
				"data": map[string]any{"password": base64.StdEncoding.EncodeToString([]byte(newValue))}},
		}, func(o *versionedOverlay) { o.Pooled = true })
		require.Equal(t, journalPoolerHost, envValue(t, find(t, objs, "Job", "keyledger-versioned"), "PGHOST"))
		ne.applyAll(objs)
		end := ne.waitJob("keyledger-versioned-pooled", 3*time.Minute)
		require.True(t, end.Complete, "Job failed: %s", ne.describe(end.Pod))
		log := ne.logs(end.Pod, "keyledger") + ne.logs(end.Pod, "preflight")
		for _, v := range []string{oldValue, newValue, base64.StdEncoding.EncodeToString([]byte(oldValue)), base64.StdEncoding.EncodeToString([]byte(newValue))} {
			require.NotContains(t, log, v, "no value in the Job's logs")
		}
		require.Equal(t, "completed", outcomeLine(t, ne.logs(end.Pod, "keyledger"))["outcome"])
		require.Equal(t, newValue, string(ne.getSecret(live.Name).Data["password"]))
		j.requireRunsThroughPooler(pods)
	})

	t.Run("metrics-refusal-count", func(*testing.T) { metricsCountRefusal(j) })
	t.Run("journal-list-in-cluster", func(*testing.T) { journalListInCluster(j) })
	t.Run("onboarding", func(t *testing.T) { nodeOnboarding(t, j) })

	t.Run("failover-mid-operation", func(t *testing.T) {
		// Two operations stopped mid-way, then one loss of the primary (a
		// failover takes minutes here: both share it): a retirement killed
		// right after its call record committed (the write not sent), and
		// a credential plan killed between its two creates.
		ctx := t.Context()
		before := standardKeyring()
		s := ne.createSecret(keyringSecret("failover-keyring", before))
		const retireMutation = "mut-cnpg-failover-retire"
		retirePath := ne.writeCommand(retireMutation+".json", retireCommand(s, "k-2026-07", retireMutation))
		asRetirer := ne.asRetirerOf(s)
		const a, b = "failover-a", "failover-b"
		const planMutation = "mut-cnpg-failover-credentials"
		plan := credentialPlan(ne.ns, planMutation, []planSecret{standardSecret(a), standardSecret(b)})
		planPath := ne.writeCommand(planMutation+".json", plan)
		asRunner := ne.asCredentialRunner(plan)
		from := ne.secretsRV() // the watch history from here on

		r := ne.keyledger([]string{"run", retirePath}, asRetirer, withFailpoint("after-call"))
		require.Equal(t, 137, r.Code, "must die right after the call record commits: %s %s", r.Stdout, r.Stderr)
		require.Equal(t, s.ResourceVersion, ne.getSecret(s.Name).ResourceVersion, "the call was journaled, not sent")
		_, records := ne.journalOf(retireMutation)
		require.Equal(t, store.RecordAuthorityCall, records[len(records)-1].Kind, "the last committed record is the call: %v", kinds(records))

		// The plan's two creates go out as one batch, concurrently: the
		// second to reach the transport is never sent (a reset), and the
		// process dies right after the batch, before any answer is
		// journaled. One Secret exists, the other does not.
		r = ne.keyledger([]string{"run", planPath}, asRunner, withFailpoint("after-send"), withEnv("KEYLEDGER_FAULT=reset:POST:/secrets#2"))
		require.Equal(t, 137, r.Code, "must die after the batch of creates: %s %s", r.Stdout, r.Stderr)
		exist := 0
		for _, n := range []string{a, b} {
			_, err := ne.kube.Client().CoreV1().Secrets(ne.ns).Get(ctx, n, metav1.GetOptions{})
			if err == nil {
				exist++
			} else {
				require.True(t, apierrors.IsNotFound(err), "%s: %v", n, err)
			}
		}
		require.Equal(t, 1, exist, "stopped between the two creates: one Secret exists")

		rows := j.journalRows()
		lost, after := j.loseThePrimary()
		requireRowsKept(t, rows, j.journalRows())
		t.Logf("all %d journal rows committed before the loss of %s (timeline %d) are on %s (timeline %d), byte for byte",
			len(rows), lost.CurrentPrimary, lost.TimelineID, after.CurrentPrimary, after.TimelineID)

		r = ne.keyledger([]string{"run", retirePath}, asRetirer)
		require.Equal(t, 0, r.Code, "the retirement rerun converges: %s %s", r.Stdout, r.Stderr)
		retired := ne.getSecret(s.Name)
		requireRetired(t, retired, "k-2026-07", retireMutation, before)
		op, records := ne.journalOf(retireMutation)
		require.Equal(t, store.StateCompleted, op.State)
		require.Equal(t, 1, count(records, store.RecordCompletion))

		r = ne.keyledger([]string{"run", planPath}, asRunner)
		require.Equal(t, 0, r.Code, "the plan rerun converges: %s %s", r.Stdout, r.Stderr)
		op, records = ne.journalOf(planMutation + ":run-1")
		require.Equal(t, store.StateCompleted, op.State)
		require.Equal(t, 1, count(records, store.RecordCompletion))

		require.Len(t, resourceVersions(ne.secretHistory(s.Name, from)), 1, "one write to the keyring Secret in the whole watch history")
		for _, n := range []string{a, b} {
			require.Len(t, ne.getSecret(n).Data["password"], 32)
			require.Len(t, resourceVersions(ne.secretHistory(n, from)), 1, "%s written once in the whole watch history", n)
		}
		requireNoValues(t, r.Stdout+r.Stderr+ne.journalText(planMutation+":run-1"), ne.secretValues(a, b))
	})

	t.Run("pooler-after-failover", func(t *testing.T) {
		// The pooler's server sessions were on the lost primary. The
		// next pooled Job reaches the promoted one (the Pooler dials the
		// -rw Service, which follows the primary): completed, then
		// existing, and every session of the role on the primary now is
		// a pooler pod's.
		pods := j.waitPooler(4 * time.Minute)
		ne.retirementJobTwice("after", "after-failover-keyring", "mut-cnpg-pooled-after-failover", journalPoolerHost,
			func(o *privateOverlay) { o.Pooled = true })
		j.requireRunsThroughPooler(pods) // a promoted primary: no session from before
	})
}
