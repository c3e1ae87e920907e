package hosted

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/internal/leasecred"
	"github.com/kunobi-ninja/kobe/internal/kubeconfig"
	"github.com/kunobi-ninja/kobe/internal/pki"
)

// The identities kobe signs with an instance's CA, as on the other backends (one RBAC query
// finds every lease's access on any backend).
const (
	AdminUser       = "kobe:admin"
	LeaseUserPrefix = leasecred.UserPrefix
	LeaseGroup      = leasecred.Group
	// adminValidity of an admin kubeconfig: kobe issues a new one on every request.
	adminValidity = 30 * 24 * time.Hour
)

func (b *Backend) instanceCA(ca *corev1.Secret) (*pki.CA, error) {
	c, err := pki.LoadCA(ca.Data[corev1.TLSCertKey], ca.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("instance %s: Secret %s/%s: %w", ca.Labels[LabelInstance], ca.Namespace, ca.Name, err)
	}
	return c, nil
}

// adminConfig is a client of the instance's API as system:masters, at endpoint.
func (b *Backend) adminConfig(ca *corev1.Secret, endpoint string, validity time.Duration) (*rest.Config, pki.Credential, error) {
	c, err := b.instanceCA(ca)
	if err != nil {
		return nil, pki.Credential{}, err
	}
	cred, err := c.IssueClient(AdminUser, []string{"system:masters"}, validity)
	if err != nil {
		return nil, pki.Credential{}, err
	}
	cfg := &rest.Config{
		Host:            endpoint,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CertPEM, CertData: cred.CertPEM, KeyData: cred.KeyPEM},
		Timeout:         b.apiTimeout,
	}
	return cfg, cred, nil
}

// probeAPI asks the instance's API for /readyz at endpoint, as kobe's admin.
func (b *Backend) probeAPI(ctx context.Context, ca *corev1.Secret, endpoint string) error {
	cfg, _, err := b.adminConfig(ca, endpoint, 10*time.Minute)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var code int
	res := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&code)
	if err := res.Error(); err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("/readyz answered %d", code)
	}
	return nil
}

// Credentials implements backends.RuntimeBackend. Both kinds are client certificates signed
// with the instance's CA, which kobe made (see the package comment): the admin credential is
// kobe:admin in system:masters; a per-lease credential is kobe:lease:<user> (group
// kobe:leases), valid for req.TTL, bound to cluster-admin in the instance by a
// ClusterRoleBinding that RevokeCredentials deletes.
func (b *Backend) Credentials(ctx context.Context, id string, req backends.CredentialRequest) (backends.Credential, error) {
	if err := b.available(); err != nil {
		return backends.Credential{}, err
	}
	ca, err := b.findCA(ctx, id)
	if err != nil {
		return backends.Credential{}, err
	}
	var shape instanceShape
	_ = jsonUnmarshal(ca.Annotations[shapeAnnotation], &shape)
	endpoint, err := b.endpoint(ctx, ca, shape)
	if err != nil {
		return backends.Credential{}, fmt.Errorf("instance %s: %w", id, err)
	}
	c, err := b.instanceCA(ca)
	if err != nil {
		return backends.Credential{}, err
	}
	if req.User == "" {
		cred, err := c.IssueClient(AdminUser, []string{"system:masters"}, adminValidity)
		if err != nil {
			return backends.Credential{}, err
		}
		kc, err := kubeconfig.ForClientCert(id, endpoint, c.CertPEM, cred.CertPEM, cred.KeyPEM, AdminUser)
		return backends.Credential{Kubeconfig: kc, User: AdminUser, ExpiresAt: cred.NotAfter, ID: cred.Serial}, err
	}
	if err := leasecred.Check(req); err != nil {
		return backends.Credential{}, err
	}
	admin, err := b.instanceClient(ca, endpoint)
	if err != nil {
		return backends.Credential{}, err
	}
	return leasecred.Issue(ctx, leasecred.Instance{ID: id, Server: endpoint, ServerCA: c.CertPEM, ClientCA: c, Admin: admin}, req)
}

func (b *Backend) instanceClient(ca *corev1.Secret, endpoint string) (*kubernetes.Clientset, error) {
	cfg, _, err := b.adminConfig(ca, endpoint, 10*time.Minute)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// RevokeCredentials implements backends.RuntimeBackend: the lease's binding goes, so its
// certificate (still valid until it expires) is refused with 403.
func (b *Backend) RevokeCredentials(ctx context.Context, id, user string) error {
	if err := b.available(); err != nil {
		return err
	}
	ca, err := b.findCA(ctx, id)
	if err != nil {
		return err
	}
	var shape instanceShape
	_ = jsonUnmarshal(ca.Annotations[shapeAnnotation], &shape)
	endpoint, err := b.endpoint(ctx, ca, shape)
	if err != nil {
		return fmt.Errorf("instance %s: %w", id, err)
	}
	admin, err := b.instanceClient(ca, endpoint)
	if err != nil {
		return err
	}
	return leasecred.Revoke(ctx, id, admin, user)
}

func jsonUnmarshal(s string, v any) error {
	if s == "" {
		return nil
	}
	return json.Unmarshal([]byte(s), v)
}
