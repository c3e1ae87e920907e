package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

// skipWithoutFreezer skips a test on a machine where this process cannot create cgroups in the
// v1 freezer hierarchy.
func skipWithoutFreezer(t *testing.T) {
	t.Helper()
	probe := filepath.Join(local.FreezerRoot, fmt.Sprintf("kobe-probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		t.Skipf("needs a writable cgroup v1 freezer at %s: %v", local.FreezerRoot, err)
	}
	_ = os.Remove(probe)
}

// freezerCgroupOf finds the freezer cgroup holding the processes of the instance (by the
// /proc/<pid>/cgroup of its API server).
func freezerCgroupOf(t *testing.T, state, id string) string {
	t.Helper()
	ps := leaks.Named(leaks.ProcessesNaming(filepath.Join(state, "local", "instances", id)+"/"), "kube-apiserver")
	require.Len(t, ps, 1)
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", ps[0].PID))
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && f[1] == "freezer" {
			return filepath.Join(local.FreezerRoot, f[2])
		}
	}
	t.Fatalf("no freezer cgroup in %s", data)
	return ""
}

// TestFreezeStopsTheInstanceAndThawResumesIt: a frozen instance's processes use no CPU, its API
// does not answer and its status says Frozen; the state survives a kobe restart (the cgroup is
// the truth); thawed, the same processes serve the same data; a frozen instance can be deleted,
// and nothing of it (cgroup included) remains.
func TestFreezeStopsTheInstanceAndThawResumesIt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real kube-apiserver processes; skipped with -short")
	}
	skipWithoutFreezer(t)
	state := t.TempDir()
	ctx := context.Background()
	b := newBackend(t, state)
	id := "freeze-me"
	t.Cleanup(func() { _ = b.Delete(context.Background(), id) })

	err := b.Freeze(ctx, "no-such-instance")
	assert.ErrorIs(t, err, backends.ErrNotFound)

	_, err = b.Create(ctx, spec(id, ""))
	require.NoError(t, err)
	assert.ErrorContains(t, b.Freeze(ctx, id), "only a Ready instance can be frozen", "an instance still starting is not frozen")
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, err = b.WaitReady(wctx, id, nil)
	require.NoError(t, err)
	cred, err := b.Credentials(ctx, id, backends.CredentialRequest{})
	require.NoError(t, err)
	admin := kubeClientWithTimeout(t, cred.Kubeconfig, 10*time.Second)
	_, err = admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before-freeze"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	cgroup := freezerCgroupOf(t, state, id)
	assert.Contains(t, cgroup, "/kobe/"+id+"-", "the instance has a freezer cgroup of its own")
	procs := leaks.ProcessesNaming(filepath.Join(state, "local", "instances", id) + "/")
	require.Len(t, procs, 2, "kine and kube-apiserver: %v", procs)

	require.NoError(t, b.Freeze(ctx, id))
	require.NoError(t, b.Freeze(ctx, id), "freezing a frozen instance succeeds")
	st, err := b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.PhaseFrozen, st.Phase)
	state1, err := os.ReadFile(filepath.Join(cgroup, "freezer.state"))
	require.NoError(t, err)
	assert.Equal(t, "FROZEN", strings.TrimSpace(string(state1)))
	for _, p := range procs {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", p.PID))
		require.NoError(t, err, "%s still exists while frozen", p)
	}
	cpu0 := cpuTimeOf(t, procs)
	time.Sleep(2 * time.Second)
	assert.Equal(t, cpu0, cpuTimeOf(t, procs), "frozen processes use no CPU")
	_, err = kubeClientWithTimeout(t, cred.Kubeconfig, time.Second).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	assert.Error(t, err, "a frozen API server does not answer")
	_, err = b.WaitReady(wctx, id, nil)
	assert.ErrorContains(t, err, "Frozen", "waiting on a frozen instance says so instead of timing out")

	// A kobe restart finds it frozen.
	b2 := newBackend(t, state)
	st, err = b2.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.PhaseFrozen, st.Phase)

	require.NoError(t, b2.Thaw(ctx, id))
	require.NoError(t, b2.Thaw(ctx, id), "thawing a running instance succeeds")
	st, err = b2.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.PhaseReady, st.Phase)
	got, err := admin.CoreV1().ConfigMaps("default").Get(ctx, "before-freeze", metav1.GetOptions{})
	require.NoError(t, err, "thawed, the same API server serves the same data")
	assert.Equal(t, "before-freeze", got.Name)
	assert.Equal(t, procs, leaks.ProcessesNaming(filepath.Join(state, "local", "instances", id)+"/"), "the same processes: nothing restarted")

	// Deleting a frozen instance: the processes are thawed to be killed, the cgroup removed.
	require.NoError(t, b2.Freeze(ctx, id))
	require.NoError(t, b2.Delete(ctx, id))
	_, err = os.Stat(cgroup)
	assert.True(t, os.IsNotExist(err), "the freezer cgroup is removed: %v", err)
	assert.Empty(t, leaks.ProcessesNaming(filepath.Join(state, "local", "instances", id)+"/"))
}

// TestSleepOfAFrozenInstance: Sleep thaws the processes it stops (a frozen process would not
// act on SIGTERM), and Resume brings the instance back Ready.
func TestSleepOfAFrozenInstance(t *testing.T) {
	id := "frozen-sleeper"
	b, state := frozenTestInstance(t, id)
	ctx := context.Background()
	require.NoError(t, b.Freeze(ctx, id))

	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	require.NoError(t, b.Sleep(sctx, id))
	st, err := b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.PhaseSleeping, st.Phase)
	assert.Empty(t, leaks.ProcessesNaming(filepath.Join(state, "local", "instances", id)+"/"), "no process survives Sleep")

	require.NoError(t, b.Resume(ctx, id))
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	st, err = b.WaitReady(wctx, id, nil)
	require.NoError(t, err)
	assert.Equal(t, backends.PhaseReady, st.Phase, "resumed, not frozen")
}

func cpuTimeOf(t *testing.T, ps []leaks.Process) []string {
	t.Helper()
	var out []string
	for _, p := range ps {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID))
		require.NoError(t, err)
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		out = append(out, p.Name+" utime="+f[11]+" stime="+f[12])
	}
	return out
}

func kubeClientWithTimeout(t *testing.T, kc []byte, timeout time.Duration) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	require.NoError(t, err)
	cfg.Timeout = timeout
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// TestInstanceProcessesDoNotInheritKobesFiles: a file descriptor kobe inherited without
// close-on-exec (here: opened so on purpose, as `flock kobe …` hands its lock to kobe) is not
// passed on to the instance's processes, which outlive kobe and would hold it.
func TestInstanceProcessesDoNotInheritKobesFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real kube-apiserver processes; skipped with -short")
	}
	lockPath := filepath.Join(t.TempDir(), "held.lock")
	fd, err := syscall.Open(lockPath, syscall.O_CREAT|syscall.O_RDWR, 0o600) // no O_CLOEXEC
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })

	state := t.TempDir()
	b := newBackend(t, state)
	id := "no-inherit"
	t.Cleanup(func() { _ = b.Delete(context.Background(), id) })
	_, err = b.Create(context.Background(), spec(id, ""))
	require.NoError(t, err)
	procs := leaks.ProcessesNaming(filepath.Join(state, "local", "instances", id) + "/")
	require.NotEmpty(t, procs)
	for _, p := range procs {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.PID))
		require.NoError(t, err)
		for _, e := range fds {
			target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.PID, e.Name()))
			assert.NotEqual(t, lockPath, target, "%s holds kobe's inherited file as fd %s", p, e.Name())
		}
	}
}

// TestEmptyFreezerCgroupsAreRemovedAtStart: a freezer cgroup left by an instance whose processes
// were killed and directory removed without Delete is removed when a local backend starts; a
// cgroup that holds a process is left alone.
func TestEmptyFreezerCgroupsAreRemovedAtStart(t *testing.T) {
	skipWithoutFreezer(t)
	parent := filepath.Join(local.FreezerRoot, "kobe")
	require.NoError(t, os.MkdirAll(parent, 0o755))
	empty := filepath.Join(parent, fmt.Sprintf("left-behind-%d", os.Getpid()))
	busy := filepath.Join(parent, fmt.Sprintf("busy-%d", os.Getpid()))
	require.NoError(t, os.Mkdir(empty, 0o755))
	require.NoError(t, os.Mkdir(busy, 0o755))
	sleeper := exec.Command("sleep", "60")
	require.NoError(t, sleeper.Start())
	t.Cleanup(func() {
		_ = sleeper.Process.Kill()
		_ = sleeper.Wait()
		_ = os.Remove(busy)
		_ = os.Remove(empty)
	})
	require.NoError(t, os.WriteFile(filepath.Join(busy, "cgroup.procs"), []byte(fmt.Sprint(sleeper.Process.Pid)), 0o644))

	newBackend(t, t.TempDir())
	_, err := os.Stat(empty)
	assert.True(t, os.IsNotExist(err), "the empty cgroup is removed: %v", err)
	_, err = os.Stat(busy)
	assert.NoError(t, err, "a cgroup with a process stays")
}

// TestInstancePortsAreOutsideTheEphemeralRange: an instance's API server and kine listen on
// ports that no outgoing connection of the host can take between the pick and the bind (the
// kernel gives outgoing connections ports of its ephemeral range only). Before, both came from
// `listen :0`, that same range, and in `make bench` an API server failed to start with "bind:
// address already in use" out of a pool of 50.
func TestInstancePortsAreOutsideTheEphemeralRange(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real kube-apiserver processes; skipped with -short")
	}
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	require.NoError(t, err)
	var lo, hi int
	_, err = fmt.Sscan(string(data), &lo, &hi)
	require.NoError(t, err)
	if 65535-hi < 1000 && lo-20000 < 1000 {
		t.Skipf("this host's ephemeral range %d-%d leaves no room for listeners outside it", lo, hi)
	}

	state := t.TempDir()
	b := newBackend(t, state)
	ids := []string{"ports-a", "ports-b"}
	seen := map[int]string{}
	for _, id := range ids {
		t.Cleanup(func() { _ = b.Delete(context.Background(), id) })
		_, err := b.Create(context.Background(), spec(id, ""))
		require.NoError(t, err)
		raw, err := os.ReadFile(filepath.Join(state, "local", "instances", id, "instance.json"))
		require.NoError(t, err)
		var rec struct {
			APIPort  int `json:"apiPort"`
			KinePort int `json:"kinePort"`
		}
		require.NoError(t, json.Unmarshal(raw, &rec))
		for _, p := range []int{rec.APIPort, rec.KinePort} {
			assert.False(t, p >= lo && p <= hi, "instance %s listens on %d, inside the ephemeral range %d-%d", id, p, lo, hi)
			assert.Empty(t, seen[p], "port %d given to %s and %s", p, seen[p], id)
			seen[p] = id
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, id := range ids {
		st, err := b.WaitReady(ctx, id, nil)
		require.NoError(t, err, "instance %s", id)
		assert.Equal(t, "Ready", string(st.Phase))
	}
}
