package testsuite_test

import (
	"context"
	"errors"
	"github.com/kunobi-ninja/kobe/poolspec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/worker"
)

// TestWarmMembersRecycledBeforeCertificatesExpire: real local clusters whose certificates last
// 10 minutes, in a pool that recycles members whose certificates expire within 9m50s: every
// member is due ten seconds after it is made. The certificate workflow's Schedule is created
// and triggered (as a worker does at start); its sweep reaches the pool, which tears its warm
// members down (gone from the backend), replaces them with new instances until it is back to
// its size, and re-issues the leased member's certificates in place instead (same instance,
// same CA, later expiry; the holder's kubeconfig keeps working).
func TestWarmMembersRecycledBeforeCertificatesExpire(t *testing.T) {
	if testing.Short() {
		t.Skip("real clusters; skipped with -short")
	}
	tmp := testsuite.StartTemporal(t)
	s := testsuite.NewStore(t, "sqlite")
	acts := testsuite.StartHostWorker(t, tmp.Client, "kobe", s, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	manifest := `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: recycled}
spec:
  ttl: 20m
  backend: {type: local, local: {components: [apiserver]}}
  cluster: {version: v1.37.2}
  scaling: {minReady: 2, maxClusters: 4}
  certificates: {validity: 10m, recycleBefore: 590s}
`
	pol := poolPolicy(t, manifest)
	// The sweep asks the pools of the store.
	require.NoError(t, s.UpsertPool(ctx, store.Pool{Name: "recycled", Backend: "local", Spec: []byte(`{}`)}))
	_, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: pool.WorkflowID("recycled"), TaskQueue: "kobe"},
		pool.WorkflowName, pool.Snapshot{Policy: pol})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return poolStatus(t, tmp.Client, "recycled").Ready == 2 }, 4*time.Minute, 200*time.Millisecond)

	const leaseID = "lease-recycled"
	_, err = tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: leaseID, TaskQueue: "kobe"},
		lease.WorkflowName, lease.Input{LeaseID: leaseID, Pool: "recycled", Principal: "alice",
			LeaseTerms: poolspec.LeaseTerms{TTL: pol.TTL, MaxTTL: pol.MaxTTL}})
	require.NoError(t, err)
	var lv lease.View
	require.Eventually(t, func() bool { lv = leaseView(t, tmp.Client, leaseID); return lv.Phase == api.LeaseBound }, 2*time.Minute, 20*time.Millisecond)
	leased := lv.InstanceID
	holder := leaseKube(t, s, acts, leaseID)

	// Back to its size, with a member leased.
	var warm []string
	require.Eventually(t, func() bool {
		st := poolStatus(t, tmp.Client, "recycled")
		warm = membersIn(st, pool.MemberReady)
		return len(warm) == 2 && st.Leased == 1 && st.Creating == 0
	}, 4*time.Minute, 200*time.Millisecond)
	before := certificatesOf(t, s, leased)
	// Every member is due once its certificates have less than recycleBefore left.
	for _, id := range append([]string{leased}, warm...) {
		due := certificatesOf(t, s, id).Serving.Add(-pol.RecycleBefore)
		time.Sleep(time.Until(due) + time.Second)
	}

	require.NoError(t, pool.EnsureCertificateSchedule(ctx, tmp.Client, "kobe"))

	// The warm members are torn down and gone from the backend; new ones take their place.
	local := acts.Backends["local"]
	require.Eventually(t, func() bool {
		for _, id := range warm {
			if _, err := local.Status(ctx, id); !errors.Is(err, backends.ErrNotFound) {
				return false
			}
		}
		return true
	}, 4*time.Minute, 200*time.Millisecond, "the due warm members %v are deleted", warm)
	var fresh []string
	require.Eventually(t, func() bool {
		st := poolStatus(t, tmp.Client, "recycled")
		fresh = membersIn(st, pool.MemberReady)
		return len(fresh) == 2 && st.Leased == 1 && st.Creating == 0 && st.Deleting == 0
	}, 4*time.Minute, 200*time.Millisecond, "the pool gets back to its size")
	for _, id := range fresh {
		assert.NotContains(t, warm, id, "a replacement is a new instance")
		assert.NotEqual(t, leased, id)
	}
	for _, id := range warm {
		events, err := s.ListEvents(ctx, store.EventFilter{Action: instance.ActionCertificatesExpiring, Target: id})
		require.NoError(t, err)
		require.Len(t, events, 1, "the recycle of %s is audited", id)
		assert.Contains(t, string(events[0].Detail), `"decision":"recycled"`)
	}

	// The leased member is the same instance, with new certificates from the same CA.
	var reissued []store.Event
	require.Eventually(t, func() bool {
		reissued, err = s.ListEvents(ctx, store.EventFilter{Action: instance.ActionCertificatesReissued, Target: leased})
		return err == nil && len(reissued) == 1
	}, 3*time.Minute, 200*time.Millisecond, "the leased member's certificates are re-issued")
	assert.Equal(t, "ok", reissued[0].Result)
	assert.Contains(t, string(reissued[0].Detail), `"cause":"expiring"`)
	after := certificatesOf(t, s, leased)
	assert.True(t, after.Serving.After(before.Serving), "new serving certificate: %s, was %s", after.Serving, before.Serving)
	assert.True(t, after.CA.Equal(before.CA), "the same CA")
	lv = leaseView(t, tmp.Client, leaseID)
	assert.Equal(t, leased, lv.InstanceID)
	assert.Equal(t, api.LeaseBound, lv.Phase)
	_, err = holder.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	require.NoError(t, err, "the holder's kubeconfig keeps working after the re-issue")

	require.NoError(t, tmp.Client.SignalWorkflow(ctx, leaseID, "", lease.SignalReleaseLease, nil))
	require.NoError(t, tmp.Client.GetWorkflow(ctx, leaseID, "").Get(ctx, &lv))
}

// leaseKube is a client of the lease's cluster with the lease's own kubeconfig (sealed in the
// store; the worker's secret box opens it).
func leaseKube(t *testing.T, s store.Store, acts *worker.Activities, leaseID string) *kubernetes.Clientset {
	t.Helper()
	cred, err := s.GetLeaseCredential(context.Background(), leaseID)
	require.NoError(t, err)
	kc, err := acts.Secrets.Open(cred.Sealed, []byte(leaseID))
	require.NoError(t, err)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	require.NoError(t, err)
	cfg.Timeout = 10 * time.Second
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return kube
}

func membersIn(st pool.Status, phase pool.MemberPhase) []string {
	var ids []string
	for _, m := range st.Members {
		if m.Phase == phase {
			ids = append(ids, m.ID)
		}
	}
	return ids
}
