package leasecred

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// holderAPI is an instance's API that allows the holder once its binding exists and answers a
// token request with a token naming the ServiceAccount's uid at the time.
func holderAPI(objects ...runtime.Object) *fake.Clientset {
	admin := fake.NewClientset(objects...)
	admin.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		_, err := admin.Tracker().Get(rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"), "", holderBinding)
		review.Status.Allowed = err == nil && review.Spec.User == HolderUser
		return true, review, nil
	})
	admin.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "token" {
			obj, err := admin.Tracker().Get(corev1.SchemeGroupVersion.WithResource("serviceaccounts"), HolderNamespace, HolderName)
			if err != nil {
				return true, nil, err
			}
			sa := obj.(*corev1.ServiceAccount)
			tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest).DeepCopy()
			tr.Status.Token = "token-of-" + string(sa.UID)
			tr.Status.ExpirationTimestamp = metav1.NewTime(time.Now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))
			return true, tr, nil
		}
		// The fake tracker gives no uid: a real API server gives each object its own.
		sa := a.(k8stesting.CreateAction).GetObject().(*corev1.ServiceAccount)
		if sa.UID != "" {
			return false, nil, nil
		}
		sa.UID = types.UID("uid-" + sa.Annotations[instanceAnnotation] + "-" + time.Now().Format("150405.000000000"))
		return false, nil, nil
	})
	return admin
}

func TestPrepareMakesTheHolderAndATokenOfIt(t *testing.T) {
	ctx := context.Background()
	admin := holderAPI()
	p, err := Prepare(ctx, Instance{ID: "i-1", Server: "https://10.0.0.1:6443", ServerCA: []byte("ca"), Admin: admin})
	require.NoError(t, err)
	sa, err := admin.CoreV1().ServiceAccounts(HolderNamespace).Get(ctx, HolderName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "i-1", sa.Annotations[instanceAnnotation])
	assert.Equal(t, "token-of-"+string(sa.UID), p.Token)
	assert.Equal(t, string(sa.UID), p.TokenID)
	assert.Equal(t, HolderUser, p.User)
	assert.Equal(t, "https://10.0.0.1:6443", p.Server)
	assert.WithinDuration(t, time.Now().Add(HolderTokenLifetime), p.ExpiresAt, time.Minute)
	binding, err := admin.RbacV1().ClusterRoleBindings().Get(ctx, holderBinding, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "cluster-admin", binding.RoleRef.Name)
	assert.Equal(t, HolderName, binding.Subjects[0].Name)

	again, err := Prepare(ctx, Instance{ID: "i-1", Admin: admin})
	require.NoError(t, err)
	assert.Equal(t, p.TokenID, again.TokenID, "preparing again keeps the holder (its first token stays valid)")
}

// A member restored from a golden image carries its builder's holder: it gets a new one (a new
// uid), so that no token of the builder's, or of a sibling's, works in it.
func TestPrepareReplacesAnotherInstancesHolder(t *testing.T) {
	ctx := context.Background()
	builders := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: HolderName, Namespace: HolderNamespace, UID: "uid-builder",
		Annotations: map[string]string{instanceAnnotation: "gold-builder"}}}
	admin := holderAPI(builders)
	p, err := Prepare(ctx, Instance{ID: "i-2", Admin: admin})
	require.NoError(t, err)
	assert.NotEqual(t, "uid-builder", p.TokenID)
	sa, err := admin.CoreV1().ServiceAccounts(HolderNamespace).Get(ctx, HolderName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "i-2", sa.Annotations[instanceAnnotation])
}

func TestRevokeHolderTakesTheHolderAndItsBinding(t *testing.T) {
	ctx := context.Background()
	admin := holderAPI()
	_, err := Prepare(ctx, Instance{ID: "i-1", Admin: admin})
	require.NoError(t, err)
	require.NoError(t, RevokeHolder(ctx, "i-1", admin))
	require.NoError(t, RevokeHolder(ctx, "i-1", admin), "already gone is fine")
	_, err = admin.CoreV1().ServiceAccounts(HolderNamespace).Get(ctx, HolderName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
	_, err = admin.RbacV1().ClusterRoleBindings().Get(ctx, holderBinding, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
}
