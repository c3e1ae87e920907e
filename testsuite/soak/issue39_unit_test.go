package soak

import (
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/pool"
)

// The sign-in bound counts every minute window of every API run the flood overlaps: a
// restarted API's throttle starts afresh.
func TestSignInBoundCountsEveryWindowOfEveryAPIRun(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 10, 0, time.UTC)
	per := signInPerMinute + 1
	cases := []struct {
		name     string
		starts   []time.Time
		from, to time.Time
		want     int
	}{
		{"one run, one window", []time.Time{t0.Add(-time.Hour)}, t0, t0.Add(20 * time.Second), 1 * per},
		{"one run, across a minute", []time.Time{t0.Add(-time.Hour)}, t0, t0.Add(55 * time.Second), 2 * per},
		{"a restart in the window", []time.Time{t0.Add(-time.Hour), t0.Add(10 * time.Second)}, t0, t0.Add(20 * time.Second), 2 * per},
		{"a run before the flood only counts from it", []time.Time{t0.Add(-time.Hour), t0.Add(-time.Minute)}, t0, t0.Add(time.Second), 1 * per},
		{"three minutes, one run", []time.Time{t0}, t0, t0.Add(3 * time.Minute), 4 * per},
	}
	for _, c := range cases {
		if got := signInBound(c.starts, c.from, c.to); got != c.want {
			t.Errorf("%s: signInBound = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestLeftTerminalFindsAPhaseAfterAnEnd(t *testing.T) {
	t0 := time.Now()
	seen := func(ps ...api.LeasePhase) []seenPhase {
		var out []seenPhase
		for i, p := range ps {
			out = append(out, seenPhase{Phase: p, At: t0.Add(time.Duration(i) * time.Second)})
		}
		return out
	}
	if got := leftTerminal(seen(api.LeasePending, api.LeaseBound, api.LeaseReleased)); got != "" {
		t.Errorf("a lease that ended once: %q", got)
	}
	if got := leftTerminal(seen(api.LeasePending, api.LeaseReleased, api.LeaseBound)); got == "" {
		t.Error("Released then Bound was not found")
	}
	if got := leftTerminal(seen(api.LeaseBound, api.LeaseExpired, api.LeaseFailed)); got == "" {
		t.Error("Expired then Failed was not found")
	}
}

func TestSchedMismatchWantsExactlyTheShapesSchedules(t *testing.T) {
	p := pool.ScheduleIDPrefix(schedPool)
	note := func(c string) string {
		return `kobe pool soak-sched: puts the Bound leases to sleep at "` + c + `" in UTC`
	}
	s0, w0 := schedCrons(0)
	shape0 := map[string]string{p + "sleep": note(s0), p + "wake": note(w0), p + "warm-0": "window"}
	if m := schedMismatch(shape0, 0); m != "" {
		t.Errorf("shape 0's own schedules: %s", m)
	}
	if m := schedMismatch(shape0, 1); m == "" {
		t.Error("shape 0's warm window left on shape 1 was not found")
	}
	delete(shape0, p+"warm-0")
	if m := schedMismatch(shape0, 1); m == "" {
		t.Error("shape 0's crons on shape 1 were not found")
	}
	s1, w1 := schedCrons(1)
	if m := schedMismatch(map[string]string{p + "sleep": note(s1), p + "wake": note(w1)}, 1); m != "" {
		t.Errorf("shape 1's own schedules: %s", m)
	}
}

func TestFrozenKilledNamesTheMembers(t *testing.T) {
	f := fault{Kind: faultThaw, Detail: "killed kube-apiserver of frozen member soak-ab-3: out of Ready"}
	if got := frozenKilled(f); !slices.Equal(got, []string{"soak-ab-3"}) {
		t.Errorf("frozenKilled = %q", got)
	}
	f = fault{Kind: faultThaw, Detail: "stopped kube-apiserver of frozen members soak-sched-ab-1,soak-sched-ab-2: worker killed while soak-sched-ab-2 thawed; member gone"}
	if got := frozenKilled(f); !slices.Equal(got, []string{"soak-sched-ab-1", "soak-sched-ab-2"}) {
		t.Errorf("frozenKilled = %q", got)
	}
	if got := frozenKilled(fault{Kind: faultThaw, Detail: "skipped: no frozen member"}); got != nil {
		t.Errorf("a skipped fault named %q", got)
	}
}

func TestOfSoakPoolLeavesTheOtherPoolsOut(t *testing.T) {
	for id, want := range map[string]bool{"soak-71de630b-1": true, "soak-sched-71de630b-1": false, "soak-forbidden-ab-1": false, "other-1": false} {
		if got := ofSoakPool(id); got != want {
			t.Errorf("ofSoakPool(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestStoppedOrStoppingReadsTheProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	if stoppedOrStopping(pid) {
		t.Fatal("a running process counted stopped")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !stoppedOrStopping(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("a stopped process (state %s) not counted stopped", processState(pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for stoppedOrStopping(pid) {
		if time.Now().After(deadline) {
			t.Fatal("a resumed process still counted stopped")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
