package integration

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
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
	j := suite.DeployCloudNativePGJournal(ne)
	ne.Binary = j.Binary
	t.Run("synchronous-replication", func(t *testing.T) {
		// What the primary enforces, as PostgreSQL holds it: a commit
		// returns once one of the two standbys has flushed it.
		ctx := t.Context()
		conn, err := pgx.Connect(ctx, j.Owner)
		require.True(t, err == nil, "connecting to the journal's primary failed") // the error names the user and address
		defer conn.Close(context.Background())
		var names, commit string
		require.NoError(t, conn.QueryRow(ctx, "SHOW synchronous_standby_names").Scan(&names))
		require.NoError(t, conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&commit))
		t.Logf("synchronous_standby_names = %s, synchronous_commit = %s", names, commit)
		require.True(t, strings.HasPrefix(names, "ANY 1 ("), "quorum of one standby: %q", names)
		st, err := j.Status(ctx)
		require.NoError(t, err)
		for _, pod := range []string{suite.JournalCluster + "-1", suite.JournalCluster + "-2", suite.JournalCluster + "-3"} {
			if pod != st.CurrentPrimary {
				require.Contains(t, names, `"`+pod+`"`, "every standby is a candidate")
			}
		}
		require.Equal(t, "on", commit, "the commit waits for the standby's flush")
	})

	t.Run("retirement-job-through-rw-service", func(t *testing.T) {
		// deploy/'s retirement Job against this Cluster: its -rw Service by
		// name, verify-full against the Cluster's CA (the ConfigMap above).
		ne.RetirementJobTwice("run", "job-keyring", "mut-cnpg-job", suite.JournalService+"."+suite.JournalNamespace+".svc")
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
		pods := j.WaitPooler(4 * time.Minute)
		j.EndRoleSessions()
		ne.RetirementJobTwice("pooled", "pooled-keyring", "mut-cnpg-pooled", suite.JournalPoolerHost, func(o *suite.PrivateOverlay) { o.Pooled = true })
		j.RequireRunsThroughPooler(pods)
	})

	t.Run("credentials-hook-through-the-pooler", func(t *testing.T) {
		// The credentials hook as Argo CD runs it, rendered with
		// --journal-pooler and fenced by deploy/credentials with
		// components/cloudnativepg-pooler: the first sync creates the
		// planned Secrets, the second writes nothing, each a run of the
		// plan journaled through the pooler.
		pods := j.WaitPooler(4 * time.Minute)
		j.EndRoleSessions()
		apiIP, apiPort := ne.APIEndpoint()
		ne.ApplyAll(suite.RenderCredentialsFence(t, ne.NS, apiIP, apiPort, "../deploy/components/cloudnativepg-pooler"))
		const mutation = "mut-cnpg-pooled-hook"
		plan := suite.CredentialPlan(ne.NS, mutation, []suite.PlanSecret{suite.StandardSecret("pooled-cache-app"), suite.StandardSecret("pooled-bus-users")})
		dir := ne.RenderHook(plan, "--journal-pooler", suite.JournalPooler)
		ne.ApplyHook(dir)
		created := map[string]string{}
		for _, n := range []string{"pooled-cache-app", "pooled-bus-users"} {
			s := ne.GetSecret(n)
			suite.RequireAlphabet(t, s.Data["password"], 32, alphanumeric)
			created[n] = s.ResourceVersion
		}
		ne.ApplyHook(dir)
		for n, rv := range created {
			require.Equal(t, rv, ne.GetSecret(n).ResourceVersion, "the second sync writes nothing to %s", n)
		}
		for _, run := range []string{":run-1", ":run-2"} {
			op, _ := ne.JournalOf(mutation + run)
			require.Equal(t, store.StateCompleted, op.State, "%s%s", mutation, run)
		}
		j.RequireRunsThroughPooler(pods)
	})

	t.Run("versioned-job-through-the-pooler", func(t *testing.T) {
		// deploy/'s versioned-write Job through the pooled overlay: an
		// update, completed, its values in no log, every session of the
		// role on the primary a pooler pod's.
		pods := j.WaitPooler(4 * time.Minute)
		j.EndRoleSessions()
		canary := ne.CanaryPod()
		oldValue, newValue := "cnpg-canary-old-"+suite.RandomHex(t, 16), "cnpg-canary-new-"+suite.RandomHex(t, 16)
		live := ne.CreateSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pooled-db"}, Data: map[string][]byte{"password": []byte(oldValue)}})
		objs := ne.VersionedOverlay("pooled", live.Name, canary, map[string]any{
			"apiVersion": "keyledger.dev/v1", "kind": "SecretUpdate",
			"metadata": map[string]any{"requestId": "req-cnpg-pooled-update", "mutationId": "mut-cnpg-pooled-update"},
			"spec": map[string]any{"namespace": ne.NS, "name": live.Name, "expectedResourceVersion": live.ResourceVersion,
				"data": map[string]any{"password": base64.StdEncoding.EncodeToString([]byte(newValue))}},
		}, func(o *suite.VersionedOverlay) { o.Pooled = true })
		require.Equal(t, suite.JournalPoolerHost, suite.EnvValue(t, suite.Find(t, objs, "Job", "keyledger-versioned"), "PGHOST"))
		ne.ApplyAll(objs)
		end := ne.WaitJob("keyledger-versioned-pooled", 3*time.Minute)
		require.True(t, end.Complete, "Job failed: %s", ne.Describe(end.Pod))
		log := ne.Logs(end.Pod, "keyledger") + ne.Logs(end.Pod, "preflight")
		for _, v := range []string{oldValue, newValue, base64.StdEncoding.EncodeToString([]byte(oldValue)), base64.StdEncoding.EncodeToString([]byte(newValue))} {
			require.NotContains(t, log, v, "no value in the Job's logs")
		}
		require.Equal(t, "completed", suite.OutcomeLine(t, ne.Logs(end.Pod, "keyledger"))["outcome"])
		require.Equal(t, newValue, string(ne.GetSecret(live.Name).Data["password"]))
		j.RequireRunsThroughPooler(pods)
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
		before := suite.StandardKeyring()
		s := ne.CreateSecret(suite.KeyringSecret("failover-keyring", before))
		const retireMutation = "mut-cnpg-failover-retire"
		retirePath := ne.WriteCommand(retireMutation+".json", suite.RetireCommand(s, "k-2026-07", retireMutation))
		asRetirer := ne.AsRetirerOf(s)
		const a, b = "failover-a", "failover-b"
		const planMutation = "mut-cnpg-failover-credentials"
		plan := suite.CredentialPlan(ne.NS, planMutation, []suite.PlanSecret{suite.StandardSecret(a), suite.StandardSecret(b)})
		planPath := ne.WriteCommand(planMutation+".json", plan)
		asRunner := ne.AsCredentialRunner(plan)
		from := ne.SecretsRV() // the watch history from here on

		r := ne.Keyledger([]string{"run", retirePath}, asRetirer, suite.WithFailpoint("after-call"))
		require.Equal(t, 137, r.Code, "must die right after the call record commits: %s %s", r.Stdout, r.Stderr)
		require.Equal(t, s.ResourceVersion, ne.GetSecret(s.Name).ResourceVersion, "the call was journaled, not sent")
		_, records := ne.JournalOf(retireMutation)
		require.Equal(t, store.RecordAuthorityCall, records[len(records)-1].Kind, "the last committed record is the call: %v", suite.Kinds(records))

		// The plan's two creates go out as one batch, concurrently: the
		// second to reach the transport is never sent (a reset), and the
		// process dies right after the batch, before any answer is
		// journaled. One Secret exists, the other does not.
		r = ne.Keyledger([]string{"run", planPath}, asRunner, suite.WithFailpoint("after-send"), suite.WithEnv("KEYLEDGER_FAULT=reset:POST:/secrets#2"))
		require.Equal(t, 137, r.Code, "must die after the batch of creates: %s %s", r.Stdout, r.Stderr)
		exist := 0
		for _, n := range []string{a, b} {
			_, err := ne.Kube.Client().CoreV1().Secrets(ne.NS).Get(ctx, n, metav1.GetOptions{})
			if err == nil {
				exist++
			} else {
				require.True(t, apierrors.IsNotFound(err), "%s: %v", n, err)
			}
		}
		require.Equal(t, 1, exist, "stopped between the two creates: one Secret exists")

		rows := j.JournalRows()
		lost, after := j.LoseThePrimary()
		requireRowsKept(t, rows, j.JournalRows())
		t.Logf("all %d journal rows committed before the loss of %s (timeline %d) are on %s (timeline %d), byte for byte",
			len(rows), lost.CurrentPrimary, lost.TimelineID, after.CurrentPrimary, after.TimelineID)

		r = ne.Keyledger([]string{"run", retirePath}, asRetirer)
		require.Equal(t, 0, r.Code, "the retirement rerun converges: %s %s", r.Stdout, r.Stderr)
		retired := ne.GetSecret(s.Name)
		suite.RequireRetired(t, retired, "k-2026-07", retireMutation, before)
		op, records := ne.JournalOf(retireMutation)
		require.Equal(t, store.StateCompleted, op.State)
		require.Equal(t, 1, suite.Count(records, store.RecordCompletion))

		r = ne.Keyledger([]string{"run", planPath}, asRunner)
		require.Equal(t, 0, r.Code, "the plan rerun converges: %s %s", r.Stdout, r.Stderr)
		op, records = ne.JournalOf(planMutation + ":run-1")
		require.Equal(t, store.StateCompleted, op.State)
		require.Equal(t, 1, suite.Count(records, store.RecordCompletion))

		require.Len(t, suite.ResourceVersions(ne.SecretHistory(s.Name, from)), 1, "one write to the keyring Secret in the whole watch history")
		for _, n := range []string{a, b} {
			require.Len(t, ne.GetSecret(n).Data["password"], 32)
			require.Len(t, suite.ResourceVersions(ne.SecretHistory(n, from)), 1, "%s written once in the whole watch history", n)
		}
		suite.RequireNoValues(t, r.Stdout+r.Stderr+ne.JournalText(planMutation+":run-1"), ne.SecretValues(a, b))
	})

	t.Run("pooler-after-failover", func(t *testing.T) {
		// The pooler's server sessions were on the lost primary. The
		// next pooled Job reaches the promoted one (the Pooler dials the
		// -rw Service, which follows the primary): completed, then
		// existing, and every session of the role on the primary now is
		// a pooler pod's.
		pods := j.WaitPooler(4 * time.Minute)
		ne.RetirementJobTwice("after", "after-failover-keyring", "mut-cnpg-pooled-after-failover", suite.JournalPoolerHost,
			func(o *suite.PrivateOverlay) { o.Pooled = true })
		j.RequireRunsThroughPooler(pods) // a promoted primary: no session from before
	})
}
