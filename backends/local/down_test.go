package local_test

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

type downReport struct{ id, message string }

// TestAnInstanceThatStopsServingIsReported: the backend tells NotifyDown's function at once when
// a Ready instance's process is killed, and never for the stops kobe makes itself (a sleep, a
// resume's restart, a delete). A warm bind relies on it to stop handing out a dead member.
func TestAnInstanceThatStopsServingIsReported(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real kube-apiserver processes; skipped with -short")
	}
	state := t.TempDir()
	ctx := context.Background()
	b := newBackend(t, state)
	reports := make(chan downReport, 16)
	b.NotifyDown(func(id, message string) { reports <- downReport{id, message} })
	const id = "down-me"
	readyInstance(t, b, id)

	require.NoError(t, b.Sleep(ctx, id))
	require.NoError(t, b.Resume(ctx, id))
	rctx, rcancel := context.WithTimeout(ctx, 4*time.Minute)
	defer rcancel()
	_, err := b.WaitReady(rctx, id, nil)
	require.NoError(t, err)
	select {
	case r := <-reports:
		t.Fatalf("a stop kobe made was reported: %+v", r)
	case <-time.After(time.Second):
	}

	dir := filepath.Join(state, "local", "instances", id) + "/"
	apiservers := leaks.Named(leaks.ProcessesNaming(dir), "kube-apiserver")
	require.Len(t, apiservers, 1)
	require.NoError(t, syscall.Kill(apiservers[0].PID, syscall.SIGKILL))
	select {
	case r := <-reports:
		assert.Equal(t, id, r.id)
		assert.Contains(t, r.message, "apiserver")
		assert.Contains(t, r.message, "killed")
	case <-time.After(30 * time.Second):
		t.Fatal("the killed kube-apiserver was not reported")
	}

	require.NoError(t, b.Delete(ctx, id))
	select {
	case r := <-reports:
		t.Fatalf("a delete was reported: %+v", r)
	case <-time.After(time.Second):
	}
}

// TestAThawChecksTheInstanceServes: a thaw is what grants a frozen member to a lease, so one
// whose API server died while frozen is an error, not a success (it used to succeed: the lease
// was answered Bound to a dead cluster).
func TestAThawChecksTheInstanceServes(t *testing.T) {
	const id = "thaw-dead"
	b, state := frozenTestInstance(t, id)
	ctx := context.Background()

	require.NoError(t, b.Freeze(ctx, id))
	require.NoError(t, b.Thaw(ctx, id), "a live instance thaws")
	require.NoError(t, b.Freeze(ctx, id))
	apiservers := leaks.Named(leaks.ProcessesNaming(filepath.Join(state, "local", "instances", id)+"/"), "kube-apiserver")
	require.Len(t, apiservers, 1)
	require.NoError(t, syscall.Kill(apiservers[0].PID, syscall.SIGKILL))
	err := b.Thaw(ctx, id)
	require.Error(t, err, "a thaw of an instance whose API server died is not a success")
	assert.Contains(t, err.Error(), "apiserver")
	st, err := b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.PhaseUnhealthy, st.Phase)
}

// A thaw that a worker's death cut short is run again by the next worker: it must not succeed
// on an instance whose API server does not answer (here: stopped while the instance was frozen,
// as the soak's thaw fault does). Found by the soak: such a member was granted after a worker was
// killed during its thaw.
func TestAThawRetriedByTheNextWorkerStillChecksTheInstanceServes(t *testing.T) {
	const id = "thaw-retried"
	b, state := frozenTestInstance(t, id)
	ctx := context.Background()

	require.NoError(t, b.Freeze(ctx, id))
	apiservers := leaks.Named(leaks.ProcessesNaming(filepath.Join(state, "local", "instances", id)+"/"), "kube-apiserver")
	require.Len(t, apiservers, 1)
	require.NoError(t, syscall.Kill(apiservers[0].PID, syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(apiservers[0].PID, syscall.SIGCONT) })
	// The first worker's thaw: the cgroup thaws, the wait for an answer is cut short.
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	err := b.Thaw(short, id)
	cancelShort()
	require.Error(t, err, "a stopped API server does not answer")

	// The next worker adopts the instance and runs the thaw again.
	next := newBackend(t, state)
	err = next.Thaw(ctx, id)
	require.Error(t, err, "a thaw of an instance whose API server does not answer is not a success, also when retried by the next worker")
}
