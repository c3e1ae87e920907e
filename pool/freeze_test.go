package pool

import (
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/instance"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func frozenPool(t *testing.T) *State {
	t.Helper()
	pol := testPolicy()
	pol.WarmTarget, pol.MaxClusters, pol.FreezesSpares, pol.ThawedSpares = 3, 5, true, 1
	a, b, c := member("a", MemberReady, 3*time.Minute), member("b", MemberReady, 2*time.Minute), member("c", MemberReady, time.Minute)
	for _, m := range []*Member{a, b, c} {
		m.Prepared = true
	}
	return stateWith(pol, a, b, c)
}

func freezeIDs(fs []FreezeMember) (freeze, thaw []string) {
	for _, f := range fs {
		if f.Thaw {
			thaw = append(thaw, f.MemberID)
		} else {
			freeze = append(freeze, f.MemberID)
		}
	}
	return freeze, thaw
}

// The spares beyond thawedSpares are frozen, the last a claim would take first; a claim takes
// the running member; after it the first frozen one in claim order is thawed.
func TestSparesBeyondThawedSparesAreFrozenAndThawedAfterAClaim(t *testing.T) {
	s := frozenPool(t)
	freeze, thaw := freezeIDs(s.FreezesDue())
	assert.Equal(t, []string{"c", "b"}, freeze, "the newest first: claims take the oldest")
	assert.Empty(t, thaw)
	assert.Empty(t, s.FreezesDue(), "nothing more while the freezes are under way")
	assert.Equal(t, Freezing, s.Members["b"].Freeze)
	rec := &recorder{now: t0}
	s.FreezeDone(FreezeResult{MemberID: "b"}, rec)
	s.FreezeDone(FreezeResult{MemberID: "c"}, rec)
	assert.Equal(t, 2, s.Status(t0).Frozen)

	asg, _, ok := s.ClaimNow(ClaimRequest{LeaseID: "l1"}, t0)
	require.True(t, ok)
	assert.Equal(t, "a", asg.InstanceID, "the running member")
	_, mustThaw := s.ThawForClaim(asg)
	assert.False(t, mustThaw, "a running member needs no thaw on the bind's path")

	freeze, thaw = freezeIDs(s.FreezesDue())
	assert.Empty(t, freeze)
	assert.Equal(t, []string{"b"}, thaw, "the next in claim order runs again")
	s.FreezeDone(FreezeResult{MemberID: "b", Thaw: true}, rec)
	assert.Equal(t, Running, s.Members["b"].Freeze)
	assert.Empty(t, rec.log)
}

// With only frozen members left, a warm claim takes one and thaws it before it is answered; a
// thaw that fails undoes the bind and tears the member down. A member whose freeze is under way
// is never handed out.
func TestAClaimLeftWithFrozenMembersThawsOne(t *testing.T) {
	s := frozenPool(t)
	s.Policy.ThawedSpares = 0
	s.FreezesDue()
	_, _, ok := s.ClaimNow(ClaimRequest{LeaseID: "l0"}, t0)
	assert.False(t, ok, "every member is being frozen: none is handed out")
	rec := &recorder{now: t0}
	for _, id := range []string{"a", "b", "c"} {
		s.FreezeDone(FreezeResult{MemberID: id}, rec)
	}

	asg, _, ok := s.ClaimNow(ClaimRequest{LeaseID: "l1"}, t0)
	require.True(t, ok)
	assert.Equal(t, "a", asg.InstanceID)
	thaw, mustThaw := s.ThawForClaim(asg)
	require.True(t, mustThaw)
	assert.Equal(t, FreezeMember{MemberID: "a", Thaw: true, Queue: "q", Request: thaw.Request}, thaw)
	assert.True(t, s.ClaimThawed("l1", "a", "", rec))
	assert.Equal(t, Running, s.Members["a"].Freeze)

	asg, _, ok = s.ClaimNow(ClaimRequest{LeaseID: "l2"}, t0)
	require.True(t, ok)
	_, mustThaw = s.ThawForClaim(asg)
	require.True(t, mustThaw)
	assert.False(t, s.ClaimThawed("l2", asg.InstanceID, "cgroup gone", rec))
	assert.NotContains(t, s.Assigned, "l2", "the bind is undone: the claim queues as any other")
	assert.Equal(t, MemberDeleting, s.Members[asg.InstanceID].Phase)
	assert.Equal(t, []string{"do count recycle thaw_failed", "do teardown b (thaw_failed) as teardown-b"}, rec.log)
}

// A queued claim that only a frozen member can serve thaws it before the assignment goes out
// (the lease issues its credential on the member's API).
func TestAQueuedClaimThawsAFrozenMemberFirst(t *testing.T) {
	s := frozenPool(t)
	s.Policy.ThawedSpares = 0
	rec := &recorder{now: t0}
	s.FreezesDue()
	for _, id := range []string{"a", "b", "c"} {
		s.FreezeDone(FreezeResult{MemberID: id}, rec)
	}
	s.Claim(ClaimRequest{LeaseID: "l1", At: t0}, t0)
	s.Reconcile(rec)
	assert.Equal(t, []string{"do thaw a", "send signal l1 assigned a (seq 1)", "wait signal l1 assigned a (seq 1)",
		"do provision p-t-1"}, withoutCounts(rec.log), "then the replacement")
	assert.Equal(t, Running, s.Members["a"].Freeze)
}

// A backend that cannot freeze stops the pool trying; a freeze that failed leaves that member
// running and never tried again. Policies resolved before frozen spares freeze nothing.
func TestFreezingStopsWhereItCannot(t *testing.T) {
	s := frozenPool(t)
	s.FreezesDue()
	rec := &recorder{now: t0}
	s.FreezeDone(FreezeResult{MemberID: "c", Err: "boom"}, rec)
	s.FreezeDone(FreezeResult{MemberID: "b", Err: "no freezer", Unavailable: true}, rec)
	assert.Equal(t, Running, s.Members["b"].Freeze)
	assert.True(t, s.Members["c"].NoFreeze)
	assert.Equal(t, "no freezer", s.FreezeUnavailable)
	assert.Empty(t, s.FreezesDue())

	unresolved := frozenPool(t)
	unresolved.Policy.FreezesSpares = false
	assert.Empty(t, unresolved.FreezesDue(), "a policy resolved before frozen spares")
}

// onlyFrozen is a pool whose every spare is frozen and prepared.
func onlyFrozen(t *testing.T) (*State, *recorder) {
	t.Helper()
	s := frozenPool(t)
	s.Policy.ThawedSpares = 0
	rec := &recorder{now: t0}
	s.FreezesDue()
	for _, id := range []string{"a", "b", "c"} {
		s.FreezeDone(FreezeResult{MemberID: id}, rec)
	}
	return s, rec
}

// The review's item 1: the API stopped waiting for a warm bind whose thaw was slow and started
// the lease the slow way; its claim came while the thaw ran. The thaw then failed: the claim
// must queue (before the fix Claim took it for a retry of the warm bind and dropped it, and
// the lease stayed Pending in no queue, where queueTimeout never fires).
func TestAClaimThatCameDuringAFailedThawIsQueued(t *testing.T) {
	s, rec := onlyFrozen(t)
	asg, _, ok := s.ClaimNow(ClaimRequest{LeaseID: "l1"}, t0)
	require.True(t, ok)
	_, mustThaw := s.ThawForClaim(asg)
	require.True(t, mustThaw)

	s.Claim(ClaimRequest{LeaseID: "l1", At: t0}, t0) // the slow path's claim, during the thaw
	assert.False(t, s.ClaimThawed("l1", asg.InstanceID, "host worker gone", rec))
	s.Reconcile(rec)
	m := s.Members[asg.InstanceID]
	queued := len(s.Queue) == 1 && s.Queue[0].LeaseID == "l1"
	assigned := s.Assigned["l1"] != "" && s.Assigned["l1"] != asg.InstanceID
	assert.True(t, queued || assigned, "the lease's claim is queued or served by another member: queue %v, assigned %v", s.Queue, s.Assigned)
	assert.Equal(t, MemberDeleting, m.Phase)

	// A thaw that succeeds keeps the bind; the slow path's claim is then answered by the
	// assignment the warm bind sends (the pool's start of the lease finds it running).
	s, rec = onlyFrozen(t)
	asg, _, _ = s.ClaimNow(ClaimRequest{LeaseID: "l2"}, t0)
	s.ThawForClaim(asg)
	s.Claim(ClaimRequest{LeaseID: "l2", At: t0}, t0)
	assert.True(t, s.ClaimThawed("l2", asg.InstanceID, "", rec))
	s.Reconcile(rec)
	assert.Empty(t, s.Queue, "the bind stands: nothing queues")
	assert.Equal(t, asg.InstanceID, s.Assigned["l2"])
}

// A lease that ended while its warm bind's thaw ran (released while Pending: its member was
// torn down by CancelClaim) is not torn down a second time when the thaw fails, nor bound when
// it succeeds, and its claim does not queue.
func TestALeaseThatEndedDuringItsThawIsNotBoundNorTornDownTwice(t *testing.T) {
	for _, thawErr := range []string{"", "boom"} {
		s, rec := onlyFrozen(t)
		asg, _, ok := s.ClaimNow(ClaimRequest{LeaseID: "l1"}, t0)
		require.True(t, ok)
		s.ThawForClaim(asg)
		s.Claim(ClaimRequest{LeaseID: "l1", At: t0}, t0)
		s.CancelClaim("l1", rec)
		require.Equal(t, MemberDeleting, s.Members[asg.InstanceID].Phase)
		rec.log = nil
		assert.False(t, s.ClaimThawed("l1", asg.InstanceID, thawErr, rec), "thaw error %q: the bind does not stand", thawErr)
		assert.Empty(t, rec.log, "thaw error %q: no second teardown", thawErr)
		assert.Empty(t, s.Queue, "thaw error %q: an ended lease's claim does not queue", thawErr)
	}
}

// Health checks leave a member alone while a warm bind thaws it: its lease has no answer yet,
// so it cannot be told about the member, and a frozen process fails its checks.
func TestAMemberThawingForAClaimIsNotHealthChecked(t *testing.T) {
	s, rec := onlyFrozen(t)
	asg, _, _ := s.ClaimNow(ClaimRequest{LeaseID: "l1"}, t0)
	s.ThawForClaim(asg)
	s.Policy.HealthFailureThreshold = 1
	for _, c := range s.HealthChecksDue(t0.Add(time.Hour), nil) {
		assert.NotContains(t, c.IDs, asg.InstanceID)
	}
	s.HealthChecked([]instance.HealthResult{{InstanceID: asg.InstanceID, Message: "frozen"}}, rec)
	assert.Empty(t, rec.log, "no report to a lease that has no answer yet")
	assert.False(t, s.Members[asg.InstanceID].Broken)
}
