package capi

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/leasecred"
	"github.com/kunobi-ninja/kobe/internal/pki"
)

// LeaseUserPrefix and LeaseGroup: the identity of per-lease credentials, as the other
// backends' (one RBAC query finds every lease's access on any backend).
const (
	LeaseUserPrefix = leasecred.UserPrefix
	LeaseGroup      = leasecred.Group
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
	if err := leasecred.Check(req); err != nil {
		return backends.Credential{}, err
	}
	caSecret, err := b.kube.CoreV1().Secrets(c.GetNamespace()).Get(ctx, c.GetName()+"-ca", metav1.GetOptions{})
	if err != nil {
		return backends.Credential{}, fmt.Errorf("instance %s: cluster CA: %w", id, err)
	}
	ca, err := pki.LoadCA(caSecret.Data["tls.crt"], caSecret.Data["tls.key"])
	if err != nil {
		return backends.Credential{}, fmt.Errorf("instance %s: Secret %s-ca: %w", id, id, err)
	}
	workload, err := workloadClient(adminKC)
	if err != nil {
		return backends.Credential{}, err
	}
	return leasecred.Issue(ctx, leasecred.Instance{ID: id, Server: admin.server, ServerCA: admin.caPEM, ClientCA: ca, Admin: workload}, req)
}

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
	return leasecred.Revoke(ctx, id, workload, user)
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
