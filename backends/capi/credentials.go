package capi

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/kubeconfig"
	"github.com/kunobi-ninja/kobe/internal/pki"
)

// LeaseUserPrefix and LeaseGroup: the identity of per-lease credentials, as the local
// backend's (one RBAC query finds every lease's access on any backend).
const (
	LeaseUserPrefix = "kobe:lease:"
	LeaseGroup      = "kobe:leases"
)

// Credentials implements backends.RuntimeBackend. The admin credential is the Cluster's
// <cluster>-kubeconfig Secret (written by the control-plane provider). A per-lease credential
// is a client certificate for kobe:lease:<user>, signed with the Cluster's CA (the
// <cluster>-ca Secret) and valid for req.TTL, bound to cluster-admin in the workload cluster by
// a ClusterRoleBinding that RevokeCredentials deletes.
func (b *Backend) Credentials(ctx context.Context, id string, req backends.CredentialRequest) (backends.Credential, error) {
	if b.unavailable != "" {
		return backends.Credential{}, errors.New("capi backend: " + b.unavailable)
	}
	c, err := b.findCluster(ctx, id)
	if err != nil {
		return backends.Credential{}, err
	}
	adminKC, err := b.kubeconfigSecret(ctx, c)
	if err != nil {
		return backends.Credential{}, fmt.Errorf("instance %s: admin kubeconfig: %w", id, err)
	}
	admin, err := parseKubeconfig(adminKC)
	if err != nil {
		return backends.Credential{}, fmt.Errorf("instance %s: Secret %s-kubeconfig: %w", id, id, err)
	}
	if req.User == "" {
		return backends.Credential{Kubeconfig: adminKC, User: admin.user, ExpiresAt: admin.cert.NotAfter, ID: admin.cert.SerialNumber.Text(16)}, nil
	}
	if !idPattern.MatchString(req.User) || len(req.User) > 63 {
		return backends.Credential{}, fmt.Errorf("credential user %q: must be a DNS label", req.User)
	}
	if req.TTL <= 0 {
		return backends.Credential{}, fmt.Errorf("credential for %s: ttl must be positive", req.User)
	}
	caSecret, err := b.kube.CoreV1().Secrets(c.GetNamespace()).Get(ctx, c.GetName()+"-ca", metav1.GetOptions{})
	if err != nil {
		return backends.Credential{}, fmt.Errorf("instance %s: cluster CA: %w", id, err)
	}
	ca, err := loadCA(caSecret.Data["tls.crt"], caSecret.Data["tls.key"])
	if err != nil {
		return backends.Credential{}, fmt.Errorf("instance %s: Secret %s-ca: %w", id, id, err)
	}
	user := LeaseUserPrefix + req.User
	workload, err := workloadClient(adminKC)
	if err != nil {
		return backends.Credential{}, err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: bindingName(req.User), Labels: map[string]string{"kobe.kunobi.ninja/lease": req.User}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}
	if _, err := workload.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return backends.Credential{}, fmt.Errorf("binding %s in instance %s: %w", user, id, err)
	}
	cred, err := ca.IssueClient(user, []string{LeaseGroup}, req.TTL)
	if err != nil {
		return backends.Credential{}, err
	}
	kc, err := kubeconfig.ForClientCert(id, admin.server, admin.caPEM, cred.CertPEM, cred.KeyPEM, user)
	return backends.Credential{Kubeconfig: kc, User: user, ExpiresAt: cred.NotAfter, ID: cred.Serial}, err
}

func bindingName(user string) string { return "kobe-lease-" + user }

// RevokeCredentials implements backends.RuntimeBackend.
func (b *Backend) RevokeCredentials(ctx context.Context, id, user string) error {
	if b.unavailable != "" {
		return errors.New("capi backend: " + b.unavailable)
	}
	c, err := b.findCluster(ctx, id)
	if err != nil {
		return err
	}
	adminKC, err := b.kubeconfigSecret(ctx, c)
	if err != nil {
		return fmt.Errorf("instance %s: admin kubeconfig: %w", id, err)
	}
	workload, err := workloadClient(adminKC)
	if err != nil {
		return err
	}
	err = workload.RbacV1().ClusterRoleBindings().Delete(ctx, bindingName(user), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("revoking %s in instance %s: %w", user, id, err)
	}
	return nil
}

type parsedKubeconfig struct {
	server string
	caPEM  []byte
	user   string
	cert   *x509.Certificate
}

// parseKubeconfig reads the current context's server, CA and client certificate.
func parseKubeconfig(data []byte) (parsedKubeconfig, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return parsedKubeconfig{}, err
	}
	ctxName := cfg.CurrentContext
	kctx, ok := cfg.Contexts[ctxName]
	if !ok {
		return parsedKubeconfig{}, fmt.Errorf("no current context %q", ctxName)
	}
	cl, ok := cfg.Clusters[kctx.Cluster]
	if !ok {
		return parsedKubeconfig{}, fmt.Errorf("context %q names no cluster", ctxName)
	}
	auth, ok := cfg.AuthInfos[kctx.AuthInfo]
	if !ok || len(auth.ClientCertificateData) == 0 {
		return parsedKubeconfig{}, errors.New("no client certificate")
	}
	cert, err := pki.ParseCert(auth.ClientCertificateData)
	if err != nil {
		return parsedKubeconfig{}, err
	}
	return parsedKubeconfig{server: cl.Server, caPEM: cl.CertificateAuthorityData, user: cert.Subject.CommonName, cert: cert}, nil
}

func workloadClient(kc []byte) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("workload kubeconfig: %w", err)
	}
	return kubernetes.NewForConfig(cfg)
}

// loadCA reads a Cluster API CA: certificate and key in PEM, the key RSA (PKCS#1, what CAPI
// writes), PKCS#8 or EC.
func loadCA(certPEM, keyPEM []byte) (*pki.CA, error) {
	cert, err := pki.ParseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("ca certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("ca certificate: not a CA")
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("ca key: no PEM key")
	}
	var key crypto.Signer
	if block.Type == "RSA PRIVATE KEY" {
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	} else {
		key, err = pki.ParseKey(keyPEM)
	}
	if err != nil {
		return nil, fmt.Errorf("ca key: %w", err)
	}
	return &pki.CA{Cert: cert, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}
