package integration

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/store"
)

// onboarded is what `keyledger journal onboard` makes, by kind and
// namespace/name, for reading resourceVersions.
type onboarded struct {
	kind, ns, name string
}

// nodeOnboarding: a namespace the journal does not know goes, with
// `keyledger journal onboard NS` run as deploy/README.md says (a platform
// administrator's kubeconfig, the schema owner's URL), to a completed
// retirement Job and a two-sync credentials hook through the real
// CloudNativePG Cluster. The test never writes the role's password and
// reads it only for the canary check of every output. A second onboarding
// changes nothing (it says so; no object's resourceVersion moves, nor the
// Cluster's generation). After `rotate` a new Job completes; after
// `offboard` the role is gone, and a Job of the namespace never starts its
// main container, fails at its deadline (DeadlineExceeded) and writes
// nothing.
func nodeOnboarding(t *testing.T, j *cnpgJournal) {
	ne := setupNode(t) // a fresh namespace, unknown to the journal
	ne.binary = j.binary
	ne.journal = &platform.Journal{Name: "keyledger", OwnerURL: j.owner}
	o := &onboarding{j: j, ne: ne, ns: ne.ns, role: "keyledger_" + strings.ReplaceAll(ne.ns, "-", "_")}
	o.objs = []onboarded{{"Secret", journalNamespace, "keyledger-role-" + o.ns}, {"Secret", o.ns, "keyledger-journal-credentials"},
		{"ConfigMap", o.ns, "keyledger-journal-ca"}, {"NetworkPolicy", o.ns, "keyledger-credentials"}}
	require.False(t, j.roleExists(o.role), "the journal does not know %s yet", o.ns)
	o.onboardTwice()

	host := journalService + "." + journalNamespace + ".svc"
	ne.retirementJobTwice("onboarded", "onboarded-keyring", "mut-onboarded-retire", host)
	onboardedHook(ne)
	passwords := [][]byte{j.password(o.ns)}

	rv := j.resourceVersion(o.objs[1])
	r := o.admin("rotate", o.ns)
	require.Equal(t, 0, r.Code, "rotate: %s %s", r.Stdout, r.Stderr)
	o.requireLines(r.Stdout, "updated Secret "+journalNamespace+"/keyledger-role-"+o.ns, "updated Secret "+o.ns+"/keyledger-journal-credentials")
	require.NotEqual(t, rv, j.resourceVersion(o.objs[1]), "rotate wrote the Jobs' login")
	ne.retirementJobTwice("rotated", "rotated-keyring", "mut-onboarded-rotated", host)
	passwords = append(passwords, j.password(o.ns))
	require.False(t, bytes.Equal(passwords[0], passwords[1]), "rotate changed the password")

	o.offboardTwice()
	offboardedJob(ne, host)
	requireNoValues(t, o.outputs.String(), passwords)
}

// onboarding is one namespace's way through onboard, rotate and offboard.
type onboarding struct {
	j        *cnpgJournal
	ne       *nodeEnv
	ns, role string
	objs     []onboarded
	outputs  strings.Builder // every output of the admin commands, for the canary
}

// admin runs `keyledger journal ARGS` as the platform administrator with
// the schema owner's URL.
func (o *onboarding) admin(args ...string) result {
	r := o.ne.keyledger(append([]string{"journal"}, args...), withDatabase(o.j.owner))
	o.outputs.WriteString(r.Stdout + r.Stderr)
	return r
}

func (o *onboarding) requireLines(stdout string, lines ...string) {
	o.ne.t.Helper()
	for _, line := range lines {
		require.Contains(o.ne.t, stdout, line+"\n")
	}
}

// onboardTwice: a dry run writes nothing, onboard creates every object, a
// second onboard changes nothing and says so.
func (o *onboarding) onboardTwice() {
	t, j, ns := o.ne.t, o.j, o.ns
	r := o.admin("onboard", ns, "--dry-run")
	require.Equal(t, 0, r.Code, "dry run: %s %s", r.Stdout, r.Stderr)
	o.requireLines(r.Stdout, "would create Secret "+journalNamespace+"/keyledger-role-"+ns,
		"would create ManagedRole "+journalNamespace+"/"+o.role, "namespace "+ns+": dry run, nothing written")
	for _, obj := range o.objs {
		require.Empty(t, j.resourceVersion(obj), "the dry run wrote %s %s/%s", obj.kind, obj.ns, obj.name)
	}

	r = o.admin("onboard", ns)
	require.Equal(t, 0, r.Code, "onboard: %s %s", r.Stdout, r.Stderr)
	o.requireLines(r.Stdout, "created Secret "+journalNamespace+"/keyledger-role-"+ns, "created ManagedRole "+journalNamespace+"/"+o.role,
		"created JournalGrant "+ns+"/"+o.role, "created ConfigMap "+ns+"/keyledger-journal-ca",
		"created NetworkPolicy "+ns+"/keyledger-credentials", "created Secret "+ns+"/keyledger-journal-credentials",
		"namespace "+ns+": changed")
	require.True(t, j.roleExists(o.role))
	rvs, generation := j.resourceVersions(o.objs), j.clusterGeneration()

	r = o.admin("onboard", ns)
	require.Equal(t, 0, r.Code, "second onboard: %s %s", r.Stdout, r.Stderr)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	require.Len(t, lines, 7, "one line per object and the summary: %s", r.Stdout)
	for _, line := range lines[:6] {
		require.True(t, strings.HasPrefix(line, "unchanged "), "second onboard: %q", line)
	}
	require.Equal(t, "namespace "+ns+": nothing changed", lines[6])
	require.Equal(t, rvs, j.resourceVersions(o.objs), "the second onboard wrote nothing")
	require.Equal(t, generation, j.clusterGeneration(), "the second onboard left the Cluster's spec alone")
}

// offboardTwice: a dry run deletes nothing, offboard removes every object
// and the role, a second offboard finds everything absent.
func (o *onboarding) offboardTwice() {
	t, j, ns := o.ne.t, o.j, o.ns
	r := o.admin("offboard", ns, "--dry-run")
	require.Equal(t, 0, r.Code, "offboard dry run: %s %s", r.Stdout, r.Stderr)
	o.requireLines(r.Stdout, "would delete JournalGrant "+ns+"/"+o.role)
	require.NotEmpty(t, j.resourceVersion(o.objs[1]), "the dry run deleted nothing")

	r = o.admin("offboard", ns)
	require.Equal(t, 0, r.Code, "offboard: %s %s", r.Stdout, r.Stderr)
	o.requireLines(r.Stdout, "deleted JournalGrant "+ns+"/"+o.role, "deleted ManagedRole "+journalNamespace+"/"+o.role,
		"deleted Secret "+ns+"/keyledger-journal-credentials", "deleted Secret "+journalNamespace+"/keyledger-role-"+ns,
		"deleted ConfigMap "+ns+"/keyledger-journal-ca", "deleted NetworkPolicy "+ns+"/keyledger-credentials")
	require.False(t, j.roleExists(o.role), "CloudNativePG dropped the role")
	for _, obj := range o.objs {
		require.Empty(t, j.resourceVersion(obj), "offboard left %s %s/%s", obj.kind, obj.ns, obj.name)
	}
	r = o.admin("offboard", ns)
	require.Equal(t, 0, r.Code, "second offboard: %s %s", r.Stdout, r.Stderr)
	o.requireLines(r.Stdout, "namespace "+ns+": nothing changed")
}

// onboardedHook: the credentials hook, rendered with the defaults, fenced
// by the policy onboard wrote: the first sync creates both Secrets, the
// second writes nothing, each a completed run of the plan.
func onboardedHook(ne *nodeEnv) {
	t := ne.t
	t.Helper()
	const mutation = "mut-onboarded-hook"
	plan := credentialPlan(ne.ns, mutation, []planSecret{standardSecret("onboarded-cache-app"), standardSecret("onboarded-bus-users")})
	dir := ne.renderHook(plan)
	ne.applyHook(dir)
	created := map[string]string{}
	for _, n := range []string{"onboarded-cache-app", "onboarded-bus-users"} {
		created[n] = ne.getSecret(n).ResourceVersion
	}
	ne.applyHook(dir)
	for n, rv := range created {
		require.Equal(t, rv, ne.getSecret(n).ResourceVersion, "the second sync writes nothing to %s", n)
	}
	for _, run := range []string{":run-1", ":run-2"} {
		op, _ := ne.journalOf(mutation + run)
		require.Equal(t, store.StateCompleted, op.State, "%s%s", mutation, run)
	}
}

// offboardedJob: a retirement Job of an offboarded namespace (its deadline
// cut to 30 s, the rest as deploy/ ships it) never starts its main
// container (its CA ConfigMap and login Secret are gone), fails with
// DeadlineExceeded, and neither the keyring Secret nor the journal is
// written.
func offboardedJob(ne *nodeEnv, host string) {
	t := ne.t
	t.Helper()
	s := ne.createSecret(keyringSecret("offboarded-keyring", standardKeyring()))
	const mutation = "mut-offboarded"
	objs := ne.retirementOverlay("offboarded", s.Name, ne.canaryPod(), retireCommand(s, "k-2026-07", mutation), true)
	job := find(t, objs, "Job", "keyledger-retire")
	require.Equal(t, host, envValue(t, job, "PGHOST"))
	require.NoError(t, unstructured.SetNestedField(job.Object, int64(30), "spec", "activeDeadlineSeconds"))
	ne.applyAll(objs)
	name := "keyledger-retire-offboarded"
	c := ne.kube.Client()
	var reason string
	var started, seen bool
	require.Eventually(t, func() bool {
		pods, err := c.CoreV1().Pods(ne.ns).List(t.Context(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
		if err != nil {
			return false
		}
		for _, p := range pods.Items {
			seen = true
			for _, st := range p.Status.ContainerStatuses {
				if st.Name == "keyledger" && (st.State.Running != nil || st.State.Terminated != nil && st.State.Terminated.StartedAt.Unix() > 0) {
					started = true
				}
			}
		}
		j, err := c.BatchV1().Jobs(ne.ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range j.Status.Conditions {
			if cond.Type == "Failed" && cond.Status == corev1.ConditionTrue {
				reason = cond.Reason
			}
		}
		return reason != ""
	}, 3*time.Minute, 500*time.Millisecond, "the Job fails")
	require.True(t, seen, "the Job made a pod")
	require.False(t, started, "the main container never started")
	require.Equal(t, "DeadlineExceeded", reason)
	require.Equal(t, s.ResourceVersion, ne.getSecret(s.Name).ResourceVersion, "the keyring Secret is not written")
	st, err := store.Open(t.Context(), ne.journal.OwnerURL)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Load(t.Context(), "", mutation)
	require.True(t, errors.Is(err, store.ErrNotFound), "nothing journaled for %s: %v", mutation, err)
}

// roleExists asks the journal's server, as the schema owner.
func (j *cnpgJournal) roleExists(role string) bool {
	t := j.ne.t
	t.Helper()
	st, err := store.Open(t.Context(), j.owner)
	require.NoError(t, err)
	defer st.Close()
	exists, err := st.RoleExists(t.Context(), role)
	require.NoError(t, err)
	return exists
}

// resourceVersion is the object's, "" when it does not exist.
func (j *cnpgJournal) resourceVersion(o onboarded) string {
	t := j.ne.t
	t.Helper()
	c, ctx := j.ne.kube.Client(), t.Context()
	var meta metav1.Object
	var err error
	switch o.kind {
	case "Secret":
		meta, err = c.CoreV1().Secrets(o.ns).Get(ctx, o.name, metav1.GetOptions{})
	case "ConfigMap":
		meta, err = c.CoreV1().ConfigMaps(o.ns).Get(ctx, o.name, metav1.GetOptions{})
	case "NetworkPolicy":
		meta, err = c.NetworkingV1().NetworkPolicies(o.ns).Get(ctx, o.name, metav1.GetOptions{})
	default:
		t.Fatalf("no kind %s", o.kind)
	}
	if apierrors.IsNotFound(err) {
		return ""
	}
	require.NoError(t, err)
	return meta.GetResourceVersion()
}

func (j *cnpgJournal) resourceVersions(objs []onboarded) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = j.resourceVersion(o)
	}
	return out
}

// clusterGeneration is the Cluster's metadata.generation: it moves with
// every change of its spec (its resourceVersion also moves with status).
func (j *cnpgJournal) clusterGeneration() int64 {
	t := j.ne.t
	t.Helper()
	u, err := j.ne.dynamicClient().Resource(clusterGVR).Namespace(journalNamespace).Get(t.Context(), journalCluster, metav1.GetOptions{})
	require.NoError(t, err)
	return u.GetGeneration()
}

// password reads the Jobs' login password of ns: for the canary check
// only (no output may hold it).
func (j *cnpgJournal) password(ns string) []byte {
	t := j.ne.t
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := j.ne.kube.Client().CoreV1().Secrets(ns).Get(ctx, "keyledger-journal-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, s.Data["password"])
	return s.Data["password"]
}
