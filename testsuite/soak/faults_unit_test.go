package soak

import (
	"testing"
	"time"
)

// brokeInstance excuses a health_failed extension only for the instance a member kill named (not
// one whose id it merely ends with) or after a reboot, and only for a fault before the answer.
func TestBrokeInstanceNamesTheKilledMemberOnly(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	kill := fault{Kind: faultKillMember, At: t0, Detail: "killed kube-apiserver of Ready member soak-ab12-3"}
	cases := []struct {
		name     string
		faults   []fault
		instance string
		at       time.Time
		want     bool
	}{
		{"the killed member, after the kill", []fault{kill}, "soak-ab12-3", t0.Add(time.Second), true},
		{"another member", []fault{kill}, "soak-ab12-4", t0.Add(time.Second), false},
		{"an id the killed one ends with", []fault{kill}, "ab12-3", t0.Add(time.Second), false},
		{"the killed member, answered before the kill", []fault{kill}, "soak-ab12-3", t0.Add(-time.Second), false},
		{"a kill that skipped", []fault{{Kind: faultKillMember, At: t0, Detail: "skipped: no Ready member"}}, "soak-ab12-3", t0.Add(time.Second), false},
		{"any member after a reboot", []fault{{Kind: faultReboot, At: t0}}, "soak-ab12-9", t0.Add(time.Second), true},
		{"a worker kill breaks no cluster", []fault{{Kind: faultKillWorker, At: t0}}, "soak-ab12-3", t0.Add(time.Second), false},
		{"no fault", nil, "soak-ab12-3", t0, false},
	}
	for _, c := range cases {
		if got := brokeInstance(c.faults, c.instance, c.at); got != c.want {
			t.Errorf("%s: brokeInstance = %v, want %v", c.name, got, c.want)
		}
	}
}
