package poolresource

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/resources/v1alpha1"
)

func TestDecide(t *testing.T) {
	const name = "ci"
	ours := ManagedBy(name)
	for _, tc := range []struct {
		what string
		o    observed
		want action
	}{
		{"a new resource gets the finalizer before anything else", observed{Generation: 1}, actAddFinalizer},
		{"no finalizer yet, pool exists already", observed{Generation: 1, PoolExists: true}, actAddFinalizer},
		{"no pool: apply", observed{HasFinalizer: true, Generation: 1}, actApply},
		{"the pool is the resource's: nothing", observed{HasFinalizer: true, Generation: 2, PoolExists: true, PoolManagedBy: ours, SameSpec: true}, actNothing},
		{"the spec changed: apply", observed{HasFinalizer: true, Generation: 3, PoolExists: true, PoolManagedBy: ours}, actApply},
		{"a pool applied through the API is taken over", observed{HasFinalizer: true, Generation: 1, PoolExists: true, SameSpec: true}, actApply},
		{"a refused generation is not tried again", observed{HasFinalizer: true, Generation: 4, RefusedGeneration: 4}, actNothing},
		{"a new generation after a refusal is tried", observed{HasFinalizer: true, Generation: 5, RefusedGeneration: 4}, actApply},
		{"deleting: drain the resource's pool", observed{Deleting: true, HasFinalizer: true, PoolExists: true, PoolManagedBy: ours}, actDelete},
		{"deleting: the drain was asked for, wait", observed{Deleting: true, HasFinalizer: true, PoolExists: true, PoolManagedBy: ours, DeleteSent: true}, actWaitDrain},
		{"deleting: the pool is gone, release the resource", observed{Deleting: true, HasFinalizer: true}, actRemoveFinalizer},
		{"deleting: a pool the resource never managed is left alone", observed{Deleting: true, HasFinalizer: true, PoolExists: true}, actRemoveFinalizer},
		{"deleting without our finalizer: nothing", observed{Deleting: true, PoolExists: true, PoolManagedBy: ours}, actNothing},
	} {
		t.Run(tc.what, func(t *testing.T) {
			assert.Equal(t, tc.want.String(), decide(name, tc.o).String())
		})
	}
}

func TestStatusOf(t *testing.T) {
	now := time.Date(2026, 12, 7, 18, 0, 0, 123456789, time.UTC)
	next := now.Add(30 * time.Second)
	view := api.PoolView{Phase: api.PoolBackoff, Ready: 1, Leased: 2, Creating: 1, QueueDepth: 3, ConsecutiveFailures: 2,
		LastFailureReason: "image pull", NextAttemptAt: &next, Policy: api.PoolPolicy{WarmTarget: 2}}

	t.Run("applied, below the warm target", func(t *testing.T) {
		st := statusOf(v1alpha1.ClusterPoolStatus{}, view, true, applyOutcome{Generation: 3}, now)
		assert.Equal(t, int64(3), st.ObservedGeneration)
		assert.Equal(t, "Backoff", st.Phase)
		assert.Equal(t, []int{1, 2, 1, 3, 2}, []int{st.Ready, st.Leased, st.Creating, st.QueueDepth, st.ConsecutiveFailures})
		assert.Equal(t, "image pull", st.LastFailureReason)
		require.NotNil(t, st.NextAttemptAt)
		assert.Equal(t, next.Truncate(time.Second), st.NextAttemptAt.Time.UTC(), "to the second, as the API server keeps it")
		applied := meta.FindStatusCondition(st.Conditions, ConditionApplied)
		require.NotNil(t, applied)
		assert.Equal(t, metav1.ConditionTrue, applied.Status)
		assert.Equal(t, ReasonApplied, applied.Reason)
		ready := meta.FindStatusCondition(st.Conditions, ConditionReady)
		require.NotNil(t, ready)
		assert.Equal(t, metav1.ConditionFalse, ready.Status)
		assert.Equal(t, ReasonWarming, ready.Reason)
		assert.Contains(t, ready.Message, "1 ready, warm target 2 (phase Backoff)")
	})

	t.Run("warm: the same status read again is no change", func(t *testing.T) {
		warm := view
		warm.Phase, warm.Ready = api.PoolHealthy, 2
		first := statusOf(v1alpha1.ClusterPoolStatus{}, warm, true, applyOutcome{Generation: 1}, now)
		assert.True(t, meta.IsStatusConditionTrue(first.Conditions, ConditionReady))
		again := statusOf(first, warm, true, applyOutcome{Generation: 1}, now.Add(time.Minute))
		assert.Equal(t, first, again, "unchanged conditions keep their transition times")
	})

	t.Run("refused: observedGeneration moves, the refusal is the message", func(t *testing.T) {
		prev := statusOf(v1alpha1.ClusterPoolStatus{}, view, true, applyOutcome{Generation: 1}, now)
		st := statusOf(prev, view, true, applyOutcome{Generation: 2, Refused: true, Message: "spec.sleep: not on backend local"}, now)
		assert.Equal(t, int64(2), st.ObservedGeneration)
		c := meta.FindStatusCondition(st.Conditions, ConditionApplied)
		require.NotNil(t, c)
		assert.Equal(t, ReasonRefused, c.Reason)
		assert.Equal(t, "spec.sleep: not on backend local", c.Message)
		assert.Equal(t, int64(2), refusedGeneration(st), "the refused generation is read back from the status")
		assert.Equal(t, "Backoff", st.Phase, "the pool of the earlier spec still runs")
	})

	t.Run("failed: observedGeneration stays", func(t *testing.T) {
		prev := statusOf(v1alpha1.ClusterPoolStatus{}, view, true, applyOutcome{Generation: 1}, now)
		st := statusOf(prev, view, true, applyOutcome{Generation: 2, Failed: true, Message: "temporal unavailable"}, now)
		assert.Equal(t, int64(1), st.ObservedGeneration)
		assert.Equal(t, ReasonApplyFailed, meta.FindStatusCondition(st.Conditions, ConditionApplied).Reason)
		assert.Equal(t, int64(0), refusedGeneration(st), "a failure is tried again")
	})

	t.Run("no pool", func(t *testing.T) {
		st := statusOf(v1alpha1.ClusterPoolStatus{}, api.PoolView{}, false, applyOutcome{}, now)
		assert.Equal(t, "Unknown", st.Phase)
		assert.Nil(t, meta.FindStatusCondition(st.Conditions, ConditionApplied), "nothing applied: no applied condition")
		assert.Equal(t, ReasonNoPool, meta.FindStatusCondition(st.Conditions, ConditionReady).Reason)
	})
}

func TestLastWriter(t *testing.T) {
	at := func(m int) *metav1.Time {
		t := metav1.NewTime(time.Date(2026, 12, 7, 18, m, 0, 0, time.UTC))
		return &t
	}
	for _, tc := range []struct {
		what   string
		fields []metav1.ManagedFieldsEntry
		want   string
	}{
		{"none", nil, DefaultActor},
		{"one writer", []metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, Time: at(1)}}, "kubectl-client-side-apply"},
		{"the latest of two", []metav1.ManagedFieldsEntry{
			{Manager: "kubectl-client-side-apply", Time: at(1)},
			{Manager: "argocd-controller", Time: at(5)},
		}, "argocd-controller"},
		{"the controller's own writes and status do not count", []metav1.ManagedFieldsEntry{
			{Manager: "kubectl", Time: at(1)},
			{Manager: FieldManager, Time: at(5)},
			{Manager: "someone", Subresource: "status", Time: at(6)},
		}, "kubectl"},
		{"only the controller", []metav1.ManagedFieldsEntry{{Manager: FieldManager, Time: at(5)}}, DefaultActor},
	} {
		t.Run(tc.what, func(t *testing.T) { assert.Equal(t, tc.want, lastWriter(tc.fields)) })
	}
}

func TestSameManifest(t *testing.T) {
	m, err := poolspec.Parse([]byte(`apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: ci}
spec:
  size: 1
  ttl: 10m
  backend: {type: local}
  cluster: {version: v1.37.2}
`))
	require.NoError(t, err)
	// As the store of PostgreSQL gives it back: keys reordered, whitespace its own.
	stored := []byte(`{"kind": "ClusterPool", "spec": {"ttl": "10m", "size": 1, "cluster": {"version": "v1.37.2"}, "backend": {"type": "local"}}, "metadata": {"name": "ci"}, "apiVersion": "kobe.kunobi.ninja/v1alpha1"}`)
	assert.True(t, sameManifest(stored, m))
	changed := []byte(`{"kind": "ClusterPool", "spec": {"ttl": "20m", "size": 1, "cluster": {"version": "v1.37.2"}, "backend": {"type": "local"}}, "metadata": {"name": "ci"}, "apiVersion": "kobe.kunobi.ninja/v1alpha1"}`)
	assert.False(t, sameManifest(changed, m))
	assert.False(t, sameManifest([]byte(`{}`), m), "a spec that does not parse is never the same")
}
