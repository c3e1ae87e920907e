package hostcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What a real node touches on the machine. Several of these are global (sysctls, iptables, the
// paths containerd and kubelet hard-code), so only one real node runs per machine at a time:
// StartReal holds an exclusive lock on lockFile for the node's life.
const (
	// workRoot holds everything of the node: configuration, certificates, containerd's root and
	// state, kubelet's root, logs. Short, because unix socket paths must stay under 108 bytes.
	workRoot = "/run/kobe-hostcluster"
	// savedFile is what the node changed that is not its own: the sysctls' values before the
	// start and the global paths and nftables tables that did not exist. Teardown, or the next
	// start after an interrupted run, reads it to undo those changes.
	savedFile = workRoot + ".saved.json"
	lockFile  = "/run/lock/kobe-hostcluster.lock"

	// The node's network: a bridge the test creates, the node's address on it, the pods' range
	// and the Service range, all routed to the bridge and nowhere else.
	bridgeName    = "kobe0"
	nodeIP        = "10.88.0.1"
	podSubnet     = "10.88.0.0/16"
	podRangeStart = "10.88.1.1"
	podRangeEnd   = "10.88.255.254"
	serviceCIDR   = "10.96.77.0/24"
	// kubernetesServiceIP is the first address of serviceCIDR (the kubernetes Service), dnsIP
	// the cluster DNS Service's.
	kubernetesServiceIP = "10.96.77.1"
	dnsIP               = "10.96.77.10"
	// cgroupRoot is the kubelet's cgroup root in every cgroup v1 controller: every container
	// process of the node lives below it.
	cgroupRoot = "kobehc"
	nodeName   = "kobe-node"
)

// touchedSysctls are the global sysctls the node's parts write: kubelet sets the kernel.* and
// vm.* ones at start (its "kernel tunables"), the bridge CNI plugin turns on forwarding.
var touchedSysctls = []string{
	"kernel.panic",
	"kernel.panic_on_oops",
	"kernel.keys.root_maxkeys",
	"kernel.keys.root_maxbytes",
	"vm.overcommit_memory",
	"vm.panic_on_oom",
	"net.ipv4.ip_forward",
	"net.ipv4.conf.all.forwarding",
	"net.ipv4.conf.all.route_localnet",
	"net.ipv6.conf.all.forwarding",
	"net.bridge.bridge-nf-call-iptables",
	"net.bridge.bridge-nf-call-ip6tables",
}

// globalPaths are the paths outside workRoot the node's parts create whatever they are told:
// containerd's shim sockets (/run/containerd/s), kubelet's device-plugin socket and container
// log links, libcni's result cache. Those that did not exist before the start are removed.
var globalPaths = []string{
	"/run/containerd",
	"/var/lib/kubelet",
	"/var/log/containers",
	"/var/log/pods",
	"/var/lib/cni",
	"/etc/cni",
	"/opt/cni",
	"/var/run/netns",
	"/usr/libexec/kubernetes",
	"/var/lib/containerd",
	"/etc/kubernetes",
}

// saved is the content of savedFile.
type saved struct {
	Sysctls map[string]string `json:"sysctls"`
	// CreatedPaths are the globalPaths that did not exist before the start.
	CreatedPaths []string `json:"createdPaths"`
	// NftTables are the nftables tables ("family name") that existed before the start.
	NftTables []string `json:"nftTables"`
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

func readSysctl(name string) (string, bool) {
	data, err := os.ReadFile(sysctlPath(name))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(data)), true
}

// restoreSysctls writes back every saved value that differs; it returns what it changed.
func restoreSysctls(values map[string]string) []string {
	var changed []string
	for _, name := range sortedKeys(values) {
		if cur, ok := readSysctl(name); ok && cur != values[name] {
			if err := os.WriteFile(sysctlPath(name), []byte(values[name]), 0o644); err == nil {
				changed = append(changed, fmt.Sprintf("%s %s→%s", name, cur, values[name]))
			}
		}
	}
	return changed
}

// recordMachine saves what the node is about to change (savedFile).
func recordMachine() (saved, error) {
	s := saved{Sysctls: map[string]string{}}
	for _, name := range touchedSysctls {
		if v, ok := readSysctl(name); ok {
			s.Sysctls[name] = v
		}
	}
	for _, p := range globalPaths {
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			s.CreatedPaths = append(s.CreatedPaths, p)
		}
	}
	s.NftTables = nftTables()
	data, _ := json.MarshalIndent(s, "", "  ")
	return s, os.WriteFile(savedFile, data, 0o600)
}

func loadSaved() (saved, bool) {
	data, err := os.ReadFile(savedFile)
	if err != nil {
		return saved{}, false
	}
	var s saved
	if json.Unmarshal(data, &s) != nil {
		return saved{}, false
	}
	return s, true
}

// cleanMachine removes everything of a node that is not running any more (stopped, or left by
// an interrupted run): processes, mounts, links, routes, nftables tables and chains, cgroups,
// paths; and restores the sysctls. It returns what it found, for the test log.
func cleanMachine() []string {
	var found []string
	note := func(format string, args ...any) { found = append(found, fmt.Sprintf(format, args...)) }

	// Processes first: they hold mounts and network namespaces.
	for i := 0; i < 50; i++ {
		pids := nodeProcesses()
		if len(pids) == 0 {
			break
		}
		if i == 0 {
			note("killed processes %v", pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Mounts can be stacked (kubelet bind-mounts its root onto itself): unmount until none is left.
	for pass := 0; pass < 5; pass++ {
		mounts := nodeMounts()
		if len(mounts) == 0 {
			break
		}
		for _, m := range mounts {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err == nil {
				note("unmounted %s", m)
			}
		}
	}
	for _, link := range nodeLinks() {
		if out, err := exec.Command("ip", "link", "delete", link).CombinedOutput(); err == nil {
			note("deleted link %s", link)
		} else if !strings.Contains(string(out), "Cannot find device") {
			note("deleting link %s: %s", link, strings.TrimSpace(string(out)))
		}
	}
	// The routes of the bridge go with it; the Service range is routed to the bridge too.
	if out, err := exec.Command("ip", "route", "show", serviceCIDR).Output(); err == nil && strings.TrimSpace(string(out)) != "" {
		_ = exec.Command("ip", "route", "delete", serviceCIDR).Run()
		note("deleted route %s", serviceCIDR)
	}

	s, haveSaved := loadSaved()
	found = append(found, cleanNftables(s.NftTables, haveSaved)...)
	for _, dir := range nodeCgroups() {
		if removeCgroup(dir) == nil {
			note("removed cgroup %s", dir)
		}
	}
	if haveSaved {
		if changed := restoreSysctls(s.Sysctls); len(changed) > 0 {
			note("restored sysctls %v", changed)
		}
		for _, p := range s.CreatedPaths {
			if _, err := os.Lstat(p); err == nil {
				if err := os.RemoveAll(p); err == nil {
					note("removed %s", p)
				}
			}
		}
	}
	if _, err := os.Stat(workRoot); err == nil {
		if err := os.RemoveAll(workRoot); err != nil {
			note("removing %s: %v", workRoot, err)
		}
	}
	os.Remove(savedFile)
	return found
}

// nodeProcesses are the node's processes: every one whose command line names workRoot
// (containerd, its shims, kubelet, the control plane) and every one in the node's cgroups (the
// containers').
func nodeProcesses() []int {
	seen := map[int]bool{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(data), workRoot+"/") && !zombie(pid) {
			seen[pid] = true
		}
	}
	for _, dir := range nodeCgroups() {
		data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() && !zombie(pid) {
				seen[pid] = true
			}
		}
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	sort.Ints(out)
	return out
}

func zombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// nodeMounts are the mount points below workRoot or a global path, deepest first.
func nodeMounts() []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if under(mp, workRoot) || under(mp, "/var/lib/kubelet") || under(mp, "/run/containerd") || under(mp, "/var/run/netns") || under(mp, "/run/netns") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// nodeLinks are the bridge and every interface enslaved to it (the pods' veths).
func nodeLinks() []string {
	var out []string
	ports, _ := os.ReadDir(filepath.Join("/sys/class/net", bridgeName, "brif"))
	for _, p := range ports {
		out = append(out, p.Name())
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", bridgeName)); err == nil {
		out = append(out, bridgeName)
	}
	return out
}

// bridgePorts are the interfaces on the node's bridge: one veth per running pod.
func bridgePorts() []string {
	var out []string
	ports, _ := os.ReadDir(filepath.Join("/sys/class/net", bridgeName, "brif"))
	for _, p := range ports {
		out = append(out, p.Name())
	}
	return out
}

// cgroupControllers are the mount points of the cgroup v1 hierarchies (cpu, memory, pids,
// name=systemd…); none on a machine with only the unified (v2) hierarchy.
func cgroupControllers() []string { return cgroupMounts("cgroup") }

// cgroupHierarchies are every cgroup mount, v1 and v2: on a hybrid machine runc also creates
// each container's cgroup in the unified hierarchy (/sys/fs/cgroup/unified), where the node's
// cgroups must be cleaned up as well.
func cgroupHierarchies() []string { return append(cgroupMounts("cgroup"), cgroupMounts("cgroup2")...) }

func cgroupMounts(fstype string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		fields, rest, ok := strings.Cut(line, " - ")
		f := strings.Fields(fields)
		if ok && len(f) > 4 && strings.HasPrefix(rest, fstype+" ") {
			out = append(out, unescapeMount(f[4]))
		}
	}
	sort.Strings(out)
	return out
}

// nodeCgroups are the node's cgroup directories in every hierarchy, deepest first.
func nodeCgroups() []string {
	var out []string
	for _, c := range cgroupHierarchies() {
		root := filepath.Join(c, cgroupRoot)
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				out = append(out, p)
			}
			return nil
		})
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func removeCgroup(dir string) error {
	var err error
	for i := 0; i < 20; i++ {
		if err = syscall.Rmdir(dir); err == nil || os.IsNotExist(err) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// createCgroupRoot creates the kubelet's cgroup root in every controller. cpuset needs its
// cpus and mems set before a process can join, so they are copied from the parent.
func createCgroupRoot() error {
	for _, c := range cgroupControllers() {
		dir := filepath.Join(c, cgroupRoot)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if data, err := os.ReadFile(filepath.Join(c, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
					return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
				}
			}
		}
	}
	return nil
}

// nftTables lists the nftables tables as "family name".
func nftTables() []string {
	out, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil
	}
	var tables []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "table" {
			tables = append(tables, f[1]+" "+f[2])
		}
	}
	sort.Strings(tables)
	return tables
}

// cleanNftables removes what kube-proxy, kubelet and the CNI plugins put into the firewall
// (iptables here is iptables-nft): tables that did not exist before the start are deleted
// whole; in those that did, the KUBE-* and CNI-* chains and the rules jumping to them.
func cleanNftables(before []string, haveBefore bool) []string {
	var found []string
	existed := map[string]bool{}
	for _, t := range before {
		existed[t] = true
	}
	for _, tool := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle", "raw"} {
			found = append(found, cleanChains(tool, table)...)
		}
	}
	for _, t := range nftTables() {
		// Without a record of what existed (an interrupted run), a table that is empty after
		// the sweep above is one the node created: an empty table and no table filter alike.
		if (haveBefore && !existed[t]) || (!haveBefore && (emptyNftTable(t) || strings.HasSuffix(t, " kube-proxy"))) {
			if out, err := exec.Command("nft", "delete", "table", strings.Fields(t)[0], strings.Fields(t)[1]).CombinedOutput(); err != nil {
				found = append(found, fmt.Sprintf("deleting nftables table %s: %s", t, strings.TrimSpace(string(out))))
			} else {
				found = append(found, "deleted nftables table "+t)
			}
		}
	}
	return found
}

// emptyNftTable reports that a table holds only base chains without rules, accepting all.
func emptyNftTable(table string) bool {
	f := strings.Fields(table)
	out, err := exec.Command("nft", "list", "table", f[0], f[1]).Output()
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(out), "\n") {
		l := strings.TrimSpace(line)
		switch {
		case l == "", l == "}", strings.HasPrefix(l, "table "), strings.HasPrefix(l, "chain "):
		case strings.HasPrefix(l, "type ") && strings.Contains(l, "policy accept;"):
		default:
			return false
		}
	}
	return true
}

var nodeChain = regexp.MustCompile(`^(KUBE-|CNI-)`)

func cleanChains(tool, table string) []string {
	out, err := exec.Command(tool+"-save", "-t", table).Output()
	if err != nil {
		return nil
	}
	var chains, jumps []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, ":") {
			if name := strings.Fields(line[1:])[0]; nodeChain.MatchString(name) {
				chains = append(chains, name)
			}
		}
		if strings.HasPrefix(line, "-A ") {
			f := strings.Fields(line)
			if len(f) > 1 && !nodeChain.MatchString(f[1]) {
				for i := 2; i+1 < len(f); i++ {
					if (f[i] == "-j" || f[i] == "-g") && nodeChain.MatchString(f[i+1]) {
						jumps = append(jumps, line)
					}
				}
			}
		}
	}
	if len(chains) == 0 && len(jumps) == 0 {
		return nil
	}
	for _, rule := range jumps {
		args := append([]string{"-t", table, "-D"}, strings.Fields(strings.TrimPrefix(rule, "-A "))...)
		_ = exec.Command(tool, args...).Run()
	}
	for _, c := range chains {
		_ = exec.Command(tool, "-t", table, "-F", c).Run()
	}
	for _, c := range chains {
		_ = exec.Command(tool, "-t", table, "-X", c).Run()
	}
	return []string{fmt.Sprintf("removed %s %s chains %v", tool, table, chains)}
}

// machineState is what a leak check compares before a node starts and after it is gone:
// processes, mounts, links, network namespaces, routes, the firewall, cgroups, sysctls, paths.
type machineState map[string]string

func snapshotMachine() machineState {
	s := machineState{}
	s["processes"] = fmt.Sprint(nodeProcesses())
	s["mounts"] = strings.Join(nodeMounts(), " ")
	// Only the node's kind of links: the bridge and veths (the CNI plugin names them veth…);
	// other tests on the machine may add links of their own.
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	var nodeLike []string
	for _, l := range linkNames(string(links)) {
		if l == bridgeName || strings.HasPrefix(l, "veth") {
			nodeLike = append(nodeLike, l)
		}
	}
	s["links"] = strings.Join(nodeLike, " ")
	routes, _ := exec.Command("ip", "route", "show", "table", "all").Output()
	s["routes"] = strings.TrimSpace(string(routes))
	netns, _ := exec.Command("ip", "netns", "list").Output()
	s["netns"] = strings.TrimSpace(string(netns))
	s["nftables"] = normalizedRuleset()
	s["cgroups"] = strings.Join(nodeCgroups(), " ")
	for _, name := range touchedSysctls {
		if v, ok := readSysctl(name); ok {
			s["sysctl "+name] = v
		}
	}
	for _, p := range append([]string{workRoot}, globalPaths...) {
		_, err := os.Lstat(p)
		s["path "+p] = strconv.FormatBool(err == nil)
	}
	return s
}

func linkNames(out string) []string {
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 1 {
			names = append(names, strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0])
		}
	}
	sort.Strings(names)
	return names
}

var nftCounters = regexp.MustCompile(`counter packets \d+ bytes \d+`)

// normalizedRuleset is the nftables ruleset without counters (they change with traffic).
func normalizedRuleset() string {
	out, err := exec.Command("nft", "list", "ruleset").Output()
	if err != nil {
		return "unavailable: " + err.Error()
	}
	return strings.TrimSpace(nftCounters.ReplaceAllString(string(out), "counter"))
}

// diff lists what differs from before.
func (s machineState) diff(before machineState) []string {
	keys := map[string]bool{}
	for k := range s {
		keys[k] = true
	}
	for k := range before {
		keys[k] = true
	}
	var out []string
	for _, k := range sortedKeys(keys) {
		if s[k] != before[k] {
			out = append(out, fmt.Sprintf("%s: before %q, now %q", k, before[k], s[k]))
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
