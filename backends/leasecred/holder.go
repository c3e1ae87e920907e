package leasecred

import (
	"context"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kunobi-ninja/kobe/backends"
)

// The holder: the identity an instance's next (and only) holder gets on a warm bind. A
// ServiceAccount in kube-system, which the API server refuses to delete, so that the holder
// cannot lose it by cleaning up namespaces.
const (
	HolderNamespace = "kube-system"
	HolderName      = "kobe-lease-holder"
	HolderUser      = "system:serviceaccount:" + HolderNamespace + ":" + HolderName
	holderBinding   = "kobe-lease-holder"
	// instanceAnnotation names the instance a holder was made for: a member restored from a
	// golden image carries its builder's objects, and must not keep a holder whose tokens the
	// builder (or a sibling restored from the same image, with the same signing key and the
	// same ServiceAccount uid) could have.
	instanceAnnotation = "kobe.kunobi.ninja/instance"
)

// HolderGroups are the groups of the holder's tokens.
var HolderGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + HolderNamespace, "system:authenticated"}

// HolderTokenLifetime is what a prepared token asks for: longer than any member waits warm
// plus the longest lease (a member is recycled before its certificates expire, within a
// year). The token stops working long before: when its lease ends, RevokeHolder deletes its
// ServiceAccount, and the API server checks that the ServiceAccount (same uid) exists on
// every request. An API server that caps token lifetimes gives less: ExpiresAt says what.
var HolderTokenLifetime = 2 * 365 * 24 * time.Hour

// Prepare makes the holder of instance in (a ServiceAccount bound to cluster-admin), waits
// until the authorizer honours the binding, and returns a token of it. Preparing again keeps
// the holder (its earlier tokens stay valid) unless it was made for another instance.
func Prepare(ctx context.Context, in Instance) (backends.PreparedCredential, error) {
	sa, err := holderAccount(ctx, in)
	if err != nil {
		return backends.PreparedCredential{}, err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: holderBinding, Labels: map[string]string{"kobe.kunobi.ninja/lease": "holder"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: HolderName, Namespace: HolderNamespace}},
	}
	if _, err := in.Admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return backends.PreparedCredential{}, fmt.Errorf("binding %s in instance %s: %w", HolderUser, in.ID, err)
	}
	if err := waitAuthorized(ctx, in.ID, in.Admin, HolderUser, HolderGroups...); err != nil {
		return backends.PreparedCredential{}, err
	}
	seconds := int64(HolderTokenLifetime / time.Second)
	tr, err := in.Admin.CoreV1().ServiceAccounts(HolderNamespace).CreateToken(ctx, HolderName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		return backends.PreparedCredential{}, fmt.Errorf("token of %s in instance %s: %w", HolderUser, in.ID, err)
	}
	if tr.Status.Token == "" {
		return backends.PreparedCredential{}, fmt.Errorf("token of %s in instance %s: the API server returned none", HolderUser, in.ID)
	}
	return backends.PreparedCredential{Cluster: in.ID, Server: in.Server, ServerCAPEM: in.ServerCA,
		User: HolderUser, Token: tr.Status.Token, ExpiresAt: tr.Status.ExpirationTimestamp.Time,
		TokenID: string(sa.UID)}, nil
}

// holderAccount returns the instance's holder ServiceAccount, made for this instance.
func holderAccount(ctx context.Context, in Instance) (*corev1.ServiceAccount, error) {
	accounts := in.Admin.CoreV1().ServiceAccounts(HolderNamespace)
	for attempt := 0; attempt < 3; attempt++ {
		sa, err := accounts.Get(ctx, HolderName, metav1.GetOptions{})
		switch {
		case err == nil && sa.Annotations[instanceAnnotation] == in.ID && sa.DeletionTimestamp == nil:
			return sa, nil
		case err == nil:
			// Another instance's (a golden image's builder): a new one, with a new uid, so that
			// no token of the old one works here.
			if err := accounts.Delete(ctx, HolderName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &sa.UID}}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return nil, fmt.Errorf("replacing %s in instance %s: %w", HolderUser, in.ID, err)
			}
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading %s in instance %s: %w", HolderUser, in.ID, err)
		}
		sa, err = accounts.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
			Name: HolderName, Namespace: HolderNamespace,
			Annotations: map[string]string{instanceAnnotation: in.ID},
			Labels:      map[string]string{"kobe.kunobi.ninja/lease": "holder"},
		}}, metav1.CreateOptions{})
		if err == nil {
			return sa, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating %s in instance %s: %w", HolderUser, in.ID, err)
		}
	}
	return nil, fmt.Errorf("creating %s in instance %s: it keeps being replaced", HolderUser, in.ID)
}

// RevokeHolder deletes the instance's holder and its binding: every token of it stops working
// (the API server checks on each request that the token's ServiceAccount, with its uid,
// exists). Already gone is fine.
func RevokeHolder(ctx context.Context, id string, admin kubernetes.Interface) error {
	var errs []error
	if err := admin.CoreV1().ServiceAccounts(HolderNamespace).Delete(ctx, HolderName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("revoking %s in instance %s: %w", HolderUser, id, err))
	}
	if err := admin.RbacV1().ClusterRoleBindings().Delete(ctx, holderBinding, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("revoking the binding of %s in instance %s: %w", HolderUser, id, err))
	}
	return errors.Join(errs...)
}
