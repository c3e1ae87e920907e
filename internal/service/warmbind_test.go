package service_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// A warm bind on `kobe dev` with real local clusters (issue 15): once the pool has a Ready
// member, POST /v1/leases answers 200 Bound with a kubeconfig in the body, at once; the
// kubeconfig works and is the instance's holder, kube-system/kobe-lease-holder; the lease has its own
// workflow history; a retried POST replays the same lease and kubeconfig; release revokes it.
func TestWarmBindOnDev(t *testing.T) {
	if testing.Short() {
		t.Skip("real clusters; skipped with -short")
	}
	c := devConfig(t)
	c.NoDefaultPool = false
	p := start(t, c, config.ModeDev)
	token, err := os.ReadFile(p.AdminTokenFile)
	require.NoError(t, err)
	admin := apiCaller{t, p.APIURL, strings.TrimSpace(string(token))}

	// Wait for a Ready member whose lease credential is prepared.
	require.Eventually(t, func() bool {
		resp, err := p.Temporal.QueryWorkflow(context.Background(), pool.WorkflowID("dev"), "", pool.QueryPoolStatus)
		if err != nil {
			return false
		}
		var st pool.Status
		return resp.Get(&st) == nil && st.Ready > 0
	}, 3*time.Minute, 200*time.Millisecond, "the dev pool has a Ready member")

	var l api.Lease
	req := `{"profile":"dev","ttl":"30m","idempotencyKey":"warm-1"}`
	status, eb, _ := admin.do("POST", "/v1/leases", req, &l)
	require.Equal(t, 200, status, "a warm bind answers 200 at once: %+v", eb)
	require.Equal(t, api.LeaseBound, l.Phase)
	require.NotEmpty(t, l.Kubeconfig, "the kubeconfig is in the POST's answer")
	require.NotEmpty(t, l.ClusterName)
	require.NotNil(t, l.BoundAt)
	require.NotNil(t, l.ExpiresAt)
	assert.WithinDuration(t, l.BoundAt.Add(30*time.Minute), *l.ExpiresAt, time.Second)

	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(l.Kubeconfig))
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Works at once: the grant was prepared and honoured before the member was Ready.
	_, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "the warm-bound kubeconfig works on its first request")
	who, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The instance's one holder, prepared before any lease claimed it: bound by RBAC (so the
	// release takes it back), never system:masters.
	assert.Equal(t, "system:serviceaccount:kube-system:kobe-lease-holder", who.Status.UserInfo.Username, "the instance's holder")
	assert.NotContains(t, who.Status.UserInfo.Groups, "system:masters")

	// Its credential says it lives no longer than the lease can (bind + maxTtl).
	cred, err := p.Store.GetLeaseCredential(ctx, l.ID)
	require.NoError(t, err)
	pol := leaseCeiling(t, p.Store, "dev")
	assert.False(t, cred.ExpiresAt.After(l.BoundAt.Add(pol)), "credential expires %s, after bind+maxTtl %s", cred.ExpiresAt, l.BoundAt.Add(pol))

	// The lease has its own workflow, started by the pool, and it is Bound.
	var got api.Lease
	status, _, _ = admin.do("GET", "/v1/leases/"+l.ID, nil, &got)
	require.Equal(t, 200, status)
	assert.Equal(t, api.LeaseBound, got.Phase)
	assert.Equal(t, l.Kubeconfig, got.Kubeconfig, "GET gives the kubeconfig the POST gave")
	// The pool starts it in the step it binds; the start may land a moment after the answer.
	var desc *workflowservice.DescribeWorkflowExecutionResponse
	require.Eventually(t, func() bool {
		desc, err = p.Temporal.DescribeWorkflowExecution(ctx, l.ID, "")
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the lease's workflow exists: %v", err)
	assert.Equal(t, pool.WorkflowID("dev"), desc.WorkflowExecutionInfo.GetParentExecution().GetWorkflowId(), "the pool started the lease")

	// A retried POST (same idempotency key) replays the same bound lease and kubeconfig.
	var again api.Lease
	status, _, _ = admin.do("POST", "/v1/leases", req, &again)
	require.Equal(t, 200, status)
	assert.Equal(t, l.ID, again.ID)
	assert.Equal(t, api.LeaseBound, again.Phase)
	assert.Equal(t, l.Kubeconfig, again.Kubeconfig)

	// Extend within the ceiling: no new credential is needed, the same one keeps working.
	status, _, _ = admin.do("PATCH", "/v1/leases/"+l.ID, `{"extendTtl":"5m"}`, nil)
	require.Equal(t, 200, status)

	// Release revokes: the kubeconfig stops working, and the audit log has one lease.bound.
	status, _, _ = admin.do("DELETE", "/v1/leases/"+l.ID, nil, nil)
	require.Equal(t, 204, status)
	require.Eventually(t, func() bool {
		_, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		return err != nil && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || !strings.Contains(err.Error(), "context"))
	}, time.Minute, 100*time.Millisecond, "the released lease's kubeconfig is refused")
	var audit api.AuditList
	require.Eventually(t, func() bool {
		admin.do("GET", "/v1/audit?pool=dev", nil, &audit)
		n, released := 0, false
		for _, e := range audit.Items {
			if e.Target == l.ID && e.Action == "lease.bound" {
				n++
			}
			released = released || (e.Target == l.ID && e.Action == "lease.released")
		}
		return n == 1 && released
	}, time.Minute, 200*time.Millisecond, "one lease.bound and a lease.released: %+v", audit.Items)
}

// A lease released, extended or heartbeated the moment its warm bind was answered, before its
// pool has started its workflow, is not lost (found by the bench: the release signal found no
// workflow, and the lease then held its cluster for its whole TTL).
func TestWarmBoundLeaseReleasedAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("real clusters; skipped with -short")
	}
	c := devConfig(t)
	c.NoDefaultPool = false
	p := start(t, c, config.ModeDev)
	token, err := os.ReadFile(p.AdminTokenFile)
	require.NoError(t, err)
	admin := apiCaller{t, p.APIURL, strings.TrimSpace(string(token))}
	for round := range 3 {
		var st pool.Status
		require.Eventually(t, func() bool {
			resp, err := p.Temporal.QueryWorkflow(context.Background(), pool.WorkflowID("dev"), "", pool.QueryPoolStatus)
			st = pool.Status{}
			return err == nil && resp.Get(&st) == nil && st.Ready > 0 && st.Leased == 0
		}, 3*time.Minute, 50*time.Millisecond, "round %d: a Ready member and none leased: %+v", round, &st)
		var l api.Lease
		status, eb, _ := admin.do("POST", "/v1/leases", `{"profile":"dev","ttl":"30m"}`, &l)
		require.Equal(t, 200, status, "%+v", eb)
		require.Equal(t, api.LeaseBound, l.Phase)
		// At once: extend, heartbeat, release.
		status, eb, _ = admin.do("PATCH", "/v1/leases/"+l.ID, `{"extendTtl":"1m"}`, nil)
		require.Equal(t, 200, status, "round %d: extend at once: %+v", round, eb)
		status, eb, _ = admin.do("POST", "/v1/leases/"+l.ID+"/heartbeat", nil, nil)
		require.Equal(t, 204, status, "round %d: heartbeat at once: %+v", round, eb)
		status, _, _ = admin.do("DELETE", "/v1/leases/"+l.ID, nil, nil)
		require.Equal(t, 204, status)
		require.Eventually(t, func() bool {
			var got api.Lease
			admin.do("GET", "/v1/leases/"+l.ID, nil, &got)
			return got.Phase == api.LeaseReleased
		}, time.Minute, 50*time.Millisecond, "round %d: the lease released at once ends Released", round)
	}
}

// leaseCeiling is the pool's maxTtl as stored.
func leaseCeiling(t *testing.T, st store.Store, name string) time.Duration {
	t.Helper()
	p, err := st.GetPool(context.Background(), name)
	require.NoError(t, err)
	m, err := poolspec.Parse(p.Spec)
	require.NoError(t, err)
	pol, err := m.ValidateStored()
	require.NoError(t, err)
	return pol.MaxTTL
}
