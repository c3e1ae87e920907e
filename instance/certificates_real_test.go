package instance_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/worker"
)

// Certificates of a few minutes' validity on a real local instance: their expiry is recorded
// when the instance is Ready, the X509Valid gate refuses it when they expire too soon (and
// passes when they do not), and a re-issue in place gives it new certificates from the same CA
// while a per-lease kubeconfig issued before keeps working (a real request before and after).
func TestShortLivedCertificatesOnARealInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real control-plane processes; skipped with -short")
	}
	tools := local.DefaultToolsDir()
	if len(local.Tools{Dir: tools}.KubernetesVersions()) == 0 {
		t.Fatalf("no Kubernetes binaries in %s: run `make tools` (or set KOBE_TOOLS_DIR)", tools)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://:memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	b, err := local.New(local.Config{StateDir: t.TempDir(), HostID: "test-host", ToolsDir: tools})
	require.NoError(t, err)
	id := "certs"
	t.Cleanup(func() { _ = b.Delete(context.Background(), id) })
	spec := backends.InstanceSpec{ID: id, Pool: "short", KubernetesVersion: "v1.37.2", CertificateValidity: 3 * time.Minute}
	_, err = b.Create(ctx, spec)
	require.NoError(t, err)

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	acts := worker.NewActivities(st, zap.NewNop())
	acts.Backends["local"] = b
	acts.RegisterActivities(env)
	created := time.Now()
	_, err = env.ExecuteActivity("BackendWaitReady", instance.BackendRequest{Backend: "local", Spec: spec})
	require.NoError(t, err)

	rows, err := st.ListInstanceCertificates(ctx)
	require.NoError(t, err)
	require.Len(t, rows, 1, "recorded when the instance is Ready")
	first := rows[0]
	assert.Equal(t, "short", first.Pool)
	assert.WithinDuration(t, created.Add(3*time.Minute), first.Serving, time.Minute, "spec.certificates.validity")
	assert.WithinDuration(t, created.Add(3*time.Minute), first.Client, time.Minute)
	assert.True(t, first.CA.After(created.Add(365*24*time.Hour)), "the CA outlives its leaves, so that they can be re-issued from it")

	// X509Valid: refused at once when the certificates expire too soon, passed otherwise.
	_, err = env.ExecuteActivity("WaitReadinessGates", instance.GatesRequest{Backend: "local", InstanceID: id,
		Gates: []poolspec.ReadinessGate{{Type: "X509Valid", MinRemaining: "10m"}}, Deadline: time.Now().Add(2 * time.Minute)})
	nonRetryable(t, err, instance.ErrGatesNotPassed)
	assert.Contains(t, err.Error(), "X509Valid 10m")
	assert.Contains(t, err.Error(), "less than the 10m0s required")
	_, err = env.ExecuteActivity("WaitReadinessGates", instance.GatesRequest{Backend: "local", InstanceID: id,
		Gates: []poolspec.ReadinessGate{{Type: "X509Valid", MinRemaining: "1m"}}, Deadline: time.Now().Add(2 * time.Minute)})
	require.NoError(t, err)

	// A holder's kubeconfig, issued before the re-issue, with a real request.
	cred, err := b.Credentials(ctx, id, backends.CredentialRequest{User: "holder", TTL: time.Hour})
	require.NoError(t, err)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(cred.Kubeconfig)
	require.NoError(t, err)
	holder, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = holder.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	require.NoError(t, err, "the holder's kubeconfig works before")

	v, err := env.ExecuteActivity("CheckCertificates", instance.CertificatesRequest{Backend: "local", Pool: "short", InstanceIDs: []string{id}})
	require.NoError(t, err)
	var states []instance.CertificateState
	require.NoError(t, v.Get(&states))
	require.Len(t, states, 1)
	assert.True(t, states[0].CanReissue)
	assert.True(t, states[0].Expiry.Serving.Equal(first.Serving))

	v, err = env.ExecuteActivity("ReissueCertificates", instance.ReissueRequest{Backend: "local", Pool: "short", InstanceID: id,
		LeaseID: "lease-holder", Cause: "expiring"})
	require.NoError(t, err)
	var res instance.ReissueResult
	require.NoError(t, v.Get(&res))
	assert.True(t, res.Reissued)
	assert.True(t, res.Expiry.Serving.After(first.Serving), "new serving certificate: %s, was %s", res.Expiry.Serving, first.Serving)
	assert.True(t, res.Expiry.Client.After(first.Client), "new admin certificate")
	assert.True(t, res.Expiry.CA.Equal(first.CA), "the same CA")

	_, err = holder.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	require.NoError(t, err, "the holder's kubeconfig keeps working after the re-issue")
	rows, err = st.ListInstanceCertificates(ctx)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.True(t, rows[0].Serving.Equal(res.Expiry.Serving), "the new expiry is recorded")
	evs, err := st.ListEvents(ctx, store.EventFilter{Action: instance.ActionCertificatesReissued})
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, "ok", evs[0].Result)
	assert.Equal(t, id, evs[0].Target)

	// The wake path's call: certificates still valid for longer than asked are left alone.
	v, err = env.ExecuteActivity("ReissueCertificates", instance.ReissueRequest{Backend: "local", Pool: "short", InstanceID: id,
		Cause: "wake", MinRemaining: time.Minute})
	require.NoError(t, err)
	require.NoError(t, v.Get(&res))
	assert.False(t, res.Reissued)
}
