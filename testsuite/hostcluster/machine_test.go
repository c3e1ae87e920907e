package hostcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// The debris of an interrupted run — the bridge with a veth, the Service route, firewall chains,
// a cgroup with a process (and runc's cgroups in the unified hierarchy), a mount and a process under the node's folder, a changed sysctl, a
// global path the node created — is found and removed by the next start, leaving the machine
// as it was.
func TestDebrisOfAnInterruptedRunIsCleaned(t *testing.T) {
	if testing.Short() {
		t.Skip("changes the machine's network; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (bridges, cgroups, mounts)")
	}
	for _, bin := range []string{"ip", "iptables", "iptables-save", "ip6tables", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed (apt-get install iproute2 iptables nftables)", bin)
		}
	}
	if len(cgroupControllers()) == 0 {
		t.Skip("no cgroup v1 controllers")
	}
	unlock := lockMachine(t)
	defer unlock()
	cleanMachine()
	before := snapshotMachine()

	// What an interrupted run leaves: first the record of the machine, as a start writes it.
	require.NoError(t, os.MkdirAll(filepath.Join(workRoot, "kubelet"), 0o755))
	s, err := recordMachine()
	require.NoError(t, err)
	require.NoError(t, (&RealCluster{}).network())
	run := func(name string, args ...string) {
		out, err := exec.Command(name, args...).CombinedOutput()
		require.NoError(t, err, "%s %v: %s", name, args, out)
	}
	run("ip", "link", "add", "vethdebris0", "type", "veth", "peer", "name", "vethdebris1")
	run("ip", "link", "set", "vethdebris0", "master", bridgeName)
	run("iptables", "-t", "nat", "-N", "KUBE-SERVICES")
	run("iptables", "-t", "nat", "-A", "OUTPUT", "-j", "KUBE-SERVICES")
	run("iptables", "-t", "filter", "-N", "KUBE-FIREWALL")
	require.NoError(t, createCgroupRoot())
	sleeper := exec.Command("sleep", "600")
	require.NoError(t, sleeper.Start())
	go sleeper.Wait() //nolint:errcheck // killed by the cleanup
	pids := filepath.Join(cgroupControllers()[0], cgroupRoot, "cgroup.procs")
	require.NoError(t, os.WriteFile(pids, []byte(strconv.Itoa(sleeper.Process.Pid)), 0o644))
	// runc's cgroups in the unified hierarchy of a hybrid machine.
	for _, h := range cgroupMounts("cgroup2") {
		require.NoError(t, os.MkdirAll(filepath.Join(h, cgroupRoot, "kubepods", "besteffort"), 0o755))
	}
	mnt := filepath.Join(workRoot, "kubelet", "tmpfs")
	require.NoError(t, os.MkdirAll(mnt, 0o755))
	require.NoError(t, syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"))
	for _, p := range s.CreatedPaths {
		if p == "/var/log/containers" {
			require.NoError(t, os.MkdirAll(p, 0o755))
		}
	}
	if v, ok := s.Sysctls["vm.overcommit_memory"]; ok {
		other := "1"
		if v == "1" {
			other = "0"
		}
		require.NoError(t, os.WriteFile(sysctlPath("vm.overcommit_memory"), []byte(other), 0o644))
	}
	require.NotEmpty(t, snapshotMachine().diff(before), "the debris changed the machine")

	found := cleanMachine()
	t.Logf("cleaned: %s", strings.Join(found, "; "))
	require.Empty(t, snapshotMachine().diff(before), "the machine after the cleanup")
	require.Empty(t, nodeProcesses())
}
