package suite

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/keyledger/keyledger/integration/platform"
)

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
// journal (JoinJournal) with a role of its own.
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

// JournalHostURL is a URL from this machine to the journal pod as user: TLS
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
		// Stays the error if DeployJournal's test fails inside it.
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
	superPW, ownerPW := RandomHex(ne.T, 16), RandomHex(ne.T, 16)
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
	role, pw := JournalRole(ne.NS), RandomHex(t, 16)
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

// NodeJournalOwnerURL connects from this machine to the node's journal as
// its owner (after StartJournal).
func NodeJournalOwnerURL() string { return nodeJournal.ownerURL }
