package testsuite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/testsuite"
)

func poolPolicy(t *testing.T, manifest string) poolspec.Policy {
	p, err := poolspec.Parse([]byte(manifest))
	require.NoError(t, err)
	pol, err := p.Validate()
	require.NoError(t, err)
	return pol
}

// poolStatus queries a pool; a query that fails (e.g. times out while the pool is busy) gives
// an empty status, which the callers' Eventually loops simply retry.
func poolStatus(t *testing.T, c client.Client, name string) pool.Status {
	var st pool.Status
	v, err := c.QueryWorkflow(context.Background(), pool.WorkflowID(name), "", pool.QueryPoolStatus)
	if err != nil {
		t.Logf("query pool %s: %v", name, err)
		return st
	}
	_ = v.Get(&st)
	return st
}

func leaseView(t *testing.T, c client.Client, id string) lease.View {
	var lv lease.View
	v, err := c.QueryWorkflow(context.Background(), id, "", lease.QueryLease)
	if err != nil {
		t.Logf("query lease %s: %v", id, err)
		return lv
	}
	_ = v.Get(&lv)
	return lv
}

// TestLeaseFromWarmPool: a warm pool of real local clusters; a lease binds at once with a
// kubeconfig that works with client-go; release tears the instance down (verified gone) and the
// pool refills to its size.
func TestLeaseFromWarmPool(t *testing.T) {
	if testing.Short() {
		t.Skip("real clusters; skipped with -short")
	}
	tmp := testsuite.StartTemporal(t)
	s := testsuite.NewStore(t, "sqlite")
	stateDir := t.TempDir()
	acts := testsuite.StartHostWorker(t, tmp.Client, "kobe", s, stateDir)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	pol := poolPolicy(t, `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: warm}
spec:
  size: 2
  ttl: 10m
  backend: {type: local}
  cluster: {version: v1.37.2}
`)
	_, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: pool.WorkflowID("warm"), TaskQueue: "kobe"},
		pool.WorkflowName, pool.Snapshot{Policy: pol})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return poolStatus(t, tmp.Client, "warm").Ready == 2 }, 3*time.Minute, 200*time.Millisecond)
	assert.Equal(t, api.PoolHealthy, poolStatus(t, tmp.Client, "warm").Phase)

	t0 := time.Now()
	run, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "lease-abc", TaskQueue: "kobe"},
		lease.WorkflowName, lease.Input{LeaseID: "lease-abc", Pool: "warm", Principal: "alice",
			LeaseTerms: poolspec.LeaseTerms{TTL: pol.TTL, MaxTTL: pol.MaxTTL, MaxExtensions: pol.MaxExtensions}})
	require.NoError(t, err)
	var lv lease.View
	require.Eventually(t, func() bool { lv = leaseView(t, tmp.Client, "lease-abc"); return lv.Phase == api.LeaseBound },
		time.Minute, 10*time.Millisecond)
	t.Logf("bound in %s to %s", time.Since(t0).Round(time.Millisecond), lv.InstanceID)

	// The kubeconfig is in the store, sealed; opened, it works.
	cred, err := s.GetLeaseCredential(ctx, "lease-abc")
	require.NoError(t, err)
	assert.NotContains(t, string(cred.Sealed), "client-key-data", "stored sealed")
	kc, err := acts.Secrets.Open(cred.Sealed, []byte("lease-abc"))
	require.NoError(t, err)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	row, err := s.GetLease(ctx, "lease-abc")
	require.NoError(t, err)
	assert.Equal(t, api.LeaseBound, row.Phase)

	// Extend within budget works; past the ceiling it is refused with the reason code.
	h, err := tmp.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: "lease-abc", UpdateName: lease.UpdateExtend,
		Args: []any{lease.ExtendRequest{By: 5 * time.Minute}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	var ext lease.ExtendResult
	require.NoError(t, h.Get(ctx, &ext))
	assert.WithinDuration(t, lv.ExpiresAt.Add(5*time.Minute), ext.ExpiresAt, time.Second)
	h, err = tmp.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: "lease-abc", UpdateName: lease.UpdateExtend,
		Args: []any{lease.ExtendRequest{By: 48 * time.Hour}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	reason, ok := lease.IsExtendRejection(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, api.ReasonMaxTTLCeiling, reason)

	// Release: revoked, torn down, verified gone; the pool refills.
	require.NoError(t, tmp.Client.SignalWorkflow(ctx, "lease-abc", "", lease.SignalReleaseLease, nil))
	require.NoError(t, run.Get(ctx, &lv))
	assert.Equal(t, api.LeaseReleased, lv.Phase)
	_, err = kube.CoreV1().Namespaces().Get(ctx, "mine", metav1.GetOptions{})
	assert.Error(t, err, "the credential no longer works")
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(stateDir, "local", "instances", lv.InstanceID))
		return os.IsNotExist(err)
	}, time.Minute, 100*time.Millisecond, "the released instance is gone")
	require.Eventually(t, func() bool {
		st := poolStatus(t, tmp.Client, "warm")
		return st.Ready == 2 && st.Leased == 0 && st.Deleting == 0
	}, 3*time.Minute, 200*time.Millisecond, "the pool refills")
	_, err = s.GetInstance(ctx, lv.InstanceID)
	assert.Error(t, err, "its store row is gone")
	row, err = s.GetLease(ctx, "lease-abc")
	require.NoError(t, err)
	assert.Equal(t, api.LeaseReleased, row.Phase)
	_, err = s.GetLeaseCredential(ctx, "lease-abc")
	assert.Error(t, err, "the sealed kubeconfig is forgotten")

	// A short TTL, left alone: it expires on the durable timer and its instance is torn down.
	run, err = tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "lease-short", TaskQueue: "kobe"},
		lease.WorkflowName, lease.Input{LeaseID: "lease-short", Pool: "warm", Principal: "bob",
			LeaseTerms: poolspec.LeaseTerms{TTL: 3 * time.Second, MaxTTL: pol.MaxTTL, MaxExtensions: pol.MaxExtensions}})
	require.NoError(t, err)
	require.NoError(t, run.Get(ctx, &lv))
	assert.Equal(t, api.LeaseExpired, lv.Phase)
	assert.Equal(t, 3*time.Second, lv.ExpiresAt.Sub(lv.BoundAt))
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(stateDir, "local", "instances", lv.InstanceID))
		return os.IsNotExist(err)
	}, time.Minute, 100*time.Millisecond, "the expired lease's instance is gone")
	row, err = s.GetLease(ctx, "lease-short")
	require.NoError(t, err)
	assert.Equal(t, api.LeaseExpired, row.Phase)
}
