package hosted

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/leasecred"
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

// probeAPI asks the instance's API for /readyz at endpoint, as kobe's admin. serverName, when
// set, is the name the server's certificate is checked for (a server reached at its pod address).
func (b *Backend) probeAPI(ctx context.Context, ca *corev1.Secret, endpoint, serverName string) error {
	cfg, _, err := b.adminConfig(ca, endpoint, 10*time.Minute)
	if err != nil {
		return err
	}
	cfg.TLSClientConfig.ServerName = serverName
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
	in, err := b.reach(ctx, id)
	if err != nil {
		return backends.Credential{}, err
	}
	ca, shape, endpoint, c := in.ca, in.shape, in.endpoint, in.authority
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
	cred, err := leasecred.Issue(ctx, leasecred.Instance{ID: id, Server: endpoint, ServerCA: c.CertPEM, ClientCA: c, Admin: admin}, req)
	if err != nil {
		return backends.Credential{}, err
	}
	if err := b.untilEveryServer(ctx, ca, shape, LeaseUserPrefix+req.User, []string{LeaseGroup}, true); err != nil {
		return backends.Credential{}, err
	}
	return cred, nil
}

// PrepareLeaseCredentials implements backends.LeasePreparer: the instance's holder (see
// leasecred.Prepare), authorized by every server of an HA instance, and a token of it. The
// instance's CA stays in its Secret in the host cluster.
func (b *Backend) PrepareLeaseCredentials(ctx context.Context, id string) (backends.PreparedCredential, error) {
	in, err := b.reach(ctx, id)
	if err != nil {
		return backends.PreparedCredential{}, err
	}
	admin, err := b.instanceClient(in.ca, in.endpoint)
	if err != nil {
		return backends.PreparedCredential{}, err
	}
	prepared, err := leasecred.Prepare(ctx, leasecred.Instance{ID: id, Server: in.endpoint, ServerCA: in.authority.CertPEM, Admin: admin})
	if err != nil {
		return backends.PreparedCredential{}, err
	}
	if err := b.untilEveryServer(ctx, in.ca, in.shape, leasecred.HolderUser, leasecred.HolderGroups, true); err != nil {
		return backends.PreparedCredential{}, err
	}
	return prepared, nil
}

// reached is what kobe needs to reach an instance's API as its admin: the Secret of its CA
// (which names the instance and its shape), its address, and the CA itself.
type reached struct {
	ca        *corev1.Secret
	shape     instanceShape
	endpoint  string
	authority *pki.CA
}

// reach finds instance id's CA and address.
func (b *Backend) reach(ctx context.Context, id string) (reached, error) {
	if err := b.available(); err != nil {
		return reached{}, err
	}
	ca, err := b.findCA(ctx, id)
	if err != nil {
		return reached{}, err
	}
	r := reached{ca: ca}
	_ = jsonUnmarshal(ca.Annotations[shapeAnnotation], &r.shape)
	if r.endpoint, err = b.endpoint(ctx, ca, r.shape); err != nil {
		return reached{}, fmt.Errorf("instance %s: %w", id, err)
	}
	if r.authority, err = b.instanceCA(ca); err != nil {
		return reached{}, err
	}
	return r, nil
}

func (b *Backend) instanceClient(ca *corev1.Secret, endpoint string) (*kubernetes.Clientset, error) {
	cfg, _, err := b.adminConfig(ca, endpoint, 10*time.Minute)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// RevokeCredentials implements backends.RuntimeBackend: the lease's binding goes, so its
// certificate (still valid until it expires) is refused with 403, and so does the instance's
// holder, whose tokens are refused with 401.
func (b *Backend) RevokeCredentials(ctx context.Context, id, user string) error {
	in, err := b.reach(ctx, id)
	if err != nil {
		return err
	}
	ca, shape := in.ca, in.shape
	admin, err := b.instanceClient(ca, in.endpoint)
	if err != nil {
		return err
	}
	if err := leasecred.Revoke(ctx, id, admin, user); err != nil {
		return err
	}
	// The holder too: an instance has one holder in its life, so whichever way its lease was
	// bound, both go.
	if err := leasecred.RevokeHolder(ctx, id, admin); err != nil {
		return err
	}
	if err := b.untilEveryServer(ctx, ca, shape, LeaseUserPrefix+user, []string{LeaseGroup}, false); err != nil {
		return err
	}
	return b.untilEveryServer(ctx, ca, shape, leasecred.HolderUser, leasecred.HolderGroups, false)
}

// serverTimeout bounds how long a binding may take to reach every server of an HA instance.
const serverTimeout = 30 * time.Second

// untilEveryServer waits, for an instance of several servers, until each server's authorizer
// agrees that user (in groups) is (allowed) or is no longer (!allowed) cluster-admin. Each server keeps
// RBAC in its own cache, fed by a watch of the shared datastore: a binding created through
// one server reaches the others a moment later, and a credential handed out before that would
// be refused by whichever server a request lands on. Each server is asked at its pod address.
func (b *Backend) untilEveryServer(ctx context.Context, ca *corev1.Secret, shape instanceShape, user string, groups []string, allowed bool) error {
	if shape.Servers < 2 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, serverTimeout)
	defer cancel()
	servers, err := b.serverConfigs(ctx, ca)
	if err != nil {
		return err
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "namespaces"}}}
	for name, cfg := range servers {
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		for {
			got, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err == nil && got.Status.Allowed == allowed {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("instance %s: server %s does not see the binding of %s yet (allowed=%v wanted) within %s: %v", ca.Labels[LabelInstance], name, user, allowed, serverTimeout, err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// serverConfigs are kobe's admin clients of each server of an instance, at its pod address,
// the certificate checked for the Service's name (every server's certificate names it).
func (b *Backend) serverConfigs(ctx context.Context, ca *corev1.Secret) (map[string]*rest.Config, error) {
	id := ca.Labels[LabelInstance]
	pods, err := b.kube.CoreV1().Pods(ca.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelInstance + "=" + id + "," + LabelComponent + "=" + ComponentServer})
	if err != nil {
		return nil, fmt.Errorf("listing the servers of %s: %w", id, err)
	}
	out := map[string]*rest.Config{}
	for _, pod := range pods.Items {
		if pod.Status.PodIP == "" || pod.DeletionTimestamp != nil {
			continue
		}
		cfg, _, err := b.adminConfig(ca, "https://"+net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(APIPort)), 10*time.Minute)
		if err != nil {
			return nil, err
		}
		cfg.TLSClientConfig.ServerName = serviceDNSName(id, ca.Namespace)
		out[pod.Name] = cfg
	}
	return out, nil
}

func jsonUnmarshal(s string, v any) error {
	if s == "" {
		return nil
	}
	return json.Unmarshal([]byte(s), v)
}
