package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

// skipWithoutCPUCgroups skips a test on a machine where this process cannot create cgroups in
// the v1 cpu hierarchy.
func skipWithoutCPUCgroups(t *testing.T) {
	t.Helper()
	probe := filepath.Join(local.CPURoot, fmt.Sprintf("kobe-probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		t.Skipf("needs a writable cgroup v1 cpu hierarchy at %s: %v", local.CPURoot, err)
	}
	_ = os.Remove(probe)
}

// cpuCgroupsOf maps each process of the instance (kine, kube-apiserver, …) to its cpu cgroup,
// relative to the hierarchy's root, read from /proc/<pid>/cgroup.
func cpuCgroupsOf(t *testing.T, state, id string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range leaks.ProcessesNaming(filepath.Join(state, "local", "instances", id) + "/") {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.PID))
		require.NoError(t, err)
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.SplitN(line, ":", 3)
			if len(f) == 3 && f[1] == "cpu" {
				out[fmt.Sprintf("%s (pid %d)", p.Name, p.PID)] = f[2]
			}
		}
	}
	return out
}

// ownCPUCgroup is this test process's cpu cgroup: where a Ready instance's processes belong.
func ownCPUCgroup(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/cgroup")
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && f[1] == "cpu" {
			return f[2]
		}
	}
	t.Skip("this process has no cgroup v1 cpu controller of its own (co-mounted hierarchies are not read by this test)")
	return ""
}

// TestInstanceBootsAtALowCPUWeightUntilReady: the processes of a new instance start in a boot
// cgroup whose parent carries the low weight; once Ready they are back in kobe's own cpu cgroup
// and the boot cgroup is gone. A kobe restarted mid-boot finishes the job. Delete of an
// instance that was never Ready leaves no cgroup. With the weight off, processes never move.
func TestInstanceBootsAtALowCPUWeightUntilReady(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real kube-apiserver processes; skipped with -short")
	}
	skipWithoutCPUCgroups(t)
	own := ownCPUCgroup(t)
	shares, err := local.BootCPUSharesFromEnv()
	require.NoError(t, err)
	if shares == 0 {
		t.Skip("KOBE_LOCAL_BOOT_CPU_SHARES=0 turns the boot weight off")
	}
	ctx := context.Background()
	tools := local.DefaultToolsDir()
	if len(local.Tools{Dir: tools}.KubernetesVersions()) == 0 {
		t.Fatalf("no Kubernetes binaries in %s: run `make tools` (make test does it for you)", tools)
	}
	open := func(state string, shares int) *local.Backend {
		b, err := local.New(local.Config{StateDir: state, HostID: "test-host", ToolsDir: tools, BootCPUShares: shares})
		require.NoError(t, err)
		return b
	}
	parent := filepath.Join(local.CPURoot, own, "kobe-boot")

	t.Run("boots low, runs normal once Ready", func(t *testing.T) {
		state := t.TempDir()
		b := open(state, shares)
		id := "boot-weight"
		t.Cleanup(func() { _ = b.Delete(context.Background(), id) })
		_, err := b.Create(ctx, spec(id, ""))
		require.NoError(t, err)

		// Create returns once kine and the API server started: both are in the boot cgroup.
		groups := cpuCgroupsOf(t, state, id)
		require.Len(t, groups, 2, "kine and kube-apiserver: %v", groups)
		var bootDir string
		for proc, g := range groups {
			assert.Contains(t, g, "/kobe-boot/"+id+"-", "%s boots in the instance's boot cgroup", proc)
			bootDir = filepath.Join(local.CPURoot, g)
		}
		weight, err := os.ReadFile(filepath.Join(parent, "cpu.shares"))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint(shares), strings.TrimSpace(string(weight)), "the boot cgroups' parent carries the boot weight")
		st, err := b.Status(ctx, id)
		require.NoError(t, err)
		assert.Empty(t, st.Message, "no reason to boot at the normal weight is reported")

		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		_, err = b.WaitReady(wctx, id, nil)
		require.NoError(t, err)
		for proc, g := range cpuCgroupsOf(t, state, id) {
			assert.Equal(t, own, g, "%s runs in kobe's own cpu cgroup once Ready", proc)
		}
		assert.NoDirExists(t, bootDir, "the boot cgroup is removed once the instance is Ready")

		// A resume after sleep starts processes again: at the normal weight, a lease waits on them.
		require.NoError(t, b.Sleep(ctx, id))
		require.NoError(t, b.Resume(ctx, id))
		for proc, g := range cpuCgroupsOf(t, state, id) {
			assert.Equal(t, own, g, "%s of a resumed instance starts at the normal weight", proc)
		}
		_, err = b.WaitReady(wctx, id, nil)
		require.NoError(t, err)
	})

	t.Run("a restart mid-boot, then Ready", func(t *testing.T) {
		state := t.TempDir()
		b := open(state, shares)
		id := "boot-restart"
		_, err := b.Create(ctx, spec(id, ""))
		require.NoError(t, err)
		b2 := open(state, shares) // kobe restarted: it adopts the booting instance
		t.Cleanup(func() { _ = b2.Delete(context.Background(), id) })
		for proc, g := range cpuCgroupsOf(t, state, id) {
			assert.Contains(t, g, "/kobe-boot/"+id+"-", "%s is still booting low after the restart", proc)
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		_, err = b2.WaitReady(wctx, id, nil)
		require.NoError(t, err)
		for proc, g := range cpuCgroupsOf(t, state, id) {
			assert.Equal(t, own, g, "%s runs in kobe's own cpu cgroup once Ready", proc)
		}
	})

	t.Run("deleted while booting: no cgroup remains", func(t *testing.T) {
		state := t.TempDir()
		b := open(state, shares)
		id := "boot-delete"
		_, err := b.Create(ctx, spec(id, ""))
		require.NoError(t, err)
		var bootDir string
		for _, g := range cpuCgroupsOf(t, state, id) {
			bootDir = filepath.Join(local.CPURoot, g)
		}
		require.DirExists(t, bootDir)
		require.NoError(t, b.Delete(ctx, id))
		assert.NoDirExists(t, bootDir)
		_, err = b.Status(ctx, id)
		assert.ErrorIs(t, err, backends.ErrNotFound)
	})

	t.Run("off: processes stay where kobe is", func(t *testing.T) {
		state := t.TempDir()
		b := open(state, 0)
		id := "boot-normal"
		t.Cleanup(func() { _ = b.Delete(context.Background(), id) })
		_, err := b.Create(ctx, spec(id, ""))
		require.NoError(t, err)
		groups := cpuCgroupsOf(t, state, id)
		require.Len(t, groups, 2)
		for proc, g := range groups {
			assert.Equal(t, own, g, "%s boots at the normal weight when the low one is off", proc)
		}
	})
}

func TestBootCPUSharesFromEnv(t *testing.T) {
	for _, c := range []struct {
		env  string
		want int
		err  string
	}{
		{"", 256, ""},
		{"0", 0, ""},
		{"2", 2, ""},
		{" 512 ", 512, ""},
		{"262144", 262144, ""},
		{"1", 0, "KOBE_LOCAL_BOOT_CPU_SHARES=\"1\""},
		{"262145", 0, "from 2 to 262144"},
		{"low", 0, "want 0 (no low boot weight)"},
		{"-5", 0, "want 0"},
	} {
		t.Setenv("KOBE_LOCAL_BOOT_CPU_SHARES", c.env)
		got, err := local.BootCPUSharesFromEnv()
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, "env %q", c.env)
			continue
		}
		require.NoError(t, err, "env %q", c.env)
		assert.Equal(t, c.want, got, "env %q", c.env)
	}
}
