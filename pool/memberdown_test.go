package pool

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A member whose host saw it die is not handed out by the next warm bind: it is recycled at
// once (and replaced), without waiting for failureThreshold health checks.
func TestAReadyMemberReportedDownIsNotWarmBound(t *testing.T) {
	pol := testPolicy()
	pol.WarmTarget, pol.MaxClusters = 2, 4
	a, b := member("a", MemberReady, 2*time.Minute), member("b", MemberReady, time.Minute)
	a.Prepared, b.Prepared = true, true
	s := stateWith(pol, a, b)
	rec := &recorder{now: t0}
	first := pickForClaim(s.claimOrder(true))
	require.NotNil(t, first)

	s.MemberDown(MemberDown{InstanceID: first.ID, Message: "its kube-apiserver process ended: signal: killed", At: t0}, rec)
	assert.Equal(t, MemberDeleting, s.Members[first.ID].Phase, "the dead member is torn down")
	assert.Contains(t, withoutCounts(rec.log), "do teardown "+first.ID+" (health_failed) as teardown-"+first.ID)

	asg, why, ok := s.ClaimNow(ClaimRequest{LeaseID: "l1"}, t0)
	require.True(t, ok, "the other member binds: %s", why)
	assert.NotEqual(t, first.ID, asg.InstanceID, "the warm bind does not hand out the dead member")

	asg2, why, ok := s.ClaimNow(ClaimRequest{LeaseID: "l2"}, t0)
	assert.False(t, ok, "no live prepared member is left: %+v", asg2)
	assert.Equal(t, NotBoundNoMember, why)
}

// A Leased member reported down is reported to its lease (it decides; the member is torn down
// when the lease gives it back), once; a report of a member being thawed for a claim, or gone,
// changes nothing (the thaw fails on its own).
func TestALeasedMemberReportedDownIsReportedToItsLease(t *testing.T) {
	pol := testPolicy()
	a := member("a", MemberLeased, time.Minute)
	a.LeaseID = "l1"
	s := stateWith(pol, a)
	rec := &recorder{now: t0}
	s.MemberDown(MemberDown{InstanceID: "a", Message: "its kine process ended: exit status 1"}, rec)
	require.True(t, s.Members["a"].Broken)
	assert.Contains(t, rec.log, "do signal l1 instance-unhealthy a")
	rec.log = nil
	s.MemberDown(MemberDown{InstanceID: "a", Message: "again"}, rec)
	assert.Empty(t, withoutCounts(rec.log), "a broken member's lease was told already")
	s.MemberDown(MemberDown{InstanceID: "gone"}, rec)
	assert.Empty(t, withoutCounts(rec.log))

	s, rec = onlyFrozen(t)
	asg, _, _ := s.ClaimNow(ClaimRequest{LeaseID: "l2"}, t0)
	s.ThawForClaim(asg)
	rec.log = nil
	s.MemberDown(MemberDown{InstanceID: asg.InstanceID, Message: "killed while frozen"}, rec)
	assert.Empty(t, rec.log, "the thaw under way reports it")
	assert.False(t, s.Members[asg.InstanceID].Broken)
}
