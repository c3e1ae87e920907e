// Package conformance is the suite every runtime backend must pass (contract v1). A backend's
// own test calls Run with a way to build the backend and a valid spec; the suite drives the real
// backend and a real Kubernetes client against what it creates.
package conformance

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/leasecred"
)

// Subject describes the backend under test.
type Subject struct {
	Backend backends.RuntimeBackend
	// Spec returns a valid spec for a new instance with the given id.
	Spec func(id string) backends.InstanceSpec
	// InvalidSpecs are specs Create must refuse without side effects.
	InvalidSpecs []backends.InstanceSpec
	// ReadyWithin bounds create → ready.
	ReadyWithin time.Duration
	// Leftovers reports anything of the instance that remains after Delete (processes, ports,
	// files, objects in a host cluster); nil means the backend's own Delete verification suffices.
	Leftovers func(id string) error
	// Unserved names the steps this backend's clusters cannot serve, with why (e.g. a fake
	// workload API server that does not authenticate cannot reject a revoked credential). Those
	// steps are skipped with that message, so the output says what was not proven.
	Unserved map[string]string
}

// Steps that a backend may declare Unserved.
const (
	StepRevokedCredentialRejected = "a revoked per-lease credential is rejected"
	StepExpiredCredentialRejected = "per-lease credentials are rejected after expiry"
	StepPreparedCredential        = "a prepared lease credential is the holder alone, signs nothing, and is rejected once revoked"
)

func skipUnserved(t *testing.T, s Subject, step string) {
	if why, ok := s.Unserved[step]; ok {
		t.Skipf("%s cannot serve this step: %s", s.Backend.Name(), why)
	}
}

// Run runs the whole suite. Instances are named conf-<n>-<suffix> and deleted at the end.
func Run(t *testing.T, s Subject) {
	if s.ReadyWithin == 0 {
		s.ReadyWithin = 2 * time.Minute
	}
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000)
	id := "conf-" + suffix
	ctx := context.Background()
	t.Cleanup(func() { _ = s.Backend.Delete(context.Background(), id) })

	t.Run("invalid specs are refused without side effects", func(t *testing.T) {
		for _, spec := range s.InvalidSpecs {
			_, err := s.Backend.Create(ctx, spec)
			assert.Error(t, err, "spec %+v", spec)
			_, err = s.Backend.Status(ctx, spec.ID)
			assert.ErrorIs(t, err, backends.ErrNotFound, "a refused spec leaves no instance")
		}
	})

	var created backends.InstanceStatus
	t.Run("create then ready within the deadline", func(t *testing.T) {
		t0 := time.Now()
		st, err := s.Backend.Create(ctx, s.Spec(id))
		require.NoError(t, err)
		assert.Equal(t, id, st.ID)
		wctx, cancel := context.WithTimeout(ctx, s.ReadyWithin)
		defer cancel()
		progressed := 0
		st, err = s.Backend.WaitReady(wctx, id, func(backends.InstanceStatus) { progressed++ })
		require.NoError(t, err)
		require.Equal(t, backends.PhaseReady, st.Phase)
		require.NotEmpty(t, st.Endpoint)
		created = st
		t.Logf("%s ready in %s at %s", id, time.Since(t0).Round(time.Millisecond), st.Endpoint)
	})
	if t.Failed() {
		return
	}

	admin := clientFor(t, s.Backend, id, backends.CredentialRequest{})
	t.Run("admin kubeconfig works", func(t *testing.T) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "conformance"}}
		_, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		require.NoError(t, err)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Data: map[string]string{"kobe": "conformance"}}
		_, err = admin.CoreV1().ConfigMaps("conformance").Create(ctx, cm, metav1.CreateOptions{})
		require.NoError(t, err)
		got, err := admin.CoreV1().ConfigMaps("conformance").Get(ctx, "probe", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "conformance", got.Data["kobe"])
	})

	var leaseA *kubernetes.Clientset
	t.Run("per-lease credentials work and can be revoked", func(t *testing.T) {
		cred, err := s.Backend.Credentials(ctx, id, backends.CredentialRequest{User: "lease-a-" + suffix, TTL: time.Hour})
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now().Add(time.Hour), cred.ExpiresAt, 2*time.Minute, "expiry = lease TTL")
		assert.NotEmpty(t, cred.ID)
		c := clientFromKubeconfig(t, cred.Kubeconfig)
		_, err = c.CoreV1().ConfigMaps("conformance").Get(ctx, "probe", metav1.GetOptions{})
		require.NoError(t, err)

		require.NoError(t, s.Backend.RevokeCredentials(ctx, id, "lease-a-"+suffix))
		require.NoError(t, s.Backend.RevokeCredentials(ctx, id, "lease-a-"+suffix), "revoking twice is fine")
		leaseA = c
	})

	t.Run(StepRevokedCredentialRejected, func(t *testing.T) {
		skipUnserved(t, s, StepRevokedCredentialRejected)
		require.NotNil(t, leaseA, "the credential of the step before")
		require.Eventually(t, func() bool {
			_, err := leaseA.CoreV1().ConfigMaps("conformance").Get(ctx, "probe", metav1.GetOptions{})
			return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
		}, 30*time.Second, 100*time.Millisecond, "a revoked credential is rejected")
	})

	t.Run(StepExpiredCredentialRejected, func(t *testing.T) {
		skipUnserved(t, s, StepExpiredCredentialRejected)
		cred, err := s.Backend.Credentials(ctx, id, backends.CredentialRequest{User: "lease-b-" + suffix, TTL: 3 * time.Second})
		require.NoError(t, err)
		c := clientFromKubeconfig(t, cred.Kubeconfig)
		_, err = c.CoreV1().Namespaces().Get(ctx, "conformance", metav1.GetOptions{})
		require.NoError(t, err, "valid before expiry")
		time.Sleep(time.Until(cred.ExpiresAt) + time.Second)
		_, err = c.CoreV1().Namespaces().Get(ctx, "conformance", metav1.GetOptions{})
		require.Error(t, err)
		assert.True(t, apierrors.IsUnauthorized(err) || strings.Contains(err.Error(), "certificate"), "expired: %v", err)
	})

	if p, ok := s.Backend.(backends.LeasePreparer); ok {
		t.Run(StepPreparedCredential, func(t *testing.T) {
			skipUnserved(t, s, StepPreparedCredential)
			preparedCredentialStep(t, s.Backend, p, id, suffix)
		})
	}

	t.Run("create is idempotent", func(t *testing.T) {
		st, err := s.Backend.Create(ctx, s.Spec(id))
		require.NoError(t, err)
		assert.Equal(t, created.Endpoint, st.Endpoint, "the same id yields the same instance")
		assert.True(t, created.CreatedAt.Equal(st.CreatedAt))
		_, err = admin.CoreV1().ConfigMaps("conformance").Get(ctx, "probe", metav1.GetOptions{})
		require.NoError(t, err, "and does not disturb it")
	})

	if sl, ok := s.Backend.(backends.Sleeper); ok {
		t.Run("sleep keeps data, resume serves it again", func(t *testing.T) {
			err := sl.Sleep(ctx, id)
			if errors.Is(err, backends.ErrSleepRefused) {
				// This spec's state would not survive a sleep: the refusal changes nothing.
				st, serr := s.Backend.Status(ctx, id)
				require.NoError(t, serr)
				assert.Equal(t, backends.PhaseReady, st.Phase, "a refused sleep leaves the instance serving")
				_, gerr := admin.CoreV1().ConfigMaps("conformance").Get(ctx, "probe", metav1.GetOptions{})
				require.NoError(t, gerr)
				t.Skipf("%s refuses to sleep this spec (checked: nothing changed): %v", s.Backend.Name(), err)
			}
			require.NoError(t, err)
			st, err := s.Backend.Status(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, backends.PhaseSleeping, st.Phase)
			_, err = admin.CoreV1().Namespaces().Get(ctx, "conformance", metav1.GetOptions{})
			assert.Error(t, err, "a sleeping instance does not serve")
			require.NoError(t, sl.Resume(ctx, id))
			wctx, cancel := context.WithTimeout(ctx, s.ReadyWithin)
			defer cancel()
			_, err = s.Backend.WaitReady(wctx, id, nil)
			require.NoError(t, err)
			got, err := admin.CoreV1().ConfigMaps("conformance").Get(ctx, "probe", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, "conformance", got.Data["kobe"])
		})
	}

	if fr, ok := s.Backend.(backends.Freezer); ok {
		t.Run("freeze stops the instance in place, thaw serves it again", func(t *testing.T) {
			err := fr.Freeze(ctx, id)
			if errors.Is(err, backends.ErrUnavailableHere) {
				t.Skipf("%s cannot freeze on this host: %v", s.Backend.Name(), err)
			}
			require.NoError(t, err)
			st, err := s.Backend.Status(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, backends.PhaseFrozen, st.Phase)
			require.NoError(t, fr.Freeze(ctx, id), "freezing a frozen instance succeeds")
			require.NoError(t, fr.Thaw(ctx, id))
			require.NoError(t, fr.Thaw(ctx, id), "thawing a running instance succeeds")
			st, err = s.Backend.Status(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, backends.PhaseReady, st.Phase)
			got, err := admin.CoreV1().ConfigMaps("conformance").Get(ctx, "probe", metav1.GetOptions{})
			require.NoError(t, err, "thawed, it serves its data")
			assert.Equal(t, "conformance", got.Data["kobe"])
		})
	}

	if cm, ok := s.Backend.(backends.CertManager); ok {
		t.Run("certificates: expiry known, rotation keeps the cluster and its credentials", func(t *testing.T) {
			exp, err := cm.CertificatesExpireAt(ctx, id)
			require.NoError(t, err)
			assert.True(t, exp.After(time.Now().Add(time.Hour)))
			require.NoError(t, cm.RotateCertificates(ctx, id))
			wctx, cancel := context.WithTimeout(ctx, s.ReadyWithin)
			defer cancel()
			_, err = s.Backend.WaitReady(wctx, id, nil)
			require.NoError(t, err)
			_, err = admin.CoreV1().ConfigMaps("conformance").Get(ctx, "probe", metav1.GetOptions{})
			require.NoError(t, err, "kubeconfigs issued before the rotation still work (same CA)")
		})
	}

	t.Run("delete leaves nothing, twice is fine", func(t *testing.T) {
		require.NoError(t, s.Backend.Delete(ctx, id))
		_, err := s.Backend.Status(ctx, id)
		assert.True(t, errors.Is(err, backends.ErrNotFound), "status after delete: %v", err)
		_, err = admin.CoreV1().Namespaces().Get(ctx, "conformance", metav1.GetOptions{})
		assert.Error(t, err, "the API server is gone")
		if s.Leftovers != nil {
			assert.NoError(t, s.Leftovers(id))
		}
		require.NoError(t, s.Backend.Delete(ctx, id))
		_, err = s.Backend.Credentials(ctx, id, backends.CredentialRequest{})
		assert.ErrorIs(t, err, backends.ErrNotFound)
	})
}

// preparedCredentialStep: what a LeasePreparer prepares is stored (sealed) in kobe's database
// and read by the API servers, so it must be worth as little as possible if it leaks: one
// identity in one instance, which kobe can take back. A signing key the instance trusts would
// be worth much more: a certificate for group system:masters, which no RBAC rule binds and so
// no revocation takes away.
func preparedCredentialStep(t *testing.T, b backends.RuntimeBackend, p backends.LeasePreparer, id, suffix string) {
	ctx := context.Background()
	prepared, err := p.PrepareLeaseCredentials(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, privateKeysIn(t, prepared), "a prepared credential carries no key that can sign")

	leaseID := "lease-p-" + suffix
	cred, err := leasecred.Mint(prepared, leaseID, time.Now().Add(time.Hour))
	require.NoError(t, err)
	holder := clientFromKubeconfig(t, cred.Kubeconfig)
	got, err := holder.CoreV1().ConfigMaps("conformance").Get(ctx, "probe", metav1.GetOptions{})
	require.NoError(t, err, "the holder reads what the admin wrote")
	assert.Equal(t, "conformance", got.Data["kobe"])
	_, err = holder.CoreV1().ConfigMaps("conformance").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "holder"}}, metav1.CreateOptions{})
	require.NoError(t, err, "and writes")
	who, err := holder.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.NotContains(t, who.Status.UserInfo.Groups, "system:masters", "the holder is bound by RBAC, so revoking it takes its access away")
	t.Logf("a warm-bound lease of %s is %s in %v", id, who.Status.UserInfo.Username, who.Status.UserInfo.Groups)

	again, err := p.PrepareLeaseCredentials(ctx, id)
	require.NoError(t, err, "preparing again is fine")
	_, err = holder.CoreV1().Namespaces().Get(ctx, "conformance", metav1.GetOptions{})
	require.NoError(t, err, "and keeps the first credential working")

	second, err := leasecred.Mint(again, leaseID, time.Now().Add(time.Hour))
	require.NoError(t, err)

	require.NoError(t, b.RevokeCredentials(ctx, id, leaseID))
	require.NoError(t, b.RevokeCredentials(ctx, id, leaseID), "revoking twice is fine")
	for name, c := range map[string]*kubernetes.Clientset{"first": holder, "second": clientFromKubeconfig(t, second.Kubeconfig)} {
		require.Eventually(t, func() bool {
			_, err := c.CoreV1().ConfigMaps("conformance").Get(ctx, "probe", metav1.GetOptions{})
			return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
		}, 30*time.Second, 100*time.Millisecond, "the %s prepared credential is rejected once revoked", name)
	}
}

// privateKeysIn names the fields of v's JSON (what kobe seals and stores) that hold a private
// key, as text or as base64 (how JSON carries bytes).
func privateKeysIn(t *testing.T, v any) []string {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(raw, &fields))
	var found []string
	for name, value := range fields {
		text, ok := value.(string)
		if !ok {
			continue
		}
		decoded, _ := base64.StdEncoding.DecodeString(text)
		if strings.Contains(text, "PRIVATE KEY") || strings.Contains(string(decoded), "PRIVATE KEY") {
			found = append(found, name)
		}
	}
	return found
}

func clientFor(t *testing.T, b backends.RuntimeBackend, id string, req backends.CredentialRequest) *kubernetes.Clientset {
	t.Helper()
	cred, err := b.Credentials(context.Background(), id, req)
	require.NoError(t, err)
	return clientFromKubeconfig(t, cred.Kubeconfig)
}

func clientFromKubeconfig(t *testing.T, kc []byte) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	require.NoError(t, err)
	cfg.Timeout = 10 * time.Second
	// A fresh connection per client: an expired or revoked credential must not ride on a
	// connection established while it was valid.
	cfg.DisableCompression = true
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}
