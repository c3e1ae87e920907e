package vcluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/leasecred"
	"github.com/kunobi-ninja/kobe/internal/kubeconfig"
	"github.com/kunobi-ninja/kobe/internal/pki"
)

// LeaseUserPrefix and LeaseGroup: the identity of per-lease credentials, as the other
// backends' (one RBAC query finds every lease's access on any backend).
const (
	LeaseUserPrefix = leasecred.UserPrefix
	LeaseGroup      = leasecred.Group
)

// Credentials implements backends.RuntimeBackend. The admin credential is the kubeconfig the
// syncer writes to Secret vc-<id> (key config; its server is localhost:8443, the pod's own
// view), rewritten to the Service's address. A per-lease credential is a client certificate
// for kobe:lease:<user>, signed with the vcluster's client CA (Secret <id>-certs) and valid
// for req.TTL, bound to cluster-admin inside the vcluster by a ClusterRoleBinding that
// RevokeCredentials deletes.
func (b *Backend) Credentials(ctx context.Context, id string, req backends.CredentialRequest) (backends.Credential, error) {
	admin, err := b.adminKubeconfig(ctx, id)
	if err != nil {
		return backends.Credential{}, err
	}
	if req.User == "" {
		return backends.Credential{Kubeconfig: admin.kubeconfig, User: admin.user, ExpiresAt: admin.cert.NotAfter, ID: admin.cert.SerialNumber.Text(16)}, nil
	}
	if err := leasecred.Check(req); err != nil {
		return backends.Credential{}, err
	}
	ns := Namespace(id)
	certs, err := b.kube.CoreV1().Secrets(ns).Get(ctx, id+"-certs", metav1.GetOptions{})
	if err != nil {
		return backends.Credential{}, fmt.Errorf("instance %s: certificates Secret %s/%s-certs: %w", id, ns, id, err)
	}
	ca, err := clientCA(certs)
	if err != nil {
		return backends.Credential{}, fmt.Errorf("instance %s: Secret %s-certs: %w", id, id, err)
	}
	virtual, err := virtualClient(admin.kubeconfig)
	if err != nil {
		return backends.Credential{}, err
	}
	return leasecred.Issue(ctx, leasecred.Instance{ID: id, Server: admin.server, ServerCA: admin.caPEM, ClientCA: ca, Admin: virtual}, req)
}

// PrepareLeaseCredentials implements backends.LeasePreparer: the vcluster's holder (see
// leasecred.Prepare), made inside the virtual cluster, and a token of it. The vcluster's CAs
// stay in its Secrets in the host cluster.
func (b *Backend) PrepareLeaseCredentials(ctx context.Context, id string) (backends.PreparedCredential, error) {
	admin, err := b.adminKubeconfig(ctx, id)
	if err != nil {
		return backends.PreparedCredential{}, err
	}
	virtual, err := virtualClient(admin.kubeconfig)
	if err != nil {
		return backends.PreparedCredential{}, err
	}
	return leasecred.Prepare(ctx, leasecred.Instance{ID: id, Server: admin.server, ServerCA: admin.caPEM, Admin: virtual})
}

// RevokeCredentials implements backends.RuntimeBackend: the lease's ClusterRoleBinding goes,
// so its certificate, still valid, authorizes nothing; and the vcluster's holder goes (an
// instance has one holder in its life), so its tokens are refused.
func (b *Backend) RevokeCredentials(ctx context.Context, id, user string) error {
	admin, err := b.adminKubeconfig(ctx, id)
	if err != nil {
		return err
	}
	virtual, err := virtualClient(admin.kubeconfig)
	if err != nil {
		return err
	}
	if err := leasecred.Revoke(ctx, id, virtual, user); err != nil {
		return err
	}
	return leasecred.RevokeHolder(ctx, id, virtual)
}

type adminCredential struct {
	kubeconfig []byte // rewritten to server
	server     string
	caPEM      []byte
	user       string
	cert       *x509.Certificate
}

// adminKubeconfig reads Secret vc-<id> and points its kubeconfig at the Service's address.
func (b *Backend) adminKubeconfig(ctx context.Context, id string) (adminCredential, error) {
	if b.unavailable != "" {
		return adminCredential{}, errors.New("vcluster backend: " + b.unavailable)
	}
	ns := Namespace(id)
	n, err := b.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && n.Labels[LabelInstance] != id) {
		return adminCredential{}, backends.ErrNotFound
	}
	if err != nil {
		return adminCredential{}, fmt.Errorf("vcluster host cluster: %w", err)
	}
	sec, err := b.kube.CoreV1().Secrets(ns).Get(ctx, kubeconfigSecret(id), metav1.GetOptions{})
	if err != nil {
		return adminCredential{}, fmt.Errorf("instance %s: admin kubeconfig (Secret %s/%s): %w", id, ns, kubeconfigSecret(id), err)
	}
	svc, err := b.kube.CoreV1().Services(ns).Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		return adminCredential{}, fmt.Errorf("instance %s: Service %s/%s: %w", id, ns, id, err)
	}
	server := endpointOf(svc)
	if server == "" {
		return adminCredential{}, fmt.Errorf("instance %s: Service %s/%s has no address", id, ns, id)
	}
	return rewriteKubeconfig(id, sec.Data["config"], server)
}

// rewriteKubeconfig keeps the current context's CA and client certificate and sets its
// server; the result has one cluster, user and context, all named after the instance.
func rewriteKubeconfig(id string, data []byte, server string) (adminCredential, error) {
	if len(data) == 0 {
		return adminCredential{}, fmt.Errorf("instance %s: Secret %s has no key config", id, kubeconfigSecret(id))
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return adminCredential{}, fmt.Errorf("instance %s: Secret %s: %w", id, kubeconfigSecret(id), err)
	}
	kctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return adminCredential{}, fmt.Errorf("instance %s: Secret %s: no current context %q", id, kubeconfigSecret(id), cfg.CurrentContext)
	}
	cl, ok := cfg.Clusters[kctx.Cluster]
	if !ok {
		return adminCredential{}, fmt.Errorf("instance %s: Secret %s: context names no cluster", id, kubeconfigSecret(id))
	}
	auth, ok := cfg.AuthInfos[kctx.AuthInfo]
	if !ok || len(auth.ClientCertificateData) == 0 || len(auth.ClientKeyData) == 0 {
		return adminCredential{}, fmt.Errorf("instance %s: Secret %s: no client certificate", id, kubeconfigSecret(id))
	}
	cert, err := pki.ParseCert(auth.ClientCertificateData)
	if err != nil {
		return adminCredential{}, err
	}
	kc, err := kubeconfig.ForClientCert(id, server, cl.CertificateAuthorityData, auth.ClientCertificateData, auth.ClientKeyData, cert.Subject.CommonName)
	if err != nil {
		return adminCredential{}, err
	}
	return adminCredential{kubeconfig: kc, server: server, caPEM: cl.CertificateAuthorityData, user: cert.Subject.CommonName, cert: cert}, nil
}

func virtualClient(kc []byte) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("vcluster kubeconfig: %w", err)
	}
	return kubernetes.NewForConfig(cfg)
}

// clientCA is the CA the vcluster's API server trusts for client certificates: client-ca.*
// when the syncer split it out, else ca.* (kubeadm's layout, one CA for both).
func clientCA(s *corev1.Secret) (*pki.CA, error) {
	for _, pair := range [][2]string{{"client-ca.crt", "client-ca.key"}, {"ca.crt", "ca.key"}} {
		if len(s.Data[pair[0]]) > 0 && len(s.Data[pair[1]]) > 0 {
			return pki.LoadCA(s.Data[pair[0]], s.Data[pair[1]])
		}
	}
	return nil, errors.New("no client CA (client-ca.crt/key or ca.crt/key)")
}
