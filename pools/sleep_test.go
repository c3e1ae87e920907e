package pools

import (
	"testing"

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
