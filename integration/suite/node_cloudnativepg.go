package suite

import (
	"context"
	"fmt"
	"io"
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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/store"
)

// JournalService is the Service of the journal Cluster's primary (read-write).
const JournalService = JournalCluster + "-rw"

var (
	ClusterGVR = schema.GroupVersionResource{Group: "postgresql.cnpg.io", Version: "v1", Resource: "clusters"}
	PoolerGVR  = schema.GroupVersionResource{Group: "postgresql.cnpg.io", Version: "v1", Resource: "poolers"}
)

// CNPGJournal is the deployed journal as a test sees it.
type CNPGJournal struct {
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

func (j *CNPGJournal) Status(ctx context.Context) (ClusterStatus, error) {
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
func (j *CNPGJournal) WaitCluster(what string, limit time.Duration, cond func(ClusterStatus) bool) ClusterStatus {
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
func DeployCloudNativePGJournal(ne *NodeEnv) *CNPGJournal {
	t, ctx, c := ne.T, ne.T.Context(), ne.Kube.Client()
	t.Helper()
	cnpg, err := platform.InstallCloudNativePG(ctx, ne.Kube, ne.Node, 8)
	require.NoError(t, err)
	t.Logf("CloudNativePG operator %s, operand %s", cnpg.OperatorImage, cnpg.PostgresImage)

	jn := *ne
	jn.Env = &Env{T: t, Kube: ne.Kube, NS: JournalNamespace, Dir: t.TempDir()}
	j := &CNPGJournal{Ne: ne, Journal: &jn, Role: JournalRole(ne.NS),
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
	pw := RandomHex(t, 16)
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
	jn.ApplyAll(RenderGrant(t, ne.NS, TenancyImage{Name: ImageName(nodeShared.image), Tag: ImageTag(nodeShared.image)}))
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
func (j *CNPGJournal) WaitPooler(limit time.Duration) []string {
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
func (j *CNPGJournal) PoolerURL() string {
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
func (j *CNPGJournal) RoleClients() []string {
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
func (j *CNPGJournal) EndRoleSessions() {
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
// comes from a pooler pod (pods). After EndRoleSessions and a run, that is
// the run's path: a session the run's process opened straight to the
// primary would have ended with it and left none, where the pooler keeps
// its server session open for the next client.
func (j *CNPGJournal) RequireRunsThroughPooler(pods []string) {
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
func (j *CNPGJournal) JournalRows() map[string]string {
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
func (j *CNPGJournal) LoseThePrimary() (before, after ClusterStatus) {
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
func (j *CNPGJournal) ScrapePrimary(ctx context.Context) (string, error) {
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
func (j *CNPGJournal) PollMetrics(what string, limit time.Duration, cond func([]MetricSample) bool) string {
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
func (j *CNPGJournal) RequireNoSecrets(text string, identifiers ...string) {
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
func (j *CNPGJournal) RoleExists(role string) bool {
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
func (j *CNPGJournal) ResourceVersion(o Onboarded) string {
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

func (j *CNPGJournal) ResourceVersions(objs []Onboarded) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = j.ResourceVersion(o)
	}
	return out
}

// ClusterGeneration is the Cluster's metadata.generation: it moves with
// every change of its spec (its resourceVersion also moves with status).
func (j *CNPGJournal) ClusterGeneration() int64 {
	t := j.Ne.T
	t.Helper()
	u, err := j.Ne.DynamicClient().Resource(ClusterGVR).Namespace(JournalNamespace).Get(t.Context(), JournalCluster, metav1.GetOptions{})
	require.NoError(t, err)
	return u.GetGeneration()
}

// Password reads the Jobs' login password of ns: for the canary check
// only (no output may hold it).
func (j *CNPGJournal) Password(ns string) []byte {
	t := j.Ne.T
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := j.Ne.Kube.Client().CoreV1().Secrets(ns).Get(ctx, "keyledger-journal-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, s.Data["password"])
	return s.Data["password"]
}
