package run

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdtest"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdutil"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
)

func TestFlags(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	f := &factory.Factory{IOStreams: ios}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"ci", "--", "make", "e2e"}, []string{"make", "e2e"}},
		{[]string{"ci", "--ttl", "5m", "--", "make", "-j4", "--ttl", "5m"}, []string{"make", "-j4", "--ttl", "5m"}},
		{[]string{"--ttl", "2h", "--name", "pr-1", "ci", "--", "sh", "-c", "exit 3"}, []string{"sh", "-c", "exit 3"}},
		{[]string{"ci", "kubectl", "version"}, []string{"kubectl", "version"}},
	} {
		var got *Options
		require.NoError(t, cmdtest.Run(NewCmdRun(f, func(o *Options) error { got = o; return nil }), tc.args...), tc.args)
		assert.Equal(t, "ci", got.Pool)
		assert.Equal(t, tc.want, got.Command, "everything after the pool belongs to CMD: %v", tc.args)
	}
	var got *Options
	require.NoError(t, cmdtest.Run(NewCmdRun(f, func(o *Options) error { got = o; return nil }),
		"--ttl", "2h", "--name", "pr-1", "--metadata", "job=7", "--priority", "2", "--idle-timeout", "5m",
		"--wait-timeout", "1m", "--idempotency-key", "k", "-q", "ci", "--", "true"))
	assert.Equal(t, 2*time.Hour, got.TTL)
	assert.Equal(t, "pr-1", got.Name)
	assert.Equal(t, map[string]string{"job": "7"}, got.Metadata)
	assert.Equal(t, 2, got.Priority)
	assert.Equal(t, 5*time.Minute, got.IdleTimeout)
	assert.Equal(t, time.Minute, got.WaitTimeout)
	assert.Equal(t, "k", got.IdempotencyKey)
	assert.True(t, got.Quiet)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "give the pool and the command"},
		{[]string{"ci"}, "give the command to run after the pool"},
		{[]string{"ci", "--"}, "give the command to run after the pool"},
		{[]string{"--", "make"}, "give the pool and the command"},
		{[]string{"ci", "dev", "--", "make"}, `one pool before --, got ["ci" "dev"]`},
		{[]string{"ci", "make", "-j4"}, "unknown shorthand flag: 'j'"},
		{[]string{"--ttl", "nope", "ci", "--", "true"}, `"--ttl"`},
		{[]string{"--ttl", "-1m", "ci", "--", "true"}, "--ttl -1m0s: must be a positive duration"},
		{[]string{"--wait-timeout", "0", "ci", "--", "true"}, "--wait-timeout"},
		{[]string{"--idle-timeout", "-5s", "ci", "--", "true"}, "--idle-timeout"},
		{[]string{"--metadata", "x", "ci", "--", "true"}, "--metadata"},
		{[]string{"-o", "json", "ci", "--", "true"}, "unknown shorthand flag: 'o'"},
	} {
		ran := false
		err := cmdtest.Run(NewCmdRun(f, func(*Options) error { ran = true; return nil }), tc.args...)
		require.Error(t, err, tc.args)
		assert.Contains(t, err.Error(), tc.want)
		assert.False(t, ran)
	}
}

type env struct {
	api  *cmdtest.API
	f    *factory.Factory
	ios  *iostreams.IOStreams
	sigs chan os.Signal
}

func newEnv(t *testing.T) *env {
	a := cmdtest.New(t)
	f, ios := a.Factory()
	return &env{api: a, f: f, ios: ios, sigs: make(chan os.Signal, 4)}
}

func (e *env) run(tune func(*Options), args ...string) error {
	cmd := NewCmdRun(e.f, func(o *Options) error {
		o.Signals = e.sigs
		o.PollInterval = 5 * time.Millisecond
		if tune != nil {
			tune(o)
		}
		return runRun(context.Background(), o)
	})
	return cmdtest.Run(cmd, args...)
}

func (e *env) out() string    { return e.ios.Out.(*bytes.Buffer).String() }
func (e *env) errOut() string { return e.ios.ErrOut.(*bytes.Buffer).String() }

func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var ee *cmdutil.ExitError
	require.ErrorAs(t, err, &ee, "%v", err)
	return ee.Code
}

func TestRunPassesTheExitCodeReleasesAndCleansUp(t *testing.T) {
	e := newEnv(t)
	e.api.PendingPolls = 2
	err := e.run(nil, "ci", "--ttl", "30m", "--", "sh", "-c", `echo "$KUBECONFIG"; cat "$KUBECONFIG"; echo "id=$KOBE_LEASE_ID pool=$KOBE_LEASE_POOL"; stat -c %a "$KUBECONFIG"; exit 3`)
	assert.Equal(t, 3, exitCode(t, err))
	var ee *cmdutil.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Nil(t, ee.Err, "CMD's own failure is not reported again by kobe")

	lines := strings.SplitN(e.out(), "\n", 2)
	kubeconfig := lines[0]
	assert.True(t, filepath.IsAbs(kubeconfig), kubeconfig)
	l := e.api.OnlyLease(t)
	assert.Equal(t, cmdtest.Kubeconfig(l.ID)+"id="+l.ID+" pool=ci\n600\n", lines[1])
	assert.Equal(t, api.LeaseReleased, l.Phase)
	assert.Equal(t, "30m0s", l.EffectiveTTL)
	assert.True(t, strings.HasPrefix(e.api.IdempotencyKey(l.ID), "run-"), "kobe run always sends an idempotency key")
	_, err = os.Stat(kubeconfig)
	assert.True(t, os.IsNotExist(err), "the kubeconfig is removed")
	_, err = os.Stat(filepath.Dir(kubeconfig))
	assert.True(t, os.IsNotExist(err), "and its directory")
	assert.Contains(t, e.errOut(), "kobe: lease "+l.ID+" Bound in pool ci (cluster ci-1)")
	assert.Contains(t, e.errOut(), "kobe: released lease "+l.ID)
}

func TestRunSuccessAndQuiet(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.run(nil, "-q", "ci", "true"))
	assert.Equal(t, api.LeaseReleased, e.api.OnlyLease(t).Phase)
	assert.Empty(t, e.errOut())
}

func TestRunCommandKilledBySignal(t *testing.T) {
	e := newEnv(t)
	err := e.run(nil, "ci", "--", "sh", "-c", `kill -TERM $$`)
	assert.Equal(t, 143, exitCode(t, err))
	assert.Equal(t, api.LeaseReleased, e.api.OnlyLease(t).Phase)
}

func TestRunWithoutALeaseDoesNotRunTheCommand(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")

	e := newEnv(t)
	e.api.PendingPolls, e.api.FailReason = 1, api.ReasonPoolExhausted
	err := e.run(nil, "ci", "--", "touch", marker)
	assert.Equal(t, ExitLeaseFailed, exitCode(t, err))
	assert.Contains(t, err.Error(), "reason pool_exhausted")
	assert.Contains(t, cmdutil.Hint(err), "maxClusters")

	e = newEnv(t)
	e.api.Quota = 0
	err = e.run(nil, "nope", "--", "touch", marker)
	assert.Equal(t, ExitLeaseFailed, exitCode(t, err))
	assert.Contains(t, err.Error(), "lease from pool nope: Pool not found")

	e = newEnv(t)
	e.api.PendingPolls = 1000
	err = e.run(nil, "--wait-timeout", "50ms", "ci", "--", "touch", marker)
	assert.Equal(t, ExitLeaseFailed, exitCode(t, err))
	assert.Contains(t, err.Error(), "still Pending after --wait-timeout 50ms")
	assert.Equal(t, api.LeaseReleased, e.api.OnlyLease(t).Phase, "a lease that did not bind in time is released")

	_, err = os.Stat(marker)
	assert.True(t, os.IsNotExist(err), "CMD never ran")

	e = newEnv(t)
	err = e.run(nil, "ci", "--", "/nonexistent/kobe-test-cmd")
	assert.Equal(t, ExitNotFound, exitCode(t, err))
	assert.Empty(t, e.api.Seen(), "no lease is taken for a command that does not exist")
}

// waitForFile waits until CMD has created path (it is running).
func waitForFile(t *testing.T, path string) {
	t.Helper()
	require.Eventually(t, func() bool { _, err := os.Stat(path); return err == nil }, 10*time.Second, 5*time.Millisecond)
}

func TestRunSIGINTIsPassedOnThenTheLeaseReleased(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "started")

	// CMD dies of the signal: kobe exits 130.
	e := newEnv(t)
	done := make(chan error, 1)
	go func() {
		done <- e.run(nil, "ci", "--", "sh", "-c", `cp "$KUBECONFIG" "$0.kc"; touch "$0"; exec sleep 30`, started)
	}()
	waitForFile(t, started)
	e.sigs <- syscall.SIGINT
	select {
	case err := <-done:
		assert.Equal(t, 130, exitCode(t, err))
	case <-time.After(10 * time.Second):
		t.Fatal("kobe run did not end after SIGINT")
	}
	l := e.api.OnlyLease(t)
	assert.Equal(t, api.LeaseReleased, l.Phase)
	kc, err := os.ReadFile(started + ".kc")
	require.NoError(t, err)
	assert.Equal(t, cmdtest.Kubeconfig(l.ID), string(kc))

	// CMD handles the signal and exits 7: kobe exits 7 (CMD's code dictates).
	started2 := filepath.Join(dir, "started2")
	e = newEnv(t)
	go func() {
		done <- e.run(nil, "ci", "--", "sh", "-c", `trap 'kill $!; echo trapped; exit 7' TERM; touch "$0"; sleep 30 >/dev/null 2>&1 & wait`, started2)
	}()
	waitForFile(t, started2)
	e.sigs <- syscall.SIGTERM
	select {
	case err := <-done:
		assert.Equal(t, 7, exitCode(t, err))
	case <-time.After(10 * time.Second):
		t.Fatal("kobe run did not end after SIGTERM")
	}
	assert.Contains(t, e.out(), "trapped")
	assert.Equal(t, api.LeaseReleased, e.api.OnlyLease(t).Phase)
}

func TestRunSIGINTWhileQueuedReleasesTheLease(t *testing.T) {
	e := newEnv(t)
	e.api.PendingPolls, e.api.QueuePosition = 1000, 5
	marker := filepath.Join(t.TempDir(), "ran")
	done := make(chan error, 1)
	go func() { done <- e.run(nil, "ci", "--", "touch", marker) }()
	require.Eventually(t, func() bool { return len(e.api.Seen()) >= 3 }, 10*time.Second, 5*time.Millisecond)
	e.sigs <- os.Interrupt
	select {
	case err := <-done:
		assert.Equal(t, 130, exitCode(t, err))
		assert.Contains(t, err.Error(), "interrupted")
	case <-time.After(10 * time.Second):
		t.Fatal("kobe run did not end after SIGINT")
	}
	assert.Equal(t, api.LeaseReleased, e.api.OnlyLease(t).Phase)
	_, err := os.Stat(marker)
	assert.True(t, os.IsNotExist(err))
}

func TestRunKeepsTheLeaseAlive(t *testing.T) {
	e := newEnv(t)
	e.api.MaxExtensions = 1
	err := e.run(func(o *Options) {
		o.ExtendBefore = 400 * time.Millisecond
		o.HeartbeatEvery = 100 * time.Millisecond
	}, "--ttl", "600ms", "--idle-timeout", "1m", "ci", "--", "sleep", "1.3")
	require.NoError(t, err)
	l := e.api.OnlyLease(t)
	assert.Equal(t, 1, l.Extensions, "extended once, within the budget")
	assert.Equal(t, api.LeaseReleased, l.Phase)
	e.api.Mu.Lock()
	beats := e.api.Heartbeats[l.ID]
	e.api.Mu.Unlock()
	assert.GreaterOrEqual(t, beats, 5)
	warnings := strings.Count(e.errOut(), "cannot be extended any more (extension_budget_exhausted)")
	assert.Equal(t, 1, warnings, "the budget warning is given once:\n%s", e.errOut())

	var patches int
	for _, s := range e.api.Seen() {
		if strings.HasPrefix(s, "PATCH ") {
			patches++
		}
	}
	assert.Equal(t, 2, patches, "no more attempts once the budget is spent")
	e.api.Mu.Lock()
	assert.Contains(t, e.api.Requests[0].Body, `"idleTimeout":"1m0s"`)
	e.api.Mu.Unlock()
}

// Without --idle-timeout nothing needs heartbeats: kobe run sends none (they would only grow
// the lease's history), and still extends the lease.
func TestRunWithoutIdleTimeoutSendsNoHeartbeats(t *testing.T) {
	e := newEnv(t)
	e.api.MaxExtensions = 1
	err := e.run(func(o *Options) {
		o.ExtendBefore = 400 * time.Millisecond
		o.HeartbeatEvery = 100 * time.Millisecond
	}, "--ttl", "600ms", "ci", "--", "sleep", "1")
	require.NoError(t, err)
	l := e.api.OnlyLease(t)
	assert.Equal(t, 1, l.Extensions, "extended once, within the budget")
	e.api.Mu.Lock()
	beats := e.api.Heartbeats[l.ID]
	e.api.Mu.Unlock()
	assert.Zero(t, beats)
}
