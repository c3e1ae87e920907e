package local

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A new instance boots at a low CPU weight: its processes start in a cgroup of the v1 cpu
// hierarchy, <kobe's own cpu cgroup>/kobe-boot/<id>-<hash of the instance dir>, whose parent has
// cpu.shares = Config.BootCPUShares (default 256: a quarter of a normal task's 1024, shared by
// every boot at once) against the 1024 of every runnable task beside kobe. A boot
// costs ~3 s of CPU (kube-apiserver's start); a pool starts one for each member it refills,
// often right while leases are being bound and leased clusters answer their first requests. On
// a busy host the boots then take what CPU is left and bindings, leased clusters and kobe itself
// go first; on an idle host a boot gets every core as before (cpu.shares only weighs runnable
// tasks against each other). Once the instance is Ready its processes go back to kobe's own cpu
// cgroup, so a cluster that is handed out runs at the same priority as any other process, and
// the boot cgroup is removed. A resume (Sleep) or a certificate rotation starts processes of an
// instance that was Ready before: they start at the normal weight, a lease waits on them.
//
// Best effort, as the freezer: without a writable v1 cpu hierarchy (cgroup v2 only, or not
// allowed to create cgroups) instances boot at the normal weight.

// CPURoot is where the cgroup v1 cpu hierarchy is mounted.
var CPURoot = "/sys/fs/cgroup/cpu"

// defaultBootCPUShares is the cpu.shares of the group all booting instances share, unless
// $KOBE_LOCAL_BOOT_CPU_SHARES says otherwise (Config.BootCPUShares; 0 turns it off).
const defaultBootCPUShares = 256

// bootCPUSharesEnv lets an operator (and `make bench`, to measure the difference) choose the
// boot weight: 2 to 262144 (the kernel's range), or 0 for none.
const bootCPUSharesEnv = "KOBE_LOCAL_BOOT_CPU_SHARES"

// BootCPUSharesFromEnv is the boot weight $KOBE_LOCAL_BOOT_CPU_SHARES asks for: the default when
// unset, an error naming the variable when it is not 0 or a number in the kernel's range. Why
// not lower: on a host kept busy for minutes (a CI run), a boot at 64 against eight busy
// threads gets under 1 % of the CPU, minutes for its ~3 s of work.
func BootCPUSharesFromEnv() (int, error) {
	v, ok := os.LookupEnv(bootCPUSharesEnv)
	if !ok || strings.TrimSpace(v) == "" {
		return defaultBootCPUShares, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || (n != 0 && (n < 2 || n > 262144)) {
		return 0, fmt.Errorf("%s=%q: want 0 (no low boot weight) or a cpu.shares value from 2 to 262144", bootCPUSharesEnv, v)
	}
	return n, nil
}

// ownCPUCgroup is the cpu cgroup of this process, relative to CPURoot ("/" when in the root).
func ownCPUCgroup() string {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "/"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// hierarchy-ID:controller-list:path, e.g. "1:cpu:/" or "4:cpu,cpuacct:/system.slice/kobe.service"
		parts := strings.SplitN(s.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "cpu" {
				return parts[2]
			}
		}
	}
	return "/"
}

// bootCPU places the processes of booting instances. Zero value: off.
type bootCPU struct {
	home   string // kobe's own cpu cgroup (a directory under CPURoot), where Ready instances run
	parent string // home/kobe-boot, cpu.shares = shares
	shares int
}

// newBootCPU prepares the boot group with the given weight (0: off).
func newBootCPU(shares int) bootCPU {
	if shares == 0 {
		return bootCPU{}
	}
	home := filepath.Join(CPURoot, ownCPUCgroup())
	return bootCPU{home: home, parent: filepath.Join(home, "kobe-boot"), shares: shares}
}

// dirOf is the boot cgroup of the instance in dir (named as its freezer cgroup).
func (c bootCPU) dirOf(instanceDir string) string {
	if c.parent == "" {
		return ""
	}
	return filepath.Join(c.parent, filepath.Base(freezerDirOf(instanceDir)))
}

// join puts pid into the instance's boot cgroup, creating it (and the shared parent with its
// weight) if needed. The error says why the process boots at the normal weight.
func (c bootCPU) join(instanceDir string, pid int) error {
	if c.parent == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(c.home, "cpu.shares")); err != nil {
		return fmt.Errorf("no cgroup v1 cpu hierarchy at %s", CPURoot)
	}
	if err := os.MkdirAll(c.parent, 0o755); err != nil {
		return fmt.Errorf("creating the boot cpu cgroup: %w", err)
	}
	// Written every time: cheap, and a parent another kobe created with another weight (or the
	// kernel's default, when it died between mkdir and write) gets this kobe's.
	if err := os.WriteFile(filepath.Join(c.parent, "cpu.shares"), []byte(strconv.Itoa(c.shares)), 0o644); err != nil {
		return fmt.Errorf("setting the boot weight: %w", err)
	}
	dir := c.dirOf(instanceDir)
	write := func() error {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
	}
	err := write()
	if errors.Is(err, os.ErrNotExist) {
		err = write() // another kobe's sweep took the new, still empty cgroup: once more
	}
	if err != nil {
		return fmt.Errorf("moving pid %d into %s: %w", pid, dir, err)
	}
	return nil
}

// leave moves every process of the instance's boot cgroup back to kobe's own cpu cgroup and
// removes the boot cgroup: the instance is Ready. Nothing to do when it has none.
func (c bootCPU) leave(instanceDir string) error {
	if c.parent == "" {
		return nil
	}
	dir := c.dirOf(instanceDir)
	pids, err := cgroupProcs(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, pid := range pids {
		err := os.WriteFile(filepath.Join(c.home, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
		// ESRCH: the process exited meanwhile; its status reports that, not this.
		if err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("moving pid %d out of the boot cpu cgroup: %w", pid, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return removeCgroup(dir)
}

// remove removes the instance's (empty) boot cgroup, if any: Delete of an instance that was
// never Ready.
func (c bootCPU) remove(instanceDir string) error {
	if c.parent == "" {
		return nil
	}
	return removeCgroup(c.dirOf(instanceDir))
}

// sweep removes the boot cgroups that hold no process (their instances' processes were killed
// and directories removed without Delete). A cgroup with a process refuses rmdir, so another
// kobe's booting instance is never touched.
func (c bootCPU) sweep() {
	if c.parent == "" {
		return
	}
	entries, err := os.ReadDir(c.parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(c.parent, e.Name())
		if pids, err := cgroupProcs(dir); err == nil && len(pids) == 0 {
			_ = os.Remove(dir)
		}
	}
}

// cgroupProcs lists the processes of a v1 cgroup.
func cgroupProcs(dir string) ([]int, error) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// removeCgroup removes an empty cgroup; gone already is fine. A task that was just killed or
// moved leaves it only once the kernel is done with it, so EBUSY is retried for up to 10 s.
func removeCgroup(dir string) error {
	err := os.Remove(dir)
	for deadline := time.Now().Add(10 * time.Second); errors.Is(err, syscall.EBUSY) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		err = os.Remove(dir)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the cgroup %s: %w", dir, err)
	}
	return nil
}
