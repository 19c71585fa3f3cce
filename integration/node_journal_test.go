package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/store"
)

// The journal, deployed as deploy/README.md describes it with CloudNativePG:
// this test plays the operator. It runs PostgreSQL (the image the other
// tests use) as a pod labelled like a CloudNativePG primary, behind the
// keyledger-journal-rw Service, serving TLS with a certificate for that
// name; creates the Secrets CloudNativePG would (keyledger-journal-app with
// host, port, dbname and uri for the schema owner, keyledger-journal-ca) and
// the operator role declared in managed.roles with the password from
// keyledger-operator-credentials; then runs the migration Job of
// overlays/cloudnativepg/database in a pod. The Cluster object itself is not
// applied: no CloudNativePG operator runs here.
const journalCluster = "keyledger-journal"

// deployJournal brings the journal up in the test namespace and points the
// test's journal URLs (for `keyledger journal` from this machine) at the pod.
func (ne *nodeEnv) deployJournal() {
	ne.t.Helper()
	t, ctx, c := ne.t, ne.t.Context(), ne.kube.Client()
	ns := ne.ns
	rw := journalCluster + "-rw"
	ca, serverCert, serverKey := journalPKI(t, rw, rw+"."+ns, rw+"."+ns+".svc", rw+"."+ns+".svc.cluster.local")
	superPW, ownerPW, operatorPW := randomHexT(t), randomHexT(t), randomHexT(t)
	secrets := []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: journalCluster + "-ca"}, Data: map[string][]byte{"ca.crt": ca}},
		{ObjectMeta: metav1.ObjectMeta{Name: journalCluster + "-server"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": serverCert, "tls.key": serverKey}},
		{ObjectMeta: metav1.ObjectMeta{Name: journalCluster + "-superuser"}, Data: map[string][]byte{"password": []byte(superPW)}},
		{ObjectMeta: metav1.ObjectMeta{Name: journalCluster + "-app"}, Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{
			"username": []byte("keyledger"), "password": []byte(ownerPW), "host": []byte(rw), "port": []byte("5432"), "dbname": []byte("app"),
			"uri": []byte(fmt.Sprintf("postgresql://keyledger:%s@%s.%s:5432/app", ownerPW, rw, ns)),
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "keyledger-operator-credentials"}, Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{
			"username": []byte(store.DefaultOperatorRole), "password": []byte(operatorPW),
		}},
	}
	for _, s := range secrets {
		_, err := c.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	labels := map[string]string{"cnpg.io/cluster": journalCluster, "cnpg.io/instanceRole": "primary", "role": "primary"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: journalCluster + "-1", Labels: labels}, Spec: corev1.PodSpec{
		AutomountServiceAccountToken: ptr(false),
		SecurityContext:              &corev1.PodSecurityContext{FSGroup: ptr(int64(70000))},
		Containers: []corev1.Container{{
			Name: "postgres", Image: nodeShared.postgres, ImagePullPolicy: corev1.PullNever,
			Args: []string{"-c", "ssl=on", "-c", "ssl_cert_file=/tls/tls.crt", "-c", "ssl_key_file=/tls/tls.key"},
			Env: []corev1.EnvVar{{Name: "POSTGRES_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: journalCluster + "-superuser"}, Key: "password"}}}},
			Ports:          []corev1.ContainerPort{{ContainerPort: 5432}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(5432)}}, PeriodSeconds: 1},
			VolumeMounts:   []corev1.VolumeMount{{Name: "tls", MountPath: "/tls", ReadOnly: true}},
		}},
		Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: journalCluster + "-server", DefaultMode: ptr(int32(0o640))}}}},
	}}
	_, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: rw}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"cnpg.io/cluster": journalCluster, "cnpg.io/instanceRole": "primary"},
		Ports:    []corev1.ServicePort{{Port: 5432, TargetPort: intstr.FromInt32(5432)}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	podIP := ne.waitPodReady(pod.Name, 90*time.Second)

	// From this machine to the pod: TLS verified against the CA (the pod
	// IP is not in the certificate, so verify-ca, not verify-full).
	caFile := filepath.Join(ne.dir, "journal-ca.crt")
	require.NoError(t, os.WriteFile(caFile, ca, 0o600))
	hostURL := func(user, pw, db string) string {
		u := url.URL{Scheme: "postgres", User: url.UserPassword(user, pw), Host: net.JoinHostPort(podIP, "5432"), Path: "/" + db,
			RawQuery: "sslmode=verify-ca&sslrootcert=" + url.QueryEscape(caFile)}
		return u.String()
	}
	conn, err := pgx.Connect(ctx, hostURL("postgres", superPW, "postgres"))
	require.NoError(t, err, "connecting to the journal pod as the superuser")
	for _, stmt := range []string{
		fmt.Sprintf("CREATE ROLE keyledger LOGIN PASSWORD '%s'", ownerPW),
		"CREATE DATABASE app OWNER keyledger",
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", store.DefaultOperatorRole, operatorPW),
	} {
		_, err := conn.Exec(ctx, stmt)
		require.NoError(t, err, "preparing the journal database")
	}
	require.NoError(t, conn.Close(ctx))
	ne.journal = &platform.Journal{Name: "app", OwnerURL: hostURL("keyledger", ownerPW, "app"),
		OperatorURL: hostURL(store.DefaultOperatorRole, operatorPW, "app")}

	// The migration Job of overlays/cloudnativepg/database, in a pod, as
	// the schema owner.
	fsys := deployFS(t)
	require.NoError(t, fsys.WriteFile("/my-database/kustomization.yaml", []byte(fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
resources:
- ../deploy/overlays/cloudnativepg/database
images:
- name: keyledger
  newName: %s
  newTag: %s
`, ns, imageName(nodeShared.image), imageTag(nodeShared.image)))))
	var objs []*unstructured.Unstructured
	for _, o := range render(t, fsys, "/my-database") {
		if o.GetKind() != "Cluster" { // the operator's object; played above
			objs = append(objs, o)
		}
	}
	ne.applyAll(objs)
	end := ne.waitJob("keyledger-migrate", 3*time.Minute)
	log := ne.logs(end.Pod, "migrate")
	require.True(t, end.Complete, "migration Job failed: %s", log)
	require.Contains(t, log, `"dirty":false`)
}

// waitPodReady waits until the pod is Ready and returns its IP.
func (ne *nodeEnv) waitPodReady(name string, limit time.Duration) string {
	ne.t.Helper()
	ctx, cancel := context.WithTimeout(ne.t.Context(), limit)
	defer cancel()
	var ip string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := ne.kube.Client().CoreV1().Pods(ne.ns).Get(ctx, name, metav1.GetOptions{})
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
	require.NoError(ne.t, err, "pod %s not Ready within %s; node logs in %s", name, limit, ne.node.StateDir())
	return ip
}

func imageName(ref string) string { return ref[:strings.LastIndexByte(ref, ':')] }
func imageTag(ref string) string  { return ref[strings.LastIndexByte(ref, ':')+1:] }

func ptr[T any](v T) *T { return &v }

func randomHexT(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// journalPKI makes a CA and a server certificate for names, PEM encoded.
func journalPKI(t *testing.T, names ...string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "keyledger-journal-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
