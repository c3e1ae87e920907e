package leasecred

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/pki"
)

func TestCheck(t *testing.T) {
	assert.NoError(t, Check(backends.CredentialRequest{User: "lease-1", TTL: time.Hour}))
	assert.EqualError(t, Check(backends.CredentialRequest{User: "Lease_1", TTL: time.Hour}), `credential user "Lease_1": must be a DNS label`)
	assert.EqualError(t, Check(backends.CredentialRequest{User: "lease-1"}), "credential for lease-1: ttl must be positive")
	assert.Equal(t, "kobe-lease-lease-1", BindingName("lease-1"))
}

// authorizerWithLag is an instance's API whose RBAC authorizer sees a new binding only after
// it has been asked `lag` times since the binding was written: the watch that feeds a real API
// server's authorizer delivers the binding a moment after the write is answered.
func authorizerWithLag(lag int) (*fake.Clientset, *atomic.Bool) {
	admin := fake.NewClientset()
	var asked int
	var allowedAnswered atomic.Bool
	admin.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		_, err := admin.Tracker().Get(rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"), "", BindingName("lease-1"))
		if err == nil && review.Spec.User == UserPrefix+"lease-1" {
			asked++
			if lag >= 0 && asked > lag {
				review.Status.Allowed = true
				allowedAnswered.Store(true)
			}
		}
		return true, review, nil
	})
	return admin, &allowedAnswered
}

func TestACredentialIsHandedOutOnlyOnceTheAuthorizerAllowsIt(t *testing.T) {
	ca, err := pki.NewCA("test", time.Hour)
	require.NoError(t, err)
	admin, allowed := authorizerWithLag(3)
	cred, err := Issue(context.Background(), Instance{ID: "i-1", Server: "https://127.0.0.1:6443", ServerCA: ca.CertPEM, ClientCA: ca, Admin: admin},
		backends.CredentialRequest{User: "lease-1", TTL: time.Hour})
	require.NoError(t, err)
	assert.NotEmpty(t, cred.Kubeconfig)
	assert.True(t, allowed.Load(), "Issue returned a credential before the API server's authorizer allowed its user: its first requests would be refused (403)")
}

func TestACredentialNeverAuthorizedIsAnError(t *testing.T) {
	defer func(w, e time.Duration) { authorizedWithin, authorizedEvery = w, e }(authorizedWithin, authorizedEvery)
	authorizedWithin, authorizedEvery = 300*time.Millisecond, 20*time.Millisecond
	ca, err := pki.NewCA("test", time.Hour)
	require.NoError(t, err)
	admin, _ := authorizerWithLag(-1)
	cred, err := Issue(context.Background(), Instance{ID: "i-1", Server: "https://127.0.0.1:6443", ServerCA: ca.CertPEM, ClientCA: ca, Admin: admin},
		backends.CredentialRequest{User: "lease-1", TTL: time.Hour})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "binding kobe:lease:lease-1 in instance i-1: the API server does not authorize it within 300ms")
	assert.Empty(t, cred.Kubeconfig)
}

// failingReviews is an API server whose SubjectAccessReviews fail, listing the authorization
// API (a real server having trouble) or not (Cluster API's in-memory test provider: 500).
func failingReviews(listed bool) *fake.Clientset {
	admin := fake.NewClientset()
	if listed {
		admin.Resources = []*metav1.APIResourceList{{GroupVersion: "authorization.k8s.io/v1",
			APIResources: []metav1.APIResource{{Name: "subjectaccessreviews", Kind: "SubjectAccessReview", Verbs: []string{"create"}}}}}
	}
	admin.PrependReactor("create", "subjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("resource subjectaccessreviews is not defined"))
	})
	return admin
}

func TestAServerWithoutTheAuthorizationAPIIsNotWaitedFor(t *testing.T) {
	ca, err := pki.NewCA("test", time.Hour)
	require.NoError(t, err)
	cred, err := Issue(context.Background(), Instance{ID: "i-1", Server: "https://127.0.0.1:6443", ServerCA: ca.CertPEM, ClientCA: ca, Admin: failingReviews(false)},
		backends.CredentialRequest{User: "lease-1", TTL: time.Hour})
	require.NoError(t, err)
	assert.NotEmpty(t, cred.Kubeconfig)
}

func TestAServerWhoseAccessReviewsFailIsWaitedForAndThenAnError(t *testing.T) {
	defer func(w, e time.Duration) { authorizedWithin, authorizedEvery = w, e }(authorizedWithin, authorizedEvery)
	authorizedWithin, authorizedEvery = 300*time.Millisecond, 20*time.Millisecond
	ca, err := pki.NewCA("test", time.Hour)
	require.NoError(t, err)
	cred, err := Issue(context.Background(), Instance{ID: "i-1", Server: "https://127.0.0.1:6443", ServerCA: ca.CertPEM, ClientCA: ca, Admin: failingReviews(true)},
		backends.CredentialRequest{User: "lease-1", TTL: time.Hour})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not authorize it within 300ms (last answer: Internal error occurred: resource subjectaccessreviews is not defined)")
	assert.Empty(t, cred.Kubeconfig)
}
