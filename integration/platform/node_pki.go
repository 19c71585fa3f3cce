package platform

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// clusterPKI is the CA of a control plane started WithNode. It signs the API
// server's serving certificate (valid for the node address, the kubernetes
// Service's ClusterIP and its names, so in-cluster clients verify it) and a
// client certificate the API server presents to the kubelet (for logs and
// exec). kube-controller-manager publishes the CA as kube-root-ca.crt, and
// the kubelet trusts it for client certificates.
type clusterPKI struct {
	ca                                  *x509.Certificate
	caKey                               *ecdsa.PrivateKey
	caPEM                               []byte
	caFile                              string
	dir                                 string
	servingCert, servingKey             string
	kubeletClientCert, kubeletClientKey string
}

func newClusterPKI(dir string) (*clusterPKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "keyledger-test-cluster-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating cluster CA: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &clusterPKI{ca: ca, caKey: key, dir: dir, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	p.caFile = filepath.Join(dir, "cluster-ca.crt")
	if err := os.WriteFile(p.caFile, p.caPEM, 0o644); err != nil {
		return nil, err
	}
	p.servingCert, p.servingKey, err = p.issue("apiserver", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(NodeAddress), net.ParseIP(APIServiceIP)},
	})
	if err != nil {
		return nil, err
	}
	p.kubeletClientCert, p.kubeletClientKey, err = p.issue("apiserver-kubelet-client", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return p, err
}

// issue signs tmpl with the CA and writes NAME.crt and NAME.key into the
// PKI directory.
func (p *clusterPKI) issue(name string, tmpl *x509.Certificate) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		return "", "", fmt.Errorf("issuing %s certificate: %w", name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

// configureForNode sets the API server flags a real node needs. envtest
// keeps an apiserver.crt it finds in CertDir, so the serving certificate is
// ours, and its CA is what envtest's admin configuration trusts.
func (k *Kube) configureForNode(api *envtest.APIServer, args *envtest.Arguments) error {
	certDir := filepath.Join(k.workDir, "apiserver-certs")
	pki, err := newClusterPKI(filepath.Join(k.workDir, "pki"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	for src, dst := range map[string]string{pki.servingCert: "apiserver.crt", pki.servingKey: "apiserver.key"} {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(certDir, dst), b, 0o600); err != nil {
			return err
		}
	}
	api.CertDir = certDir
	api.SecureServing.CA = pki.caPEM
	k.cluster = pki
	args.Set("authorization-mode", "Node,RBAC")
	// envtest turns ServiceAccount admission off; pods on a real node need
	// it (it mounts the projected token of automounting pods).
	args.Disable("disable-admission-plugins")
	args.Set("enable-admission-plugins", "NodeRestriction")
	args.Set("service-cluster-ip-range", ServiceCIDR)
	args.Set("kubelet-preferred-address-types", "InternalIP")
	args.Set("kubelet-client-certificate", pki.kubeletClientCert)
	args.Set("kubelet-client-key", pki.kubeletClientKey)
	args.Set("allow-privileged", "true")
	return nil
}
