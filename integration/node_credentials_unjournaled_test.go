package integration

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
)

// journalServiceName is the journal's -rw Service, the host every hook
// reaches the journal by.
const journalServiceName = suite.JournalCluster + "-rw"

// journalServiceDown deletes the node journal's -rw Service (the journal
// pod keeps running: an outage of the name, as a Service deleted or
// renamed by mistake is) and waits until cluster DNS no longer answers its
// name. The Service comes back, with its ClusterIP, when the test ends.
func journalServiceDown(ne *nodeEnv) {
	ne.T.Helper()
	t, c := ne.T, ne.Kube.Client()
	svc, err := c.CoreV1().Services(suite.JournalNamespace).Get(t.Context(), journalServiceName, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, c.CoreV1().Services(suite.JournalNamespace).Delete(t.Context(), journalServiceName, metav1.DeleteOptions{}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		back := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Labels: svc.Labels},
			Spec: corev1.ServiceSpec{Selector: svc.Spec.Selector, Ports: svc.Spec.Ports, ClusterIP: svc.Spec.ClusterIP}}
		_, err := c.CoreV1().Services(suite.JournalNamespace).Create(ctx, back, metav1.CreateOptions{})
		if err == nil {
			err = waitClusterDNS(ctx, true)
		}
		if err != nil {
			t.Errorf("restoring the journal's Service: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, waitClusterDNS(ctx, false), "cluster DNS still answers the deleted Service's name")
}

// waitClusterDNS waits until cluster DNS, asked from the node through its
// ClusterIP, answers the journal Service's name (answers true) or answers
// that it does not exist (answers false).
func waitClusterDNS(ctx context.Context, answers bool) error {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(platform.DNSServiceIP, "53"))
	}}
	name := journalServiceName + "." + suite.JournalNamespace + ".svc.cluster.local"
	return wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		addrs, err := r.LookupHost(qctx, name)
		var dnsErr *net.DNSError
		if answers {
			return err == nil && len(addrs) > 0, nil
		}
		return errors.As(err, &dnsErr) && dnsErr.IsNotFound, nil
	})
}

// The journal outage on the real node (issue 36): the credentials hook as
// Argo CD runs it (render, apply-hook; the Job in a pod on the kubelet,
// fenced by deploy/credentials) converges a plan with its journal. Then
// the journal's Service is deleted, so the hook pod's lookup of the
// journal's name fails in cluster DNS. A second sync with nothing to write
// succeeds: the pod exits 0, its termination message says the journal was
// not consulted and its log that authorship was not checked too, and the API
// server's history shows no write to a Secret. With a planned Secret
// deleted, the create needs the journal: every pod of the Job exits 69
// (journal-dns), the Job fails after its podFailurePolicy's retries, and
// the API server's history shows no write; the Secret stays absent.
func TestIntegrationNodeCredentialsSyncWithoutJournal(t *testing.T) {
	ne := setupNode(t)
	ne.JoinJournal()
	apiIP, apiPort := ne.APIEndpoint()
	ne.ApplyAll(suite.RenderCredentialsFence(t, ne.NS, apiIP, apiPort))
	plan := suite.CredentialPlan(ne.NS, "mut-node-outage", []suite.PlanSecret{suite.StandardSecret("outage-a"), suite.StandardSecret("outage-b")})
	owner := suite.SpecOf(t, plan).Owner
	dir := ne.RenderHook(plan)
	ne.ApplyHook(dir)
	values := ne.SecretValues("outage-a", "outage-b")

	journalServiceDown(ne)
	from := ne.SecretsRV()
	ne.ApplyHook(dir)
	pod := onlyHookPod(ne, owner)
	msg, code := terminationMessage(t, pod)
	require.EqualValues(t, 0, code)
	require.Equal(t, "existing", msg["outcome"], "%v", msg)
	require.Equal(t, "not-consulted", msg["journal"], "%v", msg)
	log := ne.Logs(&pod, "keyledger")
	line := suite.OutcomeLine(t, log)
	require.Equal(t, "not-consulted", line["journal"], log)
	require.Equal(t, "not-checked", line["authorship"], log)
	require.Contains(t, log, "authorship not checked")
	require.Empty(t, ne.SecretWritesSince(from), "nothing written")
	suite.RequireNoValues(t, log+pod.Status.ContainerStatuses[0].State.Terminated.Message, values)

	// A planned Secret absent: its create needs the journal.
	require.NoError(t, ne.Kube.Client().CoreV1().Secrets(ne.NS).Delete(t.Context(), "outage-b", metav1.DeleteOptions{}))
	from = ne.SecretsRV()
	codes, logs := ne.SyncExpectingFailure(dir, owner)
	require.Equal(t, []int32{69, 69, 69}, codes, "the pod and its two retries exit 69: %s", logs)
	_, _, pods := ne.HookJobEnd(owner)
	for _, p := range pods {
		m, _ := terminationMessage(t, p)
		require.Equal(t, "journal-dns", m["reason"], "%v", m)
		require.NotEqual(t, "not-consulted", m["journal"], "%v", m)
	}
	require.Empty(t, ne.SecretWritesSince(from), "nothing written without the journal")
	_, err := ne.Kube.Client().CoreV1().Secrets(ne.NS).Get(t.Context(), "outage-b", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "still absent: %v", err)
	suite.RequireNoValues(t, logs, values)
}

// onlyHookPod is the one pod of owner's hook Job after a sync that
// succeeded at the first try.
func onlyHookPod(ne *nodeEnv, owner string) corev1.Pod {
	ne.T.Helper()
	pods, err := ne.Kube.Client().CoreV1().Pods(ne.NS).List(ne.T.Context(), metav1.ListOptions{LabelSelector: "keyledger.dev/owner=" + owner})
	require.NoError(ne.T, err)
	require.Len(ne.T, pods.Items, 1, "one hook pod: %s", ne.HookPodLogs())
	return pods.Items[0]
}
