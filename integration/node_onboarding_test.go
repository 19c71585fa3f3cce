package integration

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

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
func nodeOnboarding(t *testing.T, j *suite.CNPGJournal) {
	ne := setupNode(t) // a fresh namespace, unknown to the journal
	ne.Binary = j.Binary
	ne.Journal = &platform.Journal{Name: "keyledger", OwnerURL: j.Owner}
	o := &onboarding{j: j, ne: ne, ns: ne.NS, role: "keyledger_" + strings.ReplaceAll(ne.NS, "-", "_")}
	o.objs = []suite.Onboarded{{Kind: "Secret", NS: suite.JournalNamespace, Name: "keyledger-role-" + o.ns}, {Kind: "Secret", NS: o.ns, Name: "keyledger-journal-credentials"},
		{Kind: "ConfigMap", NS: o.ns, Name: "keyledger-journal-ca"}, {Kind: "NetworkPolicy", NS: o.ns, Name: "keyledger-credentials"}}
	require.False(t, j.RoleExists(o.role), "the journal does not know %s yet", o.ns)
	o.onboardTwice()

	host := suite.JournalService + "." + suite.JournalNamespace + ".svc"
	ne.RetirementJobTwice("onboarded", "onboarded-keyring", "mut-onboarded-retire", host)
	onboardedHook(ne)
	passwords := [][]byte{j.Password(o.ns)}

	rv := j.ResourceVersion(o.objs[1])
	r := o.admin("rotate", o.ns)
	require.Equal(t, 0, r.Code, "rotate: %s %s", r.Stdout, r.Stderr)
	o.requireLines(r.Stdout, "updated Secret "+suite.JournalNamespace+"/keyledger-role-"+o.ns, "updated Secret "+o.ns+"/keyledger-journal-credentials")
	require.NotEqual(t, rv, j.ResourceVersion(o.objs[1]), "rotate wrote the Jobs' login")
	ne.RetirementJobTwice("rotated", "rotated-keyring", "mut-onboarded-rotated", host)
	passwords = append(passwords, j.Password(o.ns))
	require.False(t, bytes.Equal(passwords[0], passwords[1]), "rotate changed the password")

	o.offboardTwice()
	offboardedJob(ne, host)
	suite.RequireNoValues(t, o.outputs.String(), passwords)
}

// onboarding is one namespace's way through onboard, rotate and offboard.
type onboarding struct {
	j        *suite.CNPGJournal
	ne       *nodeEnv
	ns, role string
	objs     []suite.Onboarded
	outputs  strings.Builder // every output of the admin commands, for the canary
}

// admin runs `keyledger journal ARGS` as the platform administrator with
// the schema owner's URL.
func (o *onboarding) admin(args ...string) suite.Result {
	r := o.ne.Keyledger(append([]string{"journal"}, args...), suite.WithDatabase(o.j.Owner))
	o.outputs.WriteString(r.Stdout + r.Stderr)
	return r
}

func (o *onboarding) requireLines(stdout string, lines ...string) {
	o.ne.T.Helper()
	for _, line := range lines {
		require.Contains(o.ne.T, stdout, line+"\n")
	}
}

// onboardTwice: a dry run writes nothing, onboard creates every object, a
// second onboard changes nothing and says so.
func (o *onboarding) onboardTwice() {
	t, j, ns := o.ne.T, o.j, o.ns
	r := o.admin("onboard", ns, "--dry-run")
	require.Equal(t, 0, r.Code, "dry run: %s %s", r.Stdout, r.Stderr)
	o.requireLines(r.Stdout, "would create Secret "+suite.JournalNamespace+"/keyledger-role-"+ns,
		"would create ManagedRole "+suite.JournalNamespace+"/"+o.role, "namespace "+ns+": dry run, nothing written")
	for _, obj := range o.objs {
		require.Empty(t, j.ResourceVersion(obj), "the dry run wrote %s %s/%s", obj.Kind, obj.NS, obj.Name)
	}

	r = o.admin("onboard", ns)
	require.Equal(t, 0, r.Code, "onboard: %s %s", r.Stdout, r.Stderr)
	o.requireLines(r.Stdout, "created Secret "+suite.JournalNamespace+"/keyledger-role-"+ns, "created ManagedRole "+suite.JournalNamespace+"/"+o.role,
		"created JournalGrant "+ns+"/"+o.role, "created ConfigMap "+ns+"/keyledger-journal-ca",
		"created NetworkPolicy "+ns+"/keyledger-credentials", "created Secret "+ns+"/keyledger-journal-credentials",
		"namespace "+ns+": changed")
	require.True(t, j.RoleExists(o.role))
	rvs, generation := j.ResourceVersions(o.objs), j.ClusterGeneration()

	r = o.admin("onboard", ns)
	require.Equal(t, 0, r.Code, "second onboard: %s %s", r.Stdout, r.Stderr)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	require.Len(t, lines, 7, "one line per object and the summary: %s", r.Stdout)
	for _, line := range lines[:6] {
		require.True(t, strings.HasPrefix(line, "unchanged "), "second onboard: %q", line)
	}
	require.Equal(t, "namespace "+ns+": nothing changed", lines[6])
	require.Equal(t, rvs, j.ResourceVersions(o.objs), "the second onboard wrote nothing")
	require.Equal(t, generation, j.ClusterGeneration(), "the second onboard left the Cluster's spec alone")
}

// offboardTwice: a dry run deletes nothing, offboard removes every object
// and the role, a second offboard finds everything absent.
func (o *onboarding) offboardTwice() {
	t, j, ns := o.ne.T, o.j, o.ns
	r := o.admin("offboard", ns, "--dry-run")
	require.Equal(t, 0, r.Code, "offboard dry run: %s %s", r.Stdout, r.Stderr)
	o.requireLines(r.Stdout, "would delete JournalGrant "+ns+"/"+o.role)
	require.NotEmpty(t, j.ResourceVersion(o.objs[1]), "the dry run deleted nothing")

	r = o.admin("offboard", ns)
	require.Equal(t, 0, r.Code, "offboard: %s %s", r.Stdout, r.Stderr)
	o.requireLines(r.Stdout, "deleted JournalGrant "+ns+"/"+o.role, "deleted ManagedRole "+suite.JournalNamespace+"/"+o.role,
		"deleted Secret "+ns+"/keyledger-journal-credentials", "deleted Secret "+suite.JournalNamespace+"/keyledger-role-"+ns,
		"deleted ConfigMap "+ns+"/keyledger-journal-ca", "deleted NetworkPolicy "+ns+"/keyledger-credentials")
	require.False(t, j.RoleExists(o.role), "CloudNativePG dropped the role")
	for _, obj := range o.objs {
		require.Empty(t, j.ResourceVersion(obj), "offboard left %s %s/%s", obj.Kind, obj.NS, obj.Name)
	}
	r = o.admin("offboard", ns)
	require.Equal(t, 0, r.Code, "second offboard: %s %s", r.Stdout, r.Stderr)
	o.requireLines(r.Stdout, "namespace "+ns+": nothing changed")
}

// onboardedHook: the credentials hook, rendered with the defaults, fenced
// by the policy onboard wrote: the first sync creates both Secrets, the
// second writes nothing, each a completed run of the plan.
func onboardedHook(ne *nodeEnv) {
	t := ne.T
	t.Helper()
	const mutation = "mut-onboarded-hook"
	plan := suite.CredentialPlan(ne.NS, mutation, []suite.PlanSecret{suite.StandardSecret("onboarded-cache-app"), suite.StandardSecret("onboarded-bus-users")})
	dir := ne.RenderHook(plan)
	ne.ApplyHook(dir)
	created := map[string]string{}
	for _, n := range []string{"onboarded-cache-app", "onboarded-bus-users"} {
		created[n] = ne.GetSecret(n).ResourceVersion
	}
	ne.ApplyHook(dir)
	for n, rv := range created {
		require.Equal(t, rv, ne.GetSecret(n).ResourceVersion, "the second sync writes nothing to %s", n)
	}
	for _, run := range []string{":run-1", ":run-2"} {
		op, _ := ne.JournalOf(mutation + run)
		require.Equal(t, store.StateCompleted, op.State, "%s%s", mutation, run)
	}
}

// offboardedJob: a retirement Job of an offboarded namespace (its deadline
// cut to 30 s, the rest as deploy/ ships it) never starts its main
// container (its CA ConfigMap and login Secret are gone), fails with
// DeadlineExceeded, and neither the keyring Secret nor the journal is
// written.
func offboardedJob(ne *nodeEnv, host string) {
	t := ne.T
	t.Helper()
	s := ne.CreateSecret(suite.KeyringSecret("offboarded-keyring", suite.StandardKeyring()))
	const mutation = "mut-offboarded"
	objs := ne.RetirementOverlay("offboarded", s.Name, ne.CanaryPod(), suite.RetireCommand(s, "k-2026-07", mutation), true)
	job := suite.Find(t, objs, "Job", "keyledger-retire")
	require.Equal(t, host, suite.EnvValue(t, job, "PGHOST"))
	require.NoError(t, unstructured.SetNestedField(job.Object, int64(30), "spec", "activeDeadlineSeconds"))
	ne.ApplyAll(objs)
	name := "keyledger-retire-offboarded"
	c := ne.Kube.Client()
	var reason string
	var started, seen bool
	require.Eventually(t, func() bool {
		pods, err := c.CoreV1().Pods(ne.NS).List(t.Context(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
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
		j, err := c.BatchV1().Jobs(ne.NS).Get(t.Context(), name, metav1.GetOptions{})
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
	require.Equal(t, s.ResourceVersion, ne.GetSecret(s.Name).ResourceVersion, "the keyring Secret is not written")
	st, err := store.Open(t.Context(), ne.Journal.OwnerURL)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Load(t.Context(), "", mutation)
	require.True(t, errors.Is(err, store.ErrNotFound), "nothing journaled for %s: %v", mutation, err)
}
