package suite

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/kustomize/kyaml/filesys"

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
const JournalService = JournalCluster + "-rw"

var (
	ClusterGVR = schema.GroupVersionResource{Group: "postgresql.cnpg.io", Version: "v1", Resource: "clusters"}
	PoolerGVR  = schema.GroupVersionResource{Group: "postgresql.cnpg.io", Version: "v1", Resource: "poolers"}
)

// CnpgJournal is the deployed journal as a test sees it.
type CnpgJournal struct {
	Ne      *NodeEnv // the served namespace
	Journal *NodeEnv // the journal's namespace
	Role    string   // the served namespace's database role
	CaFile  string
	Owner   string // the schema owner's URL from this machine (verify-ca)
	Binary  string // keyledger with failpoints compiled in
}

// ClusterStatus is what the tests read from the Cluster's status.
type ClusterStatus struct {
	Phase                         string
	ReadyInstances, Instances     int64
	CurrentPrimary, TargetPrimary string
	TimelineID                    int64
	RolesReconciled               []string // managed roles CloudNativePG has created
}

func (j *CnpgJournal) Status(ctx context.Context) (ClusterStatus, error) {
	dyn := j.Ne.DynamicClient()
	u, err := dyn.Resource(ClusterGVR).Namespace(JournalNamespace).Get(ctx, JournalCluster, metav1.GetOptions{})
	if err != nil {
		return ClusterStatus{}, err
	}
	var s ClusterStatus
	s.Phase, _, _ = unstructured.NestedString(u.Object, "status", "phase")
	s.ReadyInstances, _, _ = unstructured.NestedInt64(u.Object, "status", "readyInstances")
	s.Instances, _, _ = unstructured.NestedInt64(u.Object, "status", "instances")
	s.CurrentPrimary, _, _ = unstructured.NestedString(u.Object, "status", "currentPrimary")
	s.TargetPrimary, _, _ = unstructured.NestedString(u.Object, "status", "targetPrimary")
	s.TimelineID, _, _ = unstructured.NestedInt64(u.Object, "status", "timelineID")
	s.RolesReconciled, _, _ = unstructured.NestedStringSlice(u.Object, "status", "managedRolesStatus", "byStatus", "reconciled")
	return s, nil
}

// WaitCluster waits until cond holds for the Cluster's status.
func (j *CnpgJournal) WaitCluster(what string, limit time.Duration, cond func(ClusterStatus) bool) ClusterStatus {
	t := j.Ne.T
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	var last ClusterStatus
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := j.Status(ctx)
		if err != nil {
			return false, nil
		}
		last = s
		return cond(s), nil
	})
	require.NoError(t, err, "Cluster: %s not reached within %s (last status %+v; node logs in %s)", what, limit, last, j.Ne.Node.StateDir())
	return last
}

func Healthy(s ClusterStatus) bool {
	return s.ReadyInstances == 3 && s.CurrentPrimary != "" && s.CurrentPrimary == s.TargetPrimary &&
		s.Phase == "Cluster in healthy state"
}

// DeployCloudNativePGJournal installs the operator and the journal and
// returns the served namespace's view, its journal URLs from this machine
// set (through the -rw Service's ClusterIP, verify-ca: a ClusterIP is not
// in the server certificate).
func DeployCloudNativePGJournal(ne *NodeEnv) *CnpgJournal {
	t, ctx, c := ne.T, ne.T.Context(), ne.Kube.Client()
	t.Helper()
	cnpg, err := platform.InstallCloudNativePG(ctx, ne.Kube, ne.Node, 8)
	require.NoError(t, err)
	t.Logf("CloudNativePG operator %s, operand %s", cnpg.OperatorImage, cnpg.PostgresImage)

	jn := *ne
	jn.Env = &Env{T: t, Kube: ne.Kube, NS: JournalNamespace, Dir: t.TempDir()}
	j := &CnpgJournal{Ne: ne, Journal: &jn, Role: "keyledger_" + strings.ReplaceAll(ne.NS, "-", "_"),
		Binary: FailpointBinary(t)}

	// The served namespace's role password (README: "Once per served
	// namespace"): a basic-auth Secret in the journal's namespace for
	// CloudNativePG, the same password in keyledger-journal-credentials of
	// the served namespace for its Jobs.
	_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: JournalNamespace}}, metav1.CreateOptions{})
	require.NoError(t, err, "the journal's namespace must be free (the node's stand-in journal of the other node tests lives there too)")
	// The Cluster is the heaviest thing on the node, and the other node
	// tests put their stand-in journal into the same namespace: the whole
	// namespace goes when this test ends, and is waited for.
	t.Cleanup(func() { RemoveJournalNamespace(t, ne) })
	pw := RandomHexT(t)
	for _, s := range []struct{ ns, name string }{{JournalNamespace, "keyledger-role-" + ne.NS}, {ne.NS, "keyledger-journal-credentials"}} {
		_, err := c.CoreV1().Secrets(s.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.name}, Type: corev1.SecretTypeBasicAuth,
			Data: map[string][]byte{"username": []byte(j.Role), "password": []byte(pw)}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	fsys := DeployFS(t)
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
`, JournalCluster, j.Role, ne.NS, ImageName(nodeShared.image), ImageTag(nodeShared.image)))))
	var cluster, migrate []*unstructured.Unstructured
	for _, o := range Render(t, fsys, "/my-journal") {
		if o.GetKind() == "Job" {
			migrate = append(migrate, o)
		} else {
			cluster = append(cluster, o)
		}
	}
	// The Cluster first; the migration Job once it is ready (README).
	start := time.Now()
	jn.ApplyAll(cluster)
	st := j.WaitCluster("three Ready instances", 10*time.Minute, Healthy)
	t.Logf("Cluster healthy after %s: %+v", time.Since(start).Round(time.Second), st)

	jn.ApplyAll(migrate)
	end := jn.WaitJob("keyledger-migrate", 3*time.Minute)
	log := jn.Logs(end.Pod, "migrate")
	require.True(t, end.Complete, "migration Job failed: %s", log)
	require.Contains(t, log, `"dirty":false`)

	// The served namespace's role, as CloudNativePG reports it, before
	// its grant.
	j.WaitCluster("the role "+j.Role+" reconciled", 2*time.Minute, func(s ClusterStatus) bool {
		return slices.Contains(s.RolesReconciled, j.Role)
	})
	fsys = DeployFS(t)
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
`, ne.NS, j.Role, ImageName(nodeShared.image), ImageTag(nodeShared.image)))))
	jn.ApplyAll(Render(t, fsys, "/my-grant"))
	end = jn.WaitJob("keyledger-grant-"+ne.NS, 3*time.Minute)
	require.True(t, end.Complete, "grant Job failed: %s", jn.Describe(end.Pod))

	// The CA's public certificate for the served namespace (a ConfigMap:
	// the CA Secret holds its private key too).
	ca, err := c.CoreV1().Secrets(JournalNamespace).Get(ctx, JournalCluster+"-ca", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().ConfigMaps(ne.NS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "keyledger-journal-ca"},
		Data: map[string]string{"ca.crt": string(ca.Data["ca.crt"])}}, metav1.CreateOptions{})
	require.NoError(t, err)
	j.CaFile = filepath.Join(ne.Dir, "journal-ca.crt")
	require.NoError(t, os.WriteFile(j.CaFile, ca.Data["ca.crt"], 0o600))

	app, err := c.CoreV1().Secrets(JournalNamespace).Get(ctx, JournalCluster+"-app", metav1.GetOptions{})
	require.NoError(t, err)
	svc, err := c.CoreV1().Services(JournalNamespace).Get(ctx, JournalService, metav1.GetOptions{})
	require.NoError(t, err)
	hostURL := func(user, pw string) string {
		u := url.URL{Scheme: "postgres", User: url.UserPassword(user, pw), Host: net.JoinHostPort(svc.Spec.ClusterIP, "5432"),
			Path: "/keyledger", RawQuery: "sslmode=verify-ca&connect_timeout=5&sslrootcert=" + url.QueryEscape(j.CaFile)}
		return u.String()
	}
	j.Owner = hostURL(string(app.Data["username"]), string(app.Data["password"]))
	ne.Journal = &platform.Journal{Name: "keyledger", OwnerURL: j.Owner, OperatorURL: hostURL(j.Role, pw)}
	return j
}

// RetirementJobTwice runs deploy/'s retirement Job of one command twice
// against the journal at host (the Job's PGHOST): completed, then
// existing; the Secret is written once, the operation completed.
func (ne *NodeEnv) RetirementJobTwice(suffix, secretName, mutation, host string, edits ...func(*PrivateOverlay)) {
	t := ne.T
	t.Helper()
	canary := ne.CanaryPod()
	before := StandardKeyring()
	s := ne.CreateSecret(KeyringSecret(secretName, before))
	objs := ne.RetirementOverlay(suffix, s.Name, canary, RetireCommand(s, "k-2026-07", mutation), true, edits...)
	rendered := Find(t, objs, "Job", "keyledger-retire")
	require.Equal(t, host, EnvValue(t, rendered, "PGHOST"))
	require.Contains(t, EnvValue(t, rendered, "KEYLEDGER_DATABASE_URL"), "sslmode=verify-full")
	job := "keyledger-retire-" + suffix
	var firstRV string
	for i, want := range []string{"completed", "existing"} {
		if i > 0 {
			ne.DeleteJob(job)
		}
		ne.ApplyAll(objs)
		end := ne.WaitJob(job, 3*time.Minute)
		require.True(t, end.Complete, "run %d failed: %s", i+1, ne.Describe(end.Pod))
		require.Equal(t, want, OutcomeLine(t, ne.Logs(end.Pod, "keyledger"))["outcome"], "run %d", i+1)
		after := ne.GetSecret(s.Name)
		if i == 0 {
			firstRV = after.ResourceVersion
			RequireRetired(t, after, "k-2026-07", mutation, before)
		}
		require.Equal(t, firstRV, after.ResourceVersion, "the second Job writes nothing")
	}
	require.Equal(t, 1, ne.SecretWrites(s.Name, s.ResourceVersion, firstRV), "the Secret was written once")
	op, _ := ne.JournalOf(mutation)
	require.Equal(t, store.StateCompleted, op.State)
}

// WaitPooler waits until the Pooler's Deployment has all its replicas
// available and returns its pods' IPs.
func (j *CnpgJournal) WaitPooler(limit time.Duration) []string {
	t := j.Ne.T
	t.Helper()
	c := j.Ne.Kube.Client()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	var ips []string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments(JournalNamespace).Get(ctx, JournalPooler, metav1.GetOptions{})
		if err != nil || d.Spec.Replicas == nil || d.Status.AvailableReplicas != *d.Spec.Replicas || d.Status.UpdatedReplicas != *d.Spec.Replicas {
			return false, nil
		}
		pods, err := c.CoreV1().Pods(JournalNamespace).List(ctx, metav1.ListOptions{LabelSelector: "cnpg.io/poolerName=" + JournalPooler})
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
	require.NoError(t, err, "the Pooler %s not available within %s (node logs in %s)", JournalPooler, limit, j.Ne.Node.StateDir())
	return ips
}

// PoolerURL is the served namespace's journal URL from this machine
// through the Pooler's Service (its ClusterIP, verify-ca as the -rw URL).
func (j *CnpgJournal) PoolerURL() string {
	t := j.Ne.T
	t.Helper()
	svc, err := j.Ne.Kube.Client().CoreV1().Services(JournalNamespace).Get(t.Context(), JournalPooler, metav1.GetOptions{})
	require.NoError(t, err)
	u, err := url.Parse(j.Ne.Journal.OperatorURL)
	require.NoError(t, err)
	u.Host = net.JoinHostPort(svc.Spec.ClusterIP, "5432")
	return u.String()
}

// RoleClients is the client address of every other session of the served
// namespace's role on the primary, read as that role (PostgreSQL shows a
// session's client address to its own role, not to the schema owner).
func (j *CnpgJournal) RoleClients() []string {
	t := j.Ne.T
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, j.Ne.Journal.OperatorURL)
	require.True(t, err == nil, "connecting to the journal's primary failed") // the error names the user and address
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT host(client_addr) FROM pg_stat_activity
		WHERE usename = current_user AND pid <> pg_backend_pid() AND client_addr IS NOT NULL`)
	require.NoError(t, err)
	addrs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return addrs
}

// EndRoleSessions ends every other session of the served namespace's role
// on the primary (a role may end its own: pg_terminate_backend) and waits
// until none is left, the pooler's idle server sessions of earlier runs
// with them (PgBouncer drops a server session the server closed). A session
// of the role on the primary after that is one a later run made.
func (j *CnpgJournal) EndRoleSessions() {
	t := j.Ne.T
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, j.Ne.Journal.OperatorURL)
	require.True(t, err == nil, "connecting to the journal's primary failed") // the error names the user and address
	defer conn.Close(context.Background())
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var left int
		err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE usename = current_user AND pid <> pg_backend_pid()`).Scan(&left)
		return err == nil && left == 0, nil
	})
	require.NoError(t, err, "sessions of %s still on the primary: %v", j.Role, j.RoleClients())
}

// RequireRunsThroughPooler: the role has sessions on the primary, and each
// comes from a pooler pod (pods). After endRoleSessions and a run, that is
// the run's path: a session the run's process opened straight to the
// primary would have ended with it and left none, where the pooler keeps
// its server session open for the next client.
func (j *CnpgJournal) RequireRunsThroughPooler(pods []string) {
	t := j.Ne.T
	t.Helper()
	clients := j.RoleClients()
	t.Logf("sessions of %s on the primary, by client address: %v (pooler pods %v)", j.Role, clients, pods)
	require.NotEmpty(t, clients, "the pooler keeps the role's server session after the run")
	for _, addr := range clients {
		require.Contains(t, pods, addr, "a session of %s not from a pooler pod", j.Role)
	}
}

// RemoveJournalNamespace deletes the Pooler and the Cluster, then the
// journal's namespace, and waits until the namespace is gone. If it is not
// gone in time, the error says what is left in it (the namespace's status
// conditions name what its deletion waits for).
func RemoveJournalNamespace(t *testing.T, ne *NodeEnv) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dyn := ne.DynamicClient()
	for _, o := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{{PoolerGVR, JournalPooler}, {ClusterGVR, JournalCluster}} {
		err := dyn.Resource(o.gvr).Namespace(JournalNamespace).Delete(ctx, o.name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the %s %s: %v", o.gvr.Resource, o.name, err)
		}
	}
	c := ne.Kube.Client()
	if err := c.CoreV1().Namespaces().Delete(ctx, JournalNamespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting the journal's namespace: %v", err)
		return
	}
	var last *corev1.Namespace
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		ns, err := c.CoreV1().Namespaces().Get(ctx, JournalNamespace, metav1.GetOptions{})
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

var FailpointBinaryOnce struct {
	sync.Once
	path string
	err  error
}

// FailpointBinary builds keyledger with failpoints compiled in (the node
// suite's own binary is the release build inside the image).
func FailpointBinary(t *testing.T) string {
	t.Helper()
	b := &FailpointBinaryOnce
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

// JournalRows is every operation and record the journal holds, each row as
// PostgreSQL renders it (row_to_json), keyed by table and id: read as the
// schema owner from whatever instance is primary now.
func (j *CnpgJournal) JournalRows() map[string]string {
	t := j.Ne.T
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var conn *pgx.Conn
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := pgx.Connect(ctx, j.Owner)
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

// LoseThePrimary force-deletes the primary's pod (no grace: a node loss as
// the pod sees it) and waits until the operator has promoted a standby
// (a new current primary on a later timeline, read from the Cluster's
// status) and the Cluster is whole again.
func (j *CnpgJournal) LoseThePrimary() (before, after ClusterStatus) {
	t := j.Ne.T
	t.Helper()
	before = j.WaitCluster("healthy before the loss", 5*time.Minute, Healthy)
	err := j.Ne.Kube.Client().CoreV1().Pods(JournalNamespace).Delete(t.Context(), before.CurrentPrimary,
		metav1.DeleteOptions{GracePeriodSeconds: Ptr(int64(0))})
	require.NoError(t, err)
	start := time.Now()
	promoted := j.WaitCluster("a standby promoted", 5*time.Minute, func(s ClusterStatus) bool {
		return s.CurrentPrimary != before.CurrentPrimary && s.CurrentPrimary == s.TargetPrimary && s.TimelineID > before.TimelineID
	})
	t.Logf("primary %s lost; %s promoted on timeline %d after %s", before.CurrentPrimary, promoted.CurrentPrimary,
		promoted.TimelineID, time.Since(start).Round(time.Second))
	after = j.WaitCluster("healthy after the failover", 8*time.Minute, Healthy)
	require.Equal(t, promoted.CurrentPrimary, after.CurrentPrimary, "no second failover")
	return before, after
}

// SyncExpectingFailure runs `keyledger apply-hook DIR` (an Argo CD sync)
// whose Job fails after its retries, and returns the exit codes of the
// Job's pods and their logs; applyHookOutput, when given, receives what
// apply-hook printed.
func (ne *NodeEnv) SyncExpectingFailure(dir, owner string, applyHookOutput ...*string) (codes []int32, logs string) {
	ne.T.Helper()
	r := ne.Keyledger([]string{"apply-hook", dir, "--timeout", "4m"})
	for _, out := range applyHookOutput {
		*out = r.Stdout + r.Stderr
	}
	require.NotEqual(ne.T, 0, r.Code, "the sync fails: %s %s", r.Stdout, r.Stderr)
	require.Contains(ne.T, r.Stdout+r.Stderr, "hook-job-failed", "%s %s\n%s", r.Stdout, r.Stderr, ne.HookPodLogs())
	pods, err := ne.Kube.Client().CoreV1().Pods(ne.NS).List(context.Background(), metav1.ListOptions{LabelSelector: "keyledger.dev/owner=" + owner})
	require.NoError(ne.T, err)
	for i := range pods.Items {
		p := &pods.Items[i]
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Terminated == nil {
			continue
		}
		codes = append(codes, p.Status.ContainerStatuses[0].State.Terminated.ExitCode)
	}
	return codes, ne.HookPodLogs()
}

// RenderHook runs `keyledger render credentials` for plan into a fresh
// directory, with the node test image and the flags given, and returns the
// directory.
func (ne *NodeEnv) RenderHook(plan map[string]any, flags ...string) string {
	ne.T.Helper()
	planPath := ne.WriteCommand("plan.json", plan)
	dir := filepath.Join(ne.T.TempDir(), "hook")
	r := ne.Keyledger(append([]string{"render", "credentials", "--plan", planPath, "--image", nodeShared.image, "--out-dir", dir}, flags...))
	require.Equal(ne.T, 0, r.Code, "render: %s %s", r.Stdout, r.Stderr)
	return dir
}

// ApplyHook runs `keyledger apply-hook DIR` (what Argo CD does at a sync)
// and requires the Job to succeed in its pod.
func (ne *NodeEnv) ApplyHook(dir string) {
	ne.T.Helper()
	r := ne.Keyledger([]string{"apply-hook", dir, "--timeout", "3m"})
	if r.Code != 0 || !strings.Contains(r.Stdout, `"outcome":"succeeded"`) {
		ne.T.Fatalf("apply-hook: exit %d\nstdout %s\nstderr %s\njob pods:\n%s", r.Code, r.Stdout, r.Stderr, ne.HookPodLogs())
	}
}

// HookPodLogs gathers the logs of the credentials Job's pods (for failures).
func (ne *NodeEnv) HookPodLogs() string {
	pods, err := ne.Kube.Client().CoreV1().Pods(ne.NS).List(context.Background(), metav1.ListOptions{LabelSelector: "keyledger.dev/owner"})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for i := range pods.Items {
		p := &pods.Items[i]
		raw, err := ne.Kube.Client().CoreV1().Pods(ne.NS).GetLogs(p.Name, &corev1.PodLogOptions{Container: "keyledger"}).Do(context.Background()).Raw()
		fmt.Fprintf(&b, "--- %s (%s): %s%v\n", p.Name, p.Status.Phase, raw, err)
	}
	return b.String()
}

// ServerImage is the Debian redis-server and nats-server image, imported
// into the node once.
var ServerImage struct {
	once sync.Once
	tag  string
	err  error
}

func (ne *NodeEnv) ServersImage() string {
	ne.T.Helper()
	ServerImage.once.Do(func() {
		out, err := exec.Command("bash", filepath.Join(platform.RepoRoot(), "hack", "servers-image.sh")).Output()
		if err != nil {
			ServerImage.err = fmt.Errorf("building the servers image: %w", err)
			return
		}
		ServerImage.tag = strings.TrimSpace(string(out))
		ServerImage.err = ne.Node.ImportImages(context.Background(), ServerImage.tag)
	})
	require.NoError(ne.T, ServerImage.err)
	return ServerImage.tag
}

// ServerStatefulSet runs one server pod (NAME-0) whose password comes from
// secret's key password when the pod is created, as a chart would wire it.
func (ne *NodeEnv) ServerStatefulSet(name, secret string, port int32, command ...string) {
	ne.T.Helper()
	labels := map[string]string{"app": name}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.StatefulSetSpec{
		Replicas: Ptr(int32(1)), ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  Ptr(false),
			TerminationGracePeriodSeconds: Ptr(int64(1)),
			Containers: []corev1.Container{{Name: "server", Image: ne.ServersImage(), ImagePullPolicy: corev1.PullNever,
				Command: command,
				Env: []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "password"}}}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}}, PeriodSeconds: 1},
			}},
		}},
	}}
	_, err := ne.Kube.Client().AppsV1().StatefulSets(ne.NS).Create(ne.T.Context(), sts, metav1.CreateOptions{})
	require.NoError(ne.T, err)
}

// PodUIDs records every UID the pod name had, from the API server's watch
// history, until stop is called.
func (ne *NodeEnv) PodUIDs(name string) (stop func() []string) {
	ne.T.Helper()
	ctx, cancel := context.WithCancel(ne.T.Context())
	w, err := ne.Kube.Client().CoreV1().Pods(ne.NS).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	require.NoError(ne.T, err)
	var mu sync.Mutex
	var uids []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Bookmark {
				continue
			}
			mu.Lock()
			if len(uids) == 0 || uids[len(uids)-1] != string(p.UID) {
				uids = append(uids, string(p.UID))
			}
			mu.Unlock()
		}
	}()
	return func() []string {
		cancel()
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return uids
	}
}

// The real node is started once per package run, on first use by a node
// test, with a control plane of its own (bound to the node address): the
// other tests keep their loopback control plane without a kubelet.
var nodeShared struct {
	once     sync.Once
	err      error
	kube     *platform.Kube
	node     *platform.Node
	binary   string // static keyledger, the one inside the image
	image    string // keyledger image, as `make image` builds it
	postgres string // the PostgreSQL image tag
	dir      string
}

// KeyledgerTestImage is the tag the node tests give the keyledger image.
const KeyledgerTestImage = "keyledger.local/keyledger:node-test"

func startNodePlatform() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	s := &nodeShared
	dir, err := os.MkdirTemp("", "keyledger-node-test-")
	if err != nil {
		s.err = err
		return
	}
	s.dir = dir
	// The binary and image a user gets from `make build` and `make image`.
	s.binary = filepath.Join(dir, "keyledger")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", s.binary, "./cmd/keyledger")
	build.Dir = platform.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		s.err = fmt.Errorf("building keyledger: %v\n%s", err, out)
		return
	}
	img := exec.CommandContext(ctx, "bash", filepath.Join(platform.RepoRoot(), "hack", "image.sh"))
	img.Env = append(os.Environ(), "BINARY="+s.binary, "CONTEXT="+filepath.Join(dir, "image"), "IMAGE="+KeyledgerTestImage)
	if out, err := img.CombinedOutput(); err != nil {
		s.err = fmt.Errorf("building the keyledger image: %v\n%s", err, out)
		return
	}
	s.image = KeyledgerTestImage
	pg := exec.CommandContext(ctx, "bash", filepath.Join(platform.RepoRoot(), "hack", "postgres-image.sh"))
	out, err := pg.Output()
	if err != nil {
		s.err = fmt.Errorf("building the PostgreSQL image: %v", err)
		return
	}
	s.postgres = strings.TrimSpace(string(out))
	if s.kube, s.err = platform.StartKube(ctx, platform.WithNode()); s.err != nil {
		return
	}
	if s.node, s.err = platform.StartNode(ctx, s.kube); s.err != nil {
		return
	}
	s.err = s.node.ImportImages(ctx, s.image, s.postgres)
}

// StopNodePlatform tears the node down; after a failed run the control
// plane's and node's logs are kept (their directory is printed).
func StopNodePlatform(failed bool) {
	s := &nodeShared
	if failed && s.kube != nil {
		s.kube.KeepWorkDir()
		fmt.Fprintln(os.Stderr, "node: logs kept in", s.kube.WorkDir())
	}
	if s.node != nil {
		if err := s.node.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping node:", err)
		}
	}
	if s.kube != nil {
		if err := s.kube.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping node control plane:", err)
		}
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// NodeEnv is one node test's view: the node's control plane, a fresh
// namespace, and (after deployJournal) a journal PostgreSQL running as a pod
// in it.
type NodeEnv struct {
	*Env
	Node *platform.Node
}

// SetupNode gives a test the real node. KEYLEDGER_NODE=off skips it
// visibly; a machine that cannot run a node fails here with the reason.
func SetupNode(t *testing.T) *NodeEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the real platform (run without -short)")
	}
	if reason := platform.NodeSkipReason(); reason != "" {
		t.Skip(reason)
	}
	nodeShared.once.Do(startNodePlatform)
	if nodeShared.err != nil {
		t.Fatalf("node platform: %v", nodeShared.err)
	}
	k := nodeShared.kube
	return &NodeEnv{
		Env:  &Env{T: t, Kube: k, NS: k.Namespace(t), Binary: nodeShared.binary, Dir: t.TempDir()},
		Node: nodeShared.node,
	}
}

// ApplyAll server-side-applies objs (as the admin) into the test namespace.
func (ne *NodeEnv) ApplyAll(objs []*unstructured.Unstructured) {
	ne.T.Helper()
	a := ne.Applier()
	for _, obj := range objs {
		_, err := a.Apply(ne.T.Context(), obj.DeepCopy(), ne.NS, false)
		require.NoError(ne.T, err, "applying %s %s", obj.GetKind(), obj.GetName())
	}
}

// JobEnd is how a Job ended, read from the cluster: its status and its
// pod's containers.
type JobEnd struct {
	Complete, Failed bool
	Pod              *corev1.Pod
}

// WaitJob waits until the Job completes or fails (limit bounds the wait).
func (ne *NodeEnv) WaitJob(name string, limit time.Duration) JobEnd {
	ne.T.Helper()
	ctx, cancel := context.WithTimeout(ne.T.Context(), limit)
	defer cancel()
	c := ne.Kube.Client()
	var end JobEnd
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		j, err := c.BatchV1().Jobs(ne.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range j.Status.Conditions {
			if cond.Status != corev1.ConditionTrue {
				continue
			}
			switch cond.Type {
			case batchv1.JobComplete:
				end.Complete = true
			case batchv1.JobFailed:
				end.Failed = true
			}
		}
		return end.Complete || end.Failed, nil
	})
	if err != nil {
		var b strings.Builder
		pods, _ := c.CoreV1().Pods(ne.NS).List(context.Background(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
		for i := range pods.Items {
			b.WriteString(ne.Describe(&pods.Items[i]))
		}
		j, _ := c.BatchV1().Jobs(ne.NS).Get(context.Background(), name, metav1.GetOptions{})
		js, _ := json.Marshal(j.Status)
		ne.T.Fatalf("Job %s did not finish within %s (status %s; node logs in %s):\n%s", name, limit, js, ne.Node.StateDir(), b.String())
	}
	pods, err := c.CoreV1().Pods(ne.NS).List(ne.T.Context(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
	require.NoError(ne.T, err)
	require.Len(ne.T, pods.Items, 1, "one pod for Job %s (backoffLimit 0)", name)
	end.Pod = &pods.Items[0]
	return end
}

// Logs reads a container's log through the API server (which asks the
// kubelet).
func (ne *NodeEnv) Logs(pod *corev1.Pod, container string) string {
	ne.T.Helper()
	b, err := ne.Kube.Client().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container}).Do(ne.T.Context()).Raw()
	require.NoError(ne.T, err, "logs of %s/%s", pod.Name, container)
	return string(b)
}

// Describe is a failed pod's story for a test failure: its containers'
// states and whatever logs they left.
func (ne *NodeEnv) Describe(pod *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s phase %s\n", pod.Name, pod.Status.Phase)
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			st, _ := json.Marshal(cs.State)
			raw, err := ne.Kube.Client().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: cs.Name}).Do(context.Background()).Raw()
			fmt.Fprintf(&b, "container %s: %s\nlog: %s%v\n", cs.Name, st, raw, err)
		}
	}
	return b.String()
}

// OutcomeLine finds the one JSON line with an "outcome" member in a
// container log (stdout and stderr are interleaved there; structured log
// lines have no outcome member).
func OutcomeLine(t *testing.T, log string) map[string]any {
	t.Helper()
	var found map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		// The outcome line; structured log lines (with "msg") may carry an
		// outcome attribute too.
		if _, ok := m["outcome"]; ok && m["msg"] == nil {
			require.Nil(t, found, "more than one outcome line in:\n%s", log)
			found = m
		}
	}
	require.NotNil(t, found, "no outcome line in:\n%s", log)
	return found
}

// ContainerExit is a terminated container's exit code, or -1 when it never
// ran to an end (never started, or still waiting).
func ContainerExit(statuses []corev1.ContainerStatus, name string) int {
	for _, s := range statuses {
		if s.Name == name && s.State.Terminated != nil {
			return int(s.State.Terminated.ExitCode)
		}
	}
	return -1
}

// DeleteJob deletes a Job and its pod and waits until both are gone.
func (ne *NodeEnv) DeleteJob(name string) {
	ne.T.Helper()
	ctx, cancel := context.WithTimeout(ne.T.Context(), 60*time.Second)
	defer cancel()
	c := ne.Kube.Client()
	bg := metav1.DeletePropagationForeground
	err := c.BatchV1().Jobs(ne.NS).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	require.NoError(ne.T, err)
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := c.BatchV1().Jobs(ne.NS).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(ne.T, err, "Job %s not gone", name)
}

// The journal, deployed as deploy/README.md describes it with CloudNativePG:
// one journal for the whole node, in the namespace keyledger-journal, shared
// by every node test; this code plays the operator. It runs PostgreSQL (the
// image the other tests use) as a pod labelled like a CloudNativePG primary,
// behind the keyledger-journal-rw Service, serving TLS with a certificate
// for that Service's names; creates the Secrets CloudNativePG would
// (keyledger-journal-app with host, port, dbname and uri for the schema
// owner, keyledger-journal-ca); then runs the migration Job of
// deploy/journal in a pod there. The Cluster object itself is not applied:
// no CloudNativePG operator runs here. Each test's namespace then joins the
// journal (joinJournal) with a role of its own.
const JournalCluster = "keyledger-journal"

// nodeJournal is the node's one journal, started on first use.
var nodeJournal struct {
	once               sync.Once
	err                error
	ca                 []byte // the CA's certificate (PEM)
	podIP              string
	caFile             string
	superURL, ownerURL string // from this machine to the pod, verify-ca
}

// hostURL is a URL from this machine to the journal pod as user: TLS
// verified against the CA (the pod IP is not in the certificate, so
// verify-ca, not verify-full).
func JournalHostURL(user, pw, db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(user, pw), Host: net.JoinHostPort(nodeJournal.podIP, "5432"), Path: "/" + db,
		RawQuery: "sslmode=verify-ca&sslrootcert=" + url.QueryEscape(nodeJournal.caFile)}
	return u.String()
}

// StartJournal brings the journal up in its namespace, once per node.
func (ne *NodeEnv) StartJournal() {
	ne.T.Helper()
	nodeJournal.once.Do(func() {
		// Stays the error if deployJournal's test fails inside it.
		nodeJournal.err = errors.New("the journal's deployment did not finish")
		nodeJournal.err = ne.DeployJournal()
	})
	require.NoError(ne.T, nodeJournal.err, "the node's journal")
}

func (ne *NodeEnv) DeployJournal() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := ne.Kube.Client()
	ns := JournalNamespace
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// ServiceAccount admission refuses pods until the default account exists.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("default ServiceAccount of %s: %w", ns, err)
	}
	rw := JournalCluster + "-rw"
	ca, serverCert, serverKey, err := JournalPKI(rw, rw+"."+ns, rw+"."+ns+".svc", rw+"."+ns+".svc.cluster.local")
	if err != nil {
		return err
	}
	superPW, ownerPW := RandomHexT(ne.T), RandomHexT(ne.T)
	secrets := []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: JournalCluster + "-ca"}, Data: map[string][]byte{"ca.crt": ca}},
		{ObjectMeta: metav1.ObjectMeta{Name: JournalCluster + "-server"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": serverCert, "tls.key": serverKey}},
		{ObjectMeta: metav1.ObjectMeta{Name: JournalCluster + "-superuser"}, Data: map[string][]byte{"password": []byte(superPW)}},
		{ObjectMeta: metav1.ObjectMeta{Name: JournalCluster + "-app"}, Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{
			"username": []byte("keyledger"), "password": []byte(ownerPW), "host": []byte(rw), "port": []byte("5432"), "dbname": []byte("keyledger"),
			"uri": []byte(fmt.Sprintf("postgresql://keyledger:%s@%s.%s:5432/keyledger", ownerPW, rw, ns)),
		}},
	}
	for _, s := range secrets {
		if _, err := c.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	labels := map[string]string{"cnpg.io/cluster": JournalCluster, "cnpg.io/instanceRole": "primary", "role": "primary"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: JournalCluster + "-1", Labels: labels}, Spec: corev1.PodSpec{
		AutomountServiceAccountToken: Ptr(false),
		SecurityContext:              &corev1.PodSecurityContext{FSGroup: Ptr(int64(70000))},
		Containers: []corev1.Container{{
			Name: "postgres", Image: nodeShared.postgres, ImagePullPolicy: corev1.PullNever,
			Args: []string{"-c", "ssl=on", "-c", "ssl_cert_file=/tls/tls.crt", "-c", "ssl_key_file=/tls/tls.key"},
			Env: []corev1.EnvVar{{Name: "POSTGRES_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: JournalCluster + "-superuser"}, Key: "password"}}}},
			Ports:          []corev1.ContainerPort{{ContainerPort: 5432}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(5432)}}, PeriodSeconds: 1},
			VolumeMounts:   []corev1.VolumeMount{{Name: "tls", MountPath: "/tls", ReadOnly: true}},
		}},
		Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: JournalCluster + "-server", DefaultMode: Ptr(int32(0o640))}}}},
	}}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: rw}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"cnpg.io/cluster": JournalCluster, "cnpg.io/instanceRole": "primary"},
		Ports:    []corev1.ServicePort{{Port: 5432, TargetPort: intstr.FromInt32(5432)}},
	}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	journalNS := *ne
	journalNS.Env = &Env{T: ne.T, Kube: ne.Kube, NS: ns}
	nodeJournal.podIP = journalNS.WaitPodReady(pod.Name, 90*time.Second)
	nodeJournal.ca = ca
	nodeJournal.caFile = filepath.Join(nodeShared.dir, "journal-ca.crt")
	if err := os.WriteFile(nodeJournal.caFile, ca, 0o600); err != nil {
		return err
	}
	nodeJournal.superURL = JournalHostURL("postgres", superPW, "postgres")
	nodeJournal.ownerURL = JournalHostURL("keyledger", ownerPW, "keyledger")
	// What CloudNativePG's initdb does: the owner and its database.
	conn, err := pgx.Connect(ctx, nodeJournal.superURL)
	if err != nil {
		return fmt.Errorf("connecting to the journal pod as the superuser: %w", err)
	}
	defer conn.Close(ctx)
	for _, stmt := range []string{
		fmt.Sprintf("CREATE ROLE keyledger LOGIN PASSWORD '%s'", ownerPW),
		"CREATE DATABASE keyledger OWNER keyledger",
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("preparing the journal database: %w", err)
		}
	}

	// The migration Job of deploy/journal, in a pod, as the schema owner.
	var objs []*unstructured.Unstructured
	for _, o := range RenderJournal(ne.T, TenancyImage{Name: ImageName(nodeShared.image), Tag: ImageTag(nodeShared.image)}) {
		switch o.GetKind() {
		case "Cluster", "Namespace": // the operator's object, played above; the namespace, made above
		default:
			objs = append(objs, o)
		}
	}
	journalNS.ApplyAll(objs)
	end := journalNS.WaitJob("keyledger-migrate", 3*time.Minute)
	log := journalNS.Logs(end.Pod, "migrate")
	if !end.Complete || !strings.Contains(log, `"dirty":false`) {
		return fmt.Errorf("migration Job failed: %s", log)
	}
	return nil
}

// JoinJournal gives the test's namespace its own journal role, as
// deploy/README.md's "Once per served namespace" does: the role (what
// CloudNativePG's managed.roles would create) with its password Secret in
// the journal's namespace; `keyledger journal grant ROLE NS` as the schema
// owner, by the grant Job of deploy/journal/grant; the copy of the password in the namespace
// (keyledger-journal-credentials) and the CA's certificate as a ConfigMap
// (keyledger-journal-ca). The test's journal URLs then connect as the
// owner and as that role.
func (ne *NodeEnv) JoinJournal() {
	ne.T.Helper()
	t, ctx, c := ne.T, ne.T.Context(), ne.Kube.Client()
	ne.StartJournal()
	role, pw := JournalRole(ne.NS), RandomHexT(t)
	conn, err := pgx.Connect(ctx, nodeJournal.superURL)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB NOBYPASSRLS NOINHERIT PASSWORD '%s'",
		pgx.Identifier{role}.Sanitize(), pw))
	require.NoError(t, err, "creating the namespace's role")
	require.NoError(t, conn.Close(ctx))
	basicAuth := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeBasicAuth,
			Data: map[string][]byte{"username": []byte(role), "password": []byte(pw)}}
	}
	_, err = c.CoreV1().Secrets(JournalNamespace).Create(ctx, basicAuth("keyledger-role-"+ne.NS), metav1.CreateOptions{})
	require.NoError(t, err)
	ne.Journal = &platform.Journal{Name: "keyledger", OwnerURL: nodeJournal.ownerURL, OperatorURL: JournalHostURL(role, pw, "keyledger")}
	ne.GrantJob()
	ne.JournalClient(ne.NS, basicAuth("keyledger-journal-credentials"))
}

// GrantJob runs the grant Job of deploy/journal/grant for the test's
// namespace in the journal's namespace, as deploy/README.md tells an
// operator to. A Job that could not reach PostgreSQL (69: its new pod not
// yet admitted by the NetworkPolicy implementation) is created again, as the
// README says for 69, at most twice more; the grant is idempotent.
func (ne *NodeEnv) GrantJob() {
	ne.T.Helper()
	t := ne.T
	journalNS := *ne
	journalNS.Env = &Env{T: t, Kube: ne.Kube, NS: JournalNamespace}
	objs := RenderGrant(t, ne.NS, TenancyImage{Name: ImageName(nodeShared.image), Tag: ImageTag(nodeShared.image)})
	job := "keyledger-grant-" + ne.NS
	for attempt := 1; ; attempt++ {
		journalNS.ApplyAll(objs)
		end := journalNS.WaitJob(job, 2*time.Minute)
		log := journalNS.Logs(end.Pod, "grant")
		if end.Complete {
			require.Contains(t, log, fmt.Sprintf("grant %s %s changed\n", JournalRole(ne.NS), ne.NS))
			journalNS.DeleteJob(job)
			return
		}
		code := ContainerExit(end.Pod.Status.ContainerStatuses, "grant")
		require.True(t, code == 69 && attempt < 3, "grant Job failed (exit %d, attempt %d): %s", code, attempt, log)
		journalNS.DeleteJob(job)
	}
}

// JournalClient creates, in ns, what a served namespace's pods mount to
// reach the journal: the role's credentials Secret and the CA ConfigMap.
func (ne *NodeEnv) JournalClient(ns string, credentials *corev1.Secret) {
	ne.T.Helper()
	c := ne.Kube.Client()
	_, err := c.CoreV1().Secrets(ns).Create(ne.T.Context(), credentials, metav1.CreateOptions{})
	require.NoError(ne.T, err)
	_, err = c.CoreV1().ConfigMaps(ns).Create(ne.T.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "keyledger-journal-ca"},
		Data: map[string]string{"ca.crt": string(nodeJournal.ca)}}, metav1.CreateOptions{})
	require.NoError(ne.T, err)
}

// WaitPodReady waits until the pod is Ready and returns its IP.
func (ne *NodeEnv) WaitPodReady(name string, limit time.Duration) string {
	ne.T.Helper()
	ctx, cancel := context.WithTimeout(ne.T.Context(), limit)
	defer cancel()
	var ip string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := ne.Kube.Client().CoreV1().Pods(ne.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.PodIP != "" {
				ip = p.Status.PodIP
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(ne.T, err, "pod %s not Ready within %s; node logs in %s", name, limit, ne.Node.StateDir())
	return ip
}

func ImageName(ref string) string { return ref[:strings.LastIndexByte(ref, ':')] }

func ImageTag(ref string) string { return ref[strings.LastIndexByte(ref, ':')+1:] }

func Ptr[T any](v T) *T { return &v }

func RandomHexT(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// JournalPKI makes a CA and a server certificate for names, PEM encoded.
func JournalPKI(names ...string) (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "keyledger-journal-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// MetricsPort is CloudNativePG's metrics endpoint on every instance.
const MetricsPort = "9187"

// MetricSample is one line of the Prometheus text format: a metric's name, its
// labels and its value.
type MetricSample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

var (
	SampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
	LabelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// ParseMetrics reads the samples of a text-format metrics page.
func ParseMetrics(page string) ([]MetricSample, error) {
	var out []MetricSample
	for _, line := range strings.Split(page, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := SampleLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("not a metricSample line: %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, fmt.Errorf("metricSample %s: %w", m[1], err)
		}
		s := MetricSample{Name: m[1], Labels: map[string]string{}, Value: v}
		for _, l := range LabelPair.FindAllStringSubmatch(m[2], -1) {
			s.Labels[l[1]] = l[2]
		}
		out = append(out, s)
	}
	return out, nil
}

// ScrapePrimary reads the metrics page of the Cluster's current primary,
// from this machine at the pod's IP.
func (j *CnpgJournal) ScrapePrimary(ctx context.Context) (string, error) {
	st, err := j.Status(ctx)
	if err != nil {
		return "", err
	}
	pod, err := j.Ne.Kube.Client().CoreV1().Pods(JournalNamespace).Get(ctx, st.CurrentPrimary, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if pod.Status.PodIP == "" {
		return "", fmt.Errorf("primary %s has no IP yet", pod.Name)
	}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(pod.Status.PodIP, MetricsPort), Path: "/metrics"}
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

// PollMetrics scrapes the primary until cond holds for its samples (the
// instance manager reruns the queries once their results are 30 s old),
// bounded by limit, and returns the last page.
func (j *CnpgJournal) PollMetrics(what string, limit time.Duration, cond func([]MetricSample) bool) string {
	t := j.Ne.T
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	var page string
	var last error
	err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := j.ScrapePrimary(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		page = p
		samples, err := ParseMetrics(p)
		if err != nil {
			return false, err
		}
		return cond(samples), nil
	})
	require.NoError(t, err, "metrics: %s not seen within %s (last error %v; keyledger lines: %s)", what, limit, last, KeyledgerLines(page))
	return page
}

// KeyledgerLines is every sample of a metrics page from keyledger's
// queries, and every error of them (cnpg_errors_total names the failed
// query).
func KeyledgerLines(page string) string {
	var b strings.Builder
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "cnpg_keyledger_") || QueryError(line) {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// QueryError: line is CloudNativePG's count of a keyledger query's errors.
func QueryError(line string) bool {
	return strings.HasPrefix(line, "cnpg_errors_total{") && strings.Contains(line, `errorUserQueries="keyledger_`)
}

// RequireNoSecrets: text names none of the given identifiers, no key
// material, no password of the journal's roles, no DSN and no address of
// the journal.
func (j *CnpgJournal) RequireNoSecrets(text string, identifiers ...string) {
	t := j.Ne.T
	t.Helper()
	for _, id := range identifiers {
		require.NotContains(t, text, id)
	}
	RequireNoValues(t, text, AllMaterial())
	for _, dsn := range []string{j.Owner, j.Ne.Journal.OperatorURL} {
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

// Onboarded is what `keyledger journal onboard` makes, by kind and
// namespace/name, for reading resourceVersions.
type Onboarded struct {
	Kind, NS, Name string
}

// RoleExists asks the journal's server, as the schema owner.
func (j *CnpgJournal) RoleExists(role string) bool {
	t := j.Ne.T
	t.Helper()
	st, err := store.Open(t.Context(), j.Owner)
	require.NoError(t, err)
	defer st.Close()
	exists, err := st.RoleExists(t.Context(), role)
	require.NoError(t, err)
	return exists
}

// ResourceVersion is the object's, "" when it does not exist.
func (j *CnpgJournal) ResourceVersion(o Onboarded) string {
	t := j.Ne.T
	t.Helper()
	c, ctx := j.Ne.Kube.Client(), t.Context()
	var meta metav1.Object
	var err error
	switch o.Kind {
	case "Secret":
		meta, err = c.CoreV1().Secrets(o.NS).Get(ctx, o.Name, metav1.GetOptions{})
	case "ConfigMap":
		meta, err = c.CoreV1().ConfigMaps(o.NS).Get(ctx, o.Name, metav1.GetOptions{})
	case "NetworkPolicy":
		meta, err = c.NetworkingV1().NetworkPolicies(o.NS).Get(ctx, o.Name, metav1.GetOptions{})
	default:
		t.Fatalf("no kind %s", o.Kind)
	}
	if apierrors.IsNotFound(err) {
		return ""
	}
	require.NoError(t, err)
	return meta.GetResourceVersion()
}

func (j *CnpgJournal) ResourceVersions(objs []Onboarded) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = j.ResourceVersion(o)
	}
	return out
}

// ClusterGeneration is the Cluster's metadata.generation: it moves with
// every change of its spec (its resourceVersion also moves with status).
func (j *CnpgJournal) ClusterGeneration() int64 {
	t := j.Ne.T
	t.Helper()
	u, err := j.Ne.DynamicClient().Resource(ClusterGVR).Namespace(JournalNamespace).Get(t.Context(), JournalCluster, metav1.GetOptions{})
	require.NoError(t, err)
	return u.GetGeneration()
}

// Password reads the Jobs' login password of ns: for the canary check
// only (no output may hold it).
func (j *CnpgJournal) Password(ns string) []byte {
	t := j.Ne.T
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := j.Ne.Kube.Client().CoreV1().Secrets(ns).Get(ctx, "keyledger-journal-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, s.Data["password"])
	return s.Data["password"]
}

// CanaryPod runs a TCP listener in a namespace of its own (no policy
// selects it) and returns its IP:port: reachable from any pod that no
// egress policy fences, and from nothing that is fenced.
func (ne *NodeEnv) CanaryPod() string {
	ne.T.Helper()
	ns := ne.Kube.Namespace(ne.T)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "canary"}, Spec: corev1.PodSpec{
		AutomountServiceAccountToken: Ptr(false),
		Containers: []corev1.Container{{Name: "listen", Image: platform.NodeToolImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{"listen", ":8080"}}},
	}}
	_, err := ne.Kube.Client().CoreV1().Pods(ns).Create(ne.T.Context(), pod, metav1.CreateOptions{})
	require.NoError(ne.T, err)
	other := *ne
	other.Env = &Env{T: ne.T, Kube: ne.Kube, NS: ns}
	return net.JoinHostPort(other.WaitPodRunning("canary", 60*time.Second), "8080")
}

// WaitPodRunning waits until the pod runs and has an IP.
func (ne *NodeEnv) WaitPodRunning(name string, limit time.Duration) string {
	ne.T.Helper()
	ctx, cancel := context.WithTimeout(ne.T.Context(), limit)
	defer cancel()
	for {
		p, err := ne.Kube.Client().CoreV1().Pods(ne.NS).Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			return p.Status.PodIP
		}
		select {
		case <-ctx.Done():
			ne.T.Fatalf("pod %s/%s not running within %s; node logs in %s", ne.NS, name, limit, ne.Node.StateDir())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// APIEndpoint is the address behind the kubernetes Service (what an
// operator fills into the api-egress component).
func (ne *NodeEnv) APIEndpoint() (string, int) {
	ne.T.Helper()
	u, err := url.Parse(ne.Kube.Host())
	require.NoError(ne.T, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(ne.T, err)
	require.Equal(ne.T, platform.NodeAddress, u.Hostname())
	return u.Hostname(), port
}

// RetirementOverlay renders the private overlay deploy/README.md tells an
// operator to write, on the cloudnativepg overlay, with the node test image.
func (ne *NodeEnv) RetirementOverlay(suffix, secretName, canary string, command map[string]any, apiEgress bool, edits ...func(*PrivateOverlay)) []*unstructured.Unstructured {
	ne.T.Helper()
	cmd, err := json.Marshal(command)
	require.NoError(ne.T, err)
	o := PrivateOverlay{Namespace: ne.NS, NameSuffix: suffix, SecretName: secretName, Canary: canary, Command: cmd,
		ImageName: ImageName(nodeShared.image), ImageTag: ImageTag(nodeShared.image)}
	if apiEgress {
		o.APIServerIP, o.APIServerPort = ne.APIEndpoint()
	}
	for _, edit := range edits {
		edit(&o)
	}
	objs := RenderPrivate(ne.T, o)
	require.Empty(ne.T, Audit(objs), "the overlay passes the deployment audit")
	ne.CleanupClusterScoped(objs)
	return objs
}

// CleanupClusterScoped deletes the cluster-scoped objects of objs when the
// test ends (the namespace's deletion removes the rest).
func (ne *NodeEnv) CleanupClusterScoped(objs []*unstructured.Unstructured) {
	a := ne.Applier()
	for _, obj := range objs {
		if obj.GetKind() != "ClusterRole" && obj.GetKind() != "ClusterRoleBinding" {
			continue
		}
		ri, err := a.Resource(obj.DeepCopy(), ne.NS)
		require.NoError(ne.T, err)
		name := obj.GetName()
		ne.T.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := ri.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				ne.T.Errorf("deleting %s: %v", name, err)
			}
		})
	}
}

// HookJobEnd is a failed hook Job of owner as the API server holds it
// after the sync: the Job (its Failed condition) and every pod it made.
func (ne *NodeEnv) HookJobEnd(owner string) (batchv1.Job, batchv1.JobCondition, []corev1.Pod) {
	ne.T.Helper()
	t, c := ne.T, ne.Kube.Client()
	sel := metav1.ListOptions{LabelSelector: "keyledger.dev/owner=" + owner}
	jobs, err := c.BatchV1().Jobs(ne.NS).List(t.Context(), sel)
	require.NoError(t, err)
	require.Len(t, jobs.Items, 1, "one hook Job of %s", owner)
	job := jobs.Items[0]
	var failed batchv1.JobCondition
	for _, cond := range job.Status.Conditions {
		if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
			failed = cond
		}
	}
	require.Equal(t, batchv1.JobFailed, failed.Type, "the Job failed: %v", job.Status.Conditions)
	pods, err := c.CoreV1().Pods(ne.NS).List(t.Context(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
	require.NoError(t, err)
	return job, failed, pods.Items
}

// VersionedOverlay renders the private overlay deploy/README.md tells an
// operator to write for one versioned write (writeVersionedOverlay), with
// the node's API server endpoint and the node test image.
func (ne *NodeEnv) VersionedOverlay(suffix, live, canary string, command map[string]any, edits ...func(*VersionedOverlay)) []*unstructured.Unstructured {
	t := ne.T
	t.Helper()
	cmd, err := json.Marshal(command)
	require.NoError(t, err)
	fsys := DeployFS(t)
	apiIP, apiPort := ne.APIEndpoint()
	o := VersionedOverlay{Namespace: ne.NS, NameSuffix: suffix, LiveSecret: live, Canary: canary, Command: cmd,
		APIServerIP: apiIP, APIServerPort: apiPort, ImageName: ImageName(nodeShared.image), ImageTag: ImageTag(nodeShared.image)}
	for _, edit := range edits {
		edit(&o)
	}
	dir := WriteVersionedOverlay(t, fsys, o)
	objs := Render(t, fsys, dir)
	require.Empty(t, Audit(objs), "the overlay passes the deployment audit")
	ne.CleanupClusterScoped(objs)
	return objs
}

// VersionedOverlay is what an operator fills in for one versioned write.
type VersionedOverlay struct {
	Namespace, NameSuffix, LiveSecret, Canary string
	Command                                   []byte
	APIServerIP                               string
	APIServerPort                             int
	ImageName, ImageTag                       string
	// Pooled adds components/cloudnativepg-pooler.
	Pooled bool
}

// WriteVersionedOverlay lays out, at /my-write in fsys, the private overlay
// deploy/README.md tells an operator to write for one versioned write:
// overlays/cloudnativepg-versioned, the filled api-egress component, the
// command as an immutable Secret, the live Secret's name in the Role and the
// canary in the gate. It returns the overlay's path.
func WriteVersionedOverlay(t *testing.T, fsys filesys.FileSystem, o VersionedOverlay) string {
	t.Helper()
	FillAPIEgress(t, fsys, "/my-write", o.APIServerIP, o.APIServerPort)
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

// NodeImage is the keyledger image loaded into the node (by SetupNode).
func NodeImage() string { return nodeShared.image }

// NodeBinary is the release build inside NodeImage (by SetupNode).
func NodeBinary() string { return nodeShared.binary }

// NodeJournalOwnerURL connects from this machine to the node's journal as
// its owner (after StartJournal).
func NodeJournalOwnerURL() string { return nodeJournal.ownerURL }
