package pool

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func frozenPool(t *testing.T, v Versions) *State {
	t.Helper()
	pol := testPolicy()
	pol.WarmTarget, pol.MaxClusters, pol.FreezesSpares, pol.ThawedSpares = 3, 5, true, 1
	a, b, c := member("a", MemberReady, 3*time.Minute), member("b", MemberReady, 2*time.Minute), member("c", MemberReady, time.Minute)
	for _, m := range []*Member{a, b, c} {
		m.Prepared = true
	}
	return stateWith(v, pol, a, b, c)
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
	s := frozenPool(t, latestVersions)
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
	s := frozenPool(t, latestVersions)
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
	s := frozenPool(t, latestVersions)
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
// running and never tried again. Runs recorded before the change, and policies resolved before
// it, freeze nothing.
func TestFreezingStopsWhereItCannot(t *testing.T) {
	s := frozenPool(t, latestVersions)
	s.FreezesDue()
	rec := &recorder{now: t0}
	s.FreezeDone(FreezeResult{MemberID: "c", Err: "boom"}, rec)
	s.FreezeDone(FreezeResult{MemberID: "b", Err: "no freezer", Unavailable: true}, rec)
	assert.Equal(t, Running, s.Members["b"].Freeze)
	assert.True(t, s.Members["c"].NoFreeze)
	assert.Equal(t, "no freezer", s.FreezeUnavailable)
	assert.Empty(t, s.FreezesDue())

	old := latestVersions
	old.FreezesSpares = false
	assert.Empty(t, frozenPool(t, old).FreezesDue(), "a run recorded before frozen spares")
	unresolved := frozenPool(t, latestVersions)
	unresolved.Policy.FreezesSpares = false
	assert.Empty(t, unresolved.FreezesDue(), "a policy resolved before frozen spares")
}
