package leasecred

// The per-lease certificate, for a lease bound the slow way by a backend that reaches its
// instances' Kubernetes API as an admin (capi, vcluster, and the hosted k3s and k0s): a client
// certificate for kobe:lease:<user> (group kobe:leases) signed with the instance's client CA and
// valid for the lease's TTL, bound to cluster-admin in the instance by ClusterRoleBinding
// kobe-lease-<user>; revoking it deletes the binding, so the certificate, still valid until it
// expires, authorizes nothing (403). A credential is handed out only once the instance's
// authorizer allows its user. The local backend issues the same identity through its own HTTP
// client.

import (
	"context"
	"fmt"
	"regexp"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/kubeconfig"
	"github.com/kunobi-ninja/kobe/internal/pki"
)

// UserPrefix and Group: the identity of per-lease credentials on every backend (one RBAC
// query finds every lease's access).
const (
	UserPrefix = "kobe:lease:"
	Group      = "kobe:leases"
)

// userPattern: a lease user names a ClusterRoleBinding (a DNS label).
var userPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Check refuses a per-lease request whose user cannot name a binding or whose TTL is not
// positive.
func Check(req backends.CredentialRequest) error {
	if !userPattern.MatchString(req.User) || len(req.User) > 63 {
		return fmt.Errorf("credential user %q: must be a DNS label", req.User)
	}
	if req.TTL <= 0 {
		return fmt.Errorf("credential for %s: ttl must be positive", req.User)
	}
	return nil
}

// Instance is what a per-lease credential is made of.
type Instance struct {
	// ID names the kubeconfig's cluster, user and context.
	ID string
	// Server is the address the kubeconfig points at; ServerCA the CA it trusts there (PEM).
	Server   string
	ServerCA []byte
	// ClientCA signs the lease's certificate.
	ClientCA *pki.CA
	// Admin is the instance's API as its admin (it creates the binding).
	Admin kubernetes.Interface
}

// Issue binds req.User to cluster-admin in the instance and issues its certificate, valid for
// req.TTL (see Check); issuing again for the same user keeps the binding.
func Issue(ctx context.Context, in Instance, req backends.CredentialRequest) (backends.Credential, error) {
	user := UserPrefix + req.User
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: BindingName(req.User), Labels: map[string]string{"kobe.kunobi.ninja/lease": req.User}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}
	if _, err := in.Admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return backends.Credential{}, fmt.Errorf("binding %s in instance %s: %w", user, in.ID, err)
	}
	if err := waitAuthorized(ctx, in.ID, in.Admin, user, Group); err != nil {
		return backends.Credential{}, err
	}
	cred, err := in.ClientCA.IssueClient(user, []string{Group}, req.TTL)
	if err != nil {
		return backends.Credential{}, err
	}
	kc, err := kubeconfig.ForClientCert(in.ID, in.Server, in.ServerCA, cred.CertPEM, cred.KeyPEM, user)
	return backends.Credential{Kubeconfig: kc, User: user, ExpiresAt: cred.NotAfter, ID: cred.Serial}, err
}

// authorizedWithin bounds how long a new binding may take to reach the API server's authorizer;
// authorizedEvery is how often it is asked meanwhile.
var (
	authorizedWithin = 30 * time.Second
	authorizedEvery  = 50 * time.Millisecond
)

// waitAuthorized returns once the instance's API server authorizes user (in groups) what the
// binding grants. Its RBAC authorizer learns of a new binding through a watch, a moment after
// the write returns (milliseconds when idle, longer on a busy host or a remote datastore): a
// credential handed out before would be refused (403) on its first requests.
func waitAuthorized(ctx context.Context, id string, admin kubernetes.Interface, user string, groups ...string) error {
	ctx, cancel := context.WithTimeout(ctx, authorizedWithin)
	defer cancel()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "namespaces"}}}
	for asked := 0; ; asked++ {
		got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err == nil && got.Status.Allowed {
			return nil
		}
		if err != nil && asked == 0 && !servesAccessReviews(admin) {
			// An API server without the authorization API (Cluster API's in-memory test
			// provider) has no authorizer to wait for; every real kube-apiserver serves it.
			return nil
		}
		if err == nil {
			err = fmt.Errorf("not allowed: %s", got.Status.Reason)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("binding %s in instance %s: the API server does not authorize it within %s (last answer: %v)", user, id, authorizedWithin, err)
		case <-time.After(authorizedEvery):
		}
	}
}

// Revoke deletes the user's binding in the instance; a binding already gone is fine.
func Revoke(ctx context.Context, id string, admin kubernetes.Interface, user string) error {
	err := admin.RbacV1().ClusterRoleBindings().Delete(ctx, BindingName(user), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("revoking %s in instance %s: %w", user, id, err)
	}
	return nil
}

// BindingName is the ClusterRoleBinding of a lease user.
func BindingName(user string) string { return "kobe-lease-" + user }

// servesAccessReviews says whether the API server lists the authorization.k8s.io group. If it
// cannot be asked, it is taken to serve it: kobe then waits and says why it gave up.
func servesAccessReviews(admin kubernetes.Interface) bool {
	groups, err := admin.Discovery().ServerGroups()
	if err != nil {
		return true
	}
	for _, g := range groups.Groups {
		if g.Name == authorizationv1.GroupName {
			return true
		}
	}
	return false
}
