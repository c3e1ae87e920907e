package poolspec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSleepExclusionMatchesEveryFieldSet(t *testing.T) {
	p := &SleepPolicy{Exclude: []SleepExclusion{
		{Owner: "ci-*"},
		{Alias: "demo-*", Metadata: map[string]string{"keep": "awake"}},
	}}
	assert.True(t, p.Excludes("ci-runner", "", nil))
	assert.False(t, p.Excludes("alice", "demo-1", nil), "metadata must match too")
	assert.True(t, p.Excludes("alice", "demo-1", map[string]string{"keep": "awake", "x": "y"}))
	assert.False(t, p.Excludes("alice", "demo-1", map[string]string{"keep": "asleep"}))
	assert.False(t, p.Excludes("alice", "other", map[string]string{"keep": "awake"}))
	var none *SleepPolicy
	assert.True(t, none.Excludes("anyone", "", nil), "no policy sleeps nothing")
}

func TestSleepExclusionRefusesEmptyAndBadGlobs(t *testing.T) {
	for _, tc := range []struct {
		ex   SleepExclusion
		want string
	}{
		{SleepExclusion{}, "spec.sleep.exclude[0]: give at least one of owner, alias or metadata"},
		{SleepExclusion{Owner: "[x"}, "spec.sleep.exclude[0].owner"},
	} {
		pol := Policy{Backend: "local"}
		err := pol.sleep(&Sleep{Exclude: []SleepExclusion{tc.ex}}, true)
		assert.ErrorContains(t, err, tc.want)
	}
}

func TestSleepAfterInactivityIsValidatedAndExcludesApply(t *testing.T) {
	for _, tc := range []struct {
		raw  Duration
		want string
	}{
		{"soon", `spec.sleep.afterInactivity: "soon" is not a duration of at least 5s`},
		{"1s", `spec.sleep.afterInactivity: "1s" is not a duration of at least 5s`},
		{"-1m", `is not a duration of at least 5s`},
	} {
		pol := Policy{Backend: "local"}
		assert.ErrorContains(t, pol.sleep(&Sleep{AfterInactivity: tc.raw}, true), tc.want)
		assert.Nil(t, pol.Sleep, "a refused policy is not half set")
	}

	pol := Policy{Backend: "local"}
	assert.NoError(t, pol.sleep(&Sleep{AfterInactivity: "30m", Exclude: []SleepExclusion{{Owner: "ci-*"}}}, true))
	assert.Equal(t, 30*time.Minute, pol.Sleep.AfterInactivity)
	assert.Equal(t, 30*time.Minute, pol.Sleep.InactivityFor("alice", "", nil))
	assert.Zero(t, pol.Sleep.InactivityFor("ci-runner", "", nil), "an excluded lease is never slept by the policy")
	var none *SleepPolicy
	assert.Zero(t, none.InactivityFor("alice", "", nil))
}
