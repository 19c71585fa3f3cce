package platform

import (
	"context"
	"errors"
	"fmt"
	"os"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ServiceAccountConfig creates the ServiceAccount namespace/name if absent,
// mints a token for it with the TokenRequest API and returns a client
// configuration that authenticates with that bearer token alone (plus the
// API server's CA). The token is never logged; expirationSeconds is passed
// through (the API server enforces a minimum of 600).
func (k *Kube) ServiceAccountConfig(ctx context.Context, namespace, name string, expirationSeconds int64) (*rest.Config, error) {
	sas := k.client.CoreV1().ServiceAccounts(namespace)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	if _, err := sas.Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating service account %s/%s: %w", namespace, name, err)
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         []string{serviceAccountIssuer},
		ExpirationSeconds: &expirationSeconds,
	}}
	tr, err := sas.CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for service account %s/%s: %w", namespace, name, err)
	}
	if tr.Status.Token == "" {
		return nil, fmt.Errorf("token request for service account %s/%s returned no token", namespace, name)
	}
	admin := k.config
	return &rest.Config{
		Host:            admin.Host,
		APIPath:         admin.APIPath,
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData, ServerName: admin.ServerName},
		QPS:             admin.QPS,
		Burst:           admin.Burst,
		UserAgent:       "keyledger-test/" + namespace + "/" + name,
	}, nil
}

// KubeconfigForConfig writes a kubeconfig equivalent to cfg (bearer token or
// client certificate, and the CA) into dir and returns its path, so that a
// subprocess (the CLI, kubectl) can act as that identity. The file is
// readable by its owner only.
func (k *Kube) KubeconfigForConfig(cfg *rest.Config, dir string) (string, error) {
	if cfg.BearerTokenFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" || cfg.CAFile != "" {
		return "", errors.New("writing kubeconfig: file-based credentials are not supported, use inline data")
	}
	const name = "keyledger-test"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		TLSServerName:            cfg.ServerName,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		Token:                 cfg.BearerToken,
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: metav1.NamespaceDefault}
	kc.CurrentContext = name
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return "", fmt.Errorf("encoding kubeconfig: %w", err)
	}
	f, err := os.CreateTemp(dir, "kubeconfig-*.yaml") // created with mode 0600
	if err != nil {
		return "", fmt.Errorf("creating kubeconfig file: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("writing kubeconfig %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("writing kubeconfig %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}
