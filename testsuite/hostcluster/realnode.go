package hostcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/internal/kubeconfig"
	"github.com/kunobi-ninja/kobe/internal/loopback"
	"github.com/kunobi-ninja/kobe/internal/pki"
	"github.com/kunobi-ninja/kobe/testsuite/hostcluster/images"
)

// RealOptions of a host cluster with a real node.
type RealOptions struct {
	// FakeNodes is the number of kwok nodes beside the real one (default none). They carry the
	// taint kwok.x-k8s.io/node=fake:NoSchedule, so that only pods tolerating it land there.
	FakeNodes int
	// VClusterImages also imports the vcluster syncer and distro images (images.VCluster,
	// images.VClusterKubernetes; ~360 MB, so only when asked). The test skips when `make tools`
	// did not build the syncer (hack/build-vcluster-tools.sh).
	VClusterImages bool
	// K3s also imports the rancher/k3s image of the k3s that hack/build-k3s-tools.sh built
	// (about 240 MB: only the tests that run k3s ask for it). Without that k3s the test skips.
	K3s bool
}

// RealCluster is a running host cluster with one real node: kine, kube-apiserver,
// kube-controller-manager, kube-scheduler, and on this machine kubelet, containerd with runc,
// kube-proxy (iptables), a CNI bridge and, when `make tools` built it, CoreDNS; plus kwok for
// fake nodes. Pods on the real node run as processes in their own network namespaces.
type RealCluster struct {
	*Cluster
	// KubeconfigPath is the admin kubeconfig on disk (for kubectl).
	KubeconfigPath string
	// KubectlBinary is the kubectl `make tools` built.
	KubectlBinary string
	// NodeName is the real node's name, NodeIP its address on the bridge.
	NodeName, NodeIP string
	// PodSubnet and ServiceCIDR are the pods' and Services' ranges, routed only to the bridge.
	PodSubnet, ServiceCIDR string
	// DNS says whether cluster DNS (CoreDNS at DNSIP) runs.
	DNS   bool
	DNSIP string
	// Images are the image names imported into the node's containerd.
	Images []string
	// KubernetesVersion of every part.
	KubernetesVersion string
	// RoutesBefore are the machine's routes (Routes) before the node started.
	RoutesBefore []string

	tools    nodeTools
	endpoint string
	// sysctlsRestored are the changes of global sysctls (by kubelet) that were put back.
	sysctlsRestored []string
	mu              sync.Mutex
	procs           map[string]*proc
	// stopGuard stops the goroutine that puts back the sysctls kubelet rewrites.
	stopGuard func()
}

// nodeTools are the binaries of versions.env (hack/build-tools.sh, hack/build-node-tools.sh).
type nodeTools map[string]string

// required are the versions.env entries a real node needs; COREDNS is optional.
var required = []string{"KUBE_APISERVER", "KUBE_CONTROLLER_MANAGER", "KUBE_SCHEDULER", "KUBECTL", "KINE", "KWOK",
	"KWOK_STAGES_DIR", "KUBELET", "KUBE_PROXY", "CONTAINERD", "CTR", "CONTAINERD_SHIM_RUNC_V2", "RUNC", "CNI_BIN_DIR", "BUSYBOX"}

// loadNodeTools reads versions.env; the error says what is missing and how to get it.
func loadNodeTools(dir string) (nodeTools, error) {
	f, err := os.Open(filepath.Join(dir, "versions.env"))
	if err != nil {
		return nil, fmt.Errorf("no %s/versions.env: run `make tools`", dir)
	}
	defer f.Close()
	t := nodeTools{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			t[k] = v
		}
	}
	for _, k := range required {
		p := t[k]
		if p == "" {
			return nil, fmt.Errorf("%s/versions.env has no %s: run `make tools` (hack/build-node-tools.sh)", dir, k)
		}
		if _, err := os.Stat(p); err != nil {
			hint := "run `make tools`"
			switch k {
			case "RUNC", "CNI_BIN_DIR", "BUSYBOX":
				hint = "as root: apt-get install runc containernetworking-plugins busybox-static (.ci/run does)"
			}
			return nil, fmt.Errorf("%s %s is missing: %s", k, p, hint)
		}
	}
	if _, err := os.Stat(t["COREDNS"]); err != nil {
		delete(t, "COREDNS")
	}
	if _, err := os.Stat(t["VCLUSTER_SYNCER"]); err != nil {
		delete(t, "VCLUSTER_SYNCER")
	}
	if _, err := os.Stat(t["K3S"]); err != nil || t["K3S_VERSION"] == "" {
		delete(t, "K3S") // optional: hack/build-k3s-tools.sh; the k3s backend's tests skip without it
	}
	return t, nil
}

// realNodeMissing says why a real node cannot run here ("" when it can).
func realNodeMissing(tools nodeTools) string {
	if os.Geteuid() != 0 {
		return "a real node needs root (network namespaces, bridges, cgroups, mounts)"
	}
	fs, _ := os.ReadFile("/proc/filesystems")
	if !strings.Contains(string(fs), "overlay") {
		return "the kernel has no overlayfs (containerd's snapshotter)"
	}
	for _, bin := range []string{"ip", "iptables", "iptables-save", "ip6tables", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " is not installed (apt-get install iproute2 iptables nftables)"
		}
	}
	for _, f := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(tools["CNI_BIN_DIR"], f)); err != nil {
			return "CNI plugin " + f + " missing in " + tools["CNI_BIN_DIR"] + " (apt-get install containernetworking-plugins)"
		}
	}
	if len(cgroupControllers()) == 0 {
		return "no cgroup v1 controllers under /sys/fs/cgroup (this fixture encodes the v1 hybrid layout)"
	}
	return ""
}

// StartReal starts a host cluster with a real node, or skips the test saying what is missing.
// The cluster is torn down when the test ends, and the machine is then checked: no process,
// mount, link, network namespace, route, firewall rule, cgroup, sysctl change or path of the
// node may remain (the test fails otherwise). One real node runs per machine at a time; a
// second StartReal waits for the first to end.
func StartReal(t testing.TB, opts RealOptions) *RealCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real node; skipped with -short")
	}
	toolsDir := local.DefaultToolsDir()
	tools, err := loadNodeTools(toolsDir)
	if err != nil {
		t.Skipf("hostcluster: no real node: %v", err)
	}
	if why := realNodeMissing(tools); why != "" {
		t.Skipf("hostcluster: no real node: %s", why)
	}
	if opts.VClusterImages && tools["VCLUSTER_SYNCER"] == "" {
		t.Skipf("hostcluster: no vcluster images: %s/versions.env names no VCLUSTER_SYNCER (run `make tools`: hack/build-vcluster-tools.sh)", toolsDir)
	}
	if !opts.K3s {
		delete(tools, "K3S")
	} else if tools["K3S"] == "" {
		t.Skipf("hostcluster: no k3s in %s/versions.env: run `make tools` (hack/build-k3s-tools.sh)", toolsDir)
	}
	unlock := lockMachine(t)
	t.Cleanup(unlock)

	// Debris of an interrupted run first, then the state every later check compares with.
	if found := cleanMachine(); len(found) > 0 {
		t.Logf("hostcluster: cleaned up after an earlier run: %s", strings.Join(found, "; "))
	}
	before := snapshotMachine()
	routesBefore := Routes()
	t0 := time.Now()
	c := &RealCluster{
		tools: tools, procs: map[string]*proc{},
		NodeName: nodeName, NodeIP: nodeIP, PodSubnet: podSubnet, ServiceCIDR: serviceCIDR, DNSIP: dnsIP,
		KubectlBinary: tools["KUBECTL"], KubeconfigPath: filepath.Join(workRoot, "kubeconfigs", "admin.kubeconfig"),
		KubernetesVersion: strings.TrimPrefix(filepath.Base(filepath.Dir(tools["KUBELET"])), "kubernetes-"),
		RoutesBefore:      routesBefore,
	}
	t.Cleanup(func() {
		c.teardown(t)
		after := snapshotMachine()
		if d := after.diff(before); len(d) > 0 {
			t.Errorf("hostcluster: the real node left the machine changed:\n  %s", strings.Join(d, "\n  "))
		} else {
			t.Logf("hostcluster: machine as before the node (%d checks: processes, mounts, links, netns, routes, nftables, cgroups, sysctls, paths)", len(after))
		}
	})
	if err := c.start(t, opts); err != nil {
		t.Fatalf("hostcluster: %v", err)
	}
	c.Ready = time.Since(t0)
	c.mu.Lock()
	if len(c.sysctlsRestored) > 0 {
		t.Logf("hostcluster: put back the sysctls kubelet changed: %v", c.sysctlsRestored)
	}
	c.mu.Unlock()
	t.Logf("hostcluster: real node %s (%s) ready in %s: images %v, DNS %v, %d fake nodes",
		nodeName, c.endpoint, c.Ready.Round(time.Millisecond), c.Images, c.DNS, opts.FakeNodes)
	return c
}

// lockMachine takes the machine-wide lock of the real node, waiting for another test's node.
func lockMachine(t testing.TB) func() {
	if err := os.MkdirAll(filepath.Dir(lockFile), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Minute)
	for logged := false; ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			t.Fatalf("hostcluster: lock %s: %v", lockFile, err)
		}
		if !logged {
			t.Logf("hostcluster: waiting for another real node on this machine to end (%s)", lockFile)
			logged = true
		}
		time.Sleep(time.Second)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}

func (c *RealCluster) path(parts ...string) string {
	return filepath.Join(append([]string{workRoot}, parts...)...)
}

func (c *RealCluster) start(t testing.TB, opts RealOptions) error {
	for _, d := range []string{"pki", "kubeconfigs", "logs", "config", "kine", "containerd", "cni/net.d", "kubelet/root", "bin"} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			return err
		}
	}
	// What the node changes outside its own folder is recorded before it changes it.
	if _, err := recordMachine(); err != nil {
		return err
	}
	if err := c.network(); err != nil {
		return err
	}
	if err := createCgroupRoot(); err != nil {
		return fmt.Errorf("cgroup root: %w", err)
	}
	apiPort, kinePort := freePort(), freePort()
	if apiPort == 0 || kinePort == 0 {
		return errors.New("no free port")
	}
	c.endpoint = "https://" + nodeIP + ":" + strconv.Itoa(apiPort)
	if err := c.writePKI(); err != nil {
		return err
	}

	// The images and containerd come up while the control plane starts.
	var imagesErr error
	var imagesDone sync.WaitGroup
	imagesDone.Add(1)
	go func() {
		defer imagesDone.Done()
		imagesErr = c.startContainerd(t, opts)
	}()

	p := c.path("pki")
	if err := c.run("kine", c.tools["KINE"], nil,
		"--endpoint", "sqlite://"+c.path("kine", "state.db")+"?_journal=WAL&cache=shared&_busy_timeout=30000",
		"--listen-address", "127.0.0.1:"+strconv.Itoa(kinePort), "--metrics-bind-address", "0"); err != nil {
		return err
	}
	if err := c.run("kube-apiserver", c.tools["KUBE_APISERVER"], nil,
		"--bind-address="+nodeIP, "--advertise-address="+nodeIP, "--secure-port="+strconv.Itoa(apiPort),
		"--etcd-servers=http://127.0.0.1:"+strconv.Itoa(kinePort), "--storage-backend=etcd3",
		"--client-ca-file="+p+"/ca.crt", "--tls-cert-file="+p+"/apiserver.crt", "--tls-private-key-file="+p+"/apiserver.key",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+p+"/sa.pub", "--service-account-signing-key-file="+p+"/sa.key",
		"--service-cluster-ip-range="+serviceCIDR,
		// Node authorization and NodeRestriction: the kubelet acts with its own node identity.
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		// logs, exec, port-forward: the API server calls the kubelet with a client certificate
		// and checks the kubelet's serving certificate against the cluster CA.
		"--kubelet-client-certificate="+p+"/apiserver-kubelet-client.crt", "--kubelet-client-key="+p+"/apiserver-kubelet-client.key",
		"--kubelet-certificate-authority="+p+"/ca.crt", "--kubelet-preferred-address-types=InternalIP",
		"--enable-priority-and-fairness=false", "--allow-privileged=true", "--profiling=false"); err != nil {
		return err
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.waitFor(ctx, "kube-apiserver /readyz", func() (bool, error) {
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && strings.TrimSpace(string(body)) == "ok", nil
	}); err != nil {
		return err
	}
	kc := c.path("kubeconfigs", "admin.kubeconfig")
	if err := c.run("kube-controller-manager", c.tools["KUBE_CONTROLLER_MANAGER"], nil,
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
		"--service-account-private-key-file="+p+"/sa.key", "--root-ca-file="+p+"/ca.crt",
		"--use-service-account-credentials=false", "--service-cluster-ip-range="+serviceCIDR,
		// The CNI plugin hands out the node's pod addresses; no per-node pod CIDRs.
		"--allocate-node-cidrs=false"); err != nil {
		return err
	}
	if err := c.run("kube-scheduler", c.tools["KUBE_SCHEDULER"], nil,
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0"); err != nil {
		return err
	}
	if opts.FakeNodes > 0 {
		if err := c.startKwok(ctx, opts.FakeNodes); err != nil {
			return err
		}
	}

	imagesDone.Wait()
	if imagesErr != nil {
		return imagesErr
	}
	if err := c.startKubelet(); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "node "+nodeName+" Ready", func() (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	}); err != nil {
		return err
	}
	hz, mp := freePort(), freePort()
	if err := os.WriteFile(c.path("config", "kube-proxy.yaml"), []byte(kubeProxyConfig(hz, mp)), 0o644); err != nil {
		return err
	}
	if err := c.run("kube-proxy", c.tools["KUBE_PROXY"], nil, "--config="+c.path("config", "kube-proxy.yaml")); err != nil {
		return err
	}
	// kube-proxy is ready once it synced its rules (its /healthz answers 200).
	if err := c.waitFor(ctx, "kube-proxy /healthz", func() (bool, error) {
		resp, err := (&netClient).Get("http://127.0.0.1:" + strconv.Itoa(hz) + "/healthz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == 200, nil
	}); err != nil {
		return err
	}
	if c.DNS {
		if err := c.startDNS(ctx); err != nil {
			return err
		}
	}
	// Pods need their namespace's ServiceAccount before they can be created.
	return c.waitFor(ctx, "ServiceAccount default/default", func() (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// network creates the bridge with the node's address and routes the Service range to it: a
// packet for a Service address that kube-proxy has not (yet) translated stays on the bridge
// instead of taking the machine's default route.
func (c *RealCluster) network() error {
	for _, args := range [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", nodeIP + "/16", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
		{"route", "add", serviceCIDR, "dev", bridgeName, "src", nodeIP},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

func (c *RealCluster) writePKI() error {
	ca, err := pki.NewCA("kobe-hostcluster", 24*time.Hour)
	if err != nil {
		return err
	}
	files := map[string][]byte{"ca.crt": ca.CertPEM, "ca.key": ca.KeyPEM}
	issue := func(name string, cred pki.Credential, err error) error {
		if err != nil {
			return err
		}
		files[name+".crt"], files[name+".key"] = cred.CertPEM, cred.KeyPEM
		return nil
	}
	ips := []net.IP{net.ParseIP(nodeIP), net.ParseIP(kubernetesServiceIP), net.ParseIP("127.0.0.1")}
	dns := []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"}
	cred, err := ca.IssueServing("kube-apiserver", dns, ips, 24*time.Hour)
	if err := issue("apiserver", cred, err); err != nil {
		return err
	}
	cred, err = ca.IssueClient("kube-apiserver-kubelet-client", []string{"system:masters"}, 24*time.Hour)
	if err := issue("apiserver-kubelet-client", cred, err); err != nil {
		return err
	}
	cred, err = ca.IssueServing(nodeName, []string{nodeName, "localhost"}, []net.IP{net.ParseIP(nodeIP), net.ParseIP("127.0.0.1")}, 24*time.Hour)
	if err := issue("kubelet-serving", cred, err); err != nil {
		return err
	}
	pub, priv, err := pki.NewSigningKey()
	if err != nil {
		return err
	}
	files["sa.pub"], files["sa.key"] = pub, priv
	for name, data := range files {
		if err := os.WriteFile(c.path("pki", name), data, 0o600); err != nil {
			return err
		}
	}
	// Kubeconfigs: the admin (system:masters), the kubelet as its node, kube-proxy as the user
	// the default binding system:node-proxier names.
	for _, u := range []struct {
		file, user string
		groups     []string
	}{
		{"admin", pki.AdminUser, []string{pki.AdminGroup}},
		{"kubelet", "system:node:" + nodeName, []string{"system:nodes"}},
		{"kube-proxy", "system:kube-proxy", nil},
	} {
		cred, err := ca.IssueClient(u.user, u.groups, 24*time.Hour)
		if err != nil {
			return err
		}
		kc, err := kubeconfig.ForClientCert("hostcluster", c.endpoint, ca.CertPEM, cred.CertPEM, cred.KeyPEM, u.user)
		if err != nil {
			return err
		}
		if err := os.WriteFile(c.path("kubeconfigs", u.file+".kubeconfig"), kc, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (c *RealCluster) connect() error {
	kc, err := os.ReadFile(c.KubeconfigPath)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 200, 400
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c.Cluster = &Cluster{Kubeconfig: kc, Config: cfg, Client: client, Endpoint: c.endpoint}
	return nil
}

// startContainerd builds the images, starts containerd and imports them.
func (c *RealCluster) startContainerd(t testing.TB, opts RealOptions) error {
	in := images.Inputs{
		KubernetesVersion: c.KubernetesVersion, KubeAPIServer: c.tools["KUBE_APISERVER"], Kine: c.tools["KINE"],
		Busybox: c.tools["BUSYBOX"], ProgramDir: c.path("bin"),
	}
	if dns := c.tools["COREDNS"]; dns != "" {
		in.CoreDNS, in.CoreDNSVersion = dns, strings.TrimPrefix(filepath.Base(filepath.Dir(dns)), "coredns-")
		c.DNS = true
	}
	// The vcluster images, when asked (StartReal skipped if `make tools` did not build them).
	if syncer := c.tools["VCLUSTER_SYNCER"]; opts.VClusterImages && syncer != "" {
		in.VClusterSyncer, in.VClusterVersion = syncer, strings.TrimPrefix(c.tools["VCLUSTER_VERSION"], "v")
		in.KubeControllerManager = c.tools["KUBE_CONTROLLER_MANAGER"]
	}
	if k3s := c.tools["K3S"]; k3s != "" {
		in.K3s, in.K3sVersion = k3s, c.tools["K3S_VERSION"]
	}
	want, err := images.NodeImages(in)
	if err != nil {
		return err
	}
	// Archives are cached beside the tools: rebuilt only when a binary changed.
	cache := filepath.Join(local.DefaultToolsDir(), "images")
	archives := make([]string, len(want))
	for i, img := range want {
		a, err := images.Archive(img, cache)
		if err != nil {
			return err
		}
		archives[i] = a
	}

	if err := os.WriteFile(c.path("config", "containerd.toml"), []byte(containerdConfig(c.tools["RUNC"], c.tools["CNI_BIN_DIR"])), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(c.path("cni", "net.d", "10-kobe-node.conflist"), []byte(cniConfig()), 0o644); err != nil {
		return err
	}
	// containerd finds its shim on PATH.
	env := []string{"PATH=" + filepath.Dir(c.tools["CONTAINERD_SHIM_RUNC_V2"]) + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if err := c.run("containerd", c.tools["CONTAINERD"], env, "--config", c.path("config", "containerd.toml")); err != nil {
		return err
	}
	sock := c.path("containerd", "containerd.sock")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	im := images.Importer{Ctr: c.tools["CTR"], Address: sock}
	if err := c.waitFor(ctx, "containerd", func() (bool, error) {
		_, err := im.Names()
		return err == nil, nil
	}); err != nil {
		return err
	}
	for _, a := range archives {
		if err := im.Import(a); err != nil {
			return err
		}
	}
	names, err := im.Names()
	if err != nil {
		return err
	}
	for _, img := range want {
		if !contains(names, img.Name) {
			return fmt.Errorf("image %s not in containerd after import (it has %v)", img.Name, names)
		}
		c.Images = append(c.Images, img.Name)
	}
	return nil
}

func (c *RealCluster) startKubelet() error {
	if err := os.WriteFile(c.path("config", "kubelet.yaml"), []byte(kubeletConfig(c.DNS)), 0o644); err != nil {
		return err
	}
	// kubelet rewrites global sysctls as it starts (vm.overcommit_memory, kernel.panic,
	// kernel.panic_on_oops…) and never checks them again: put them back as soon as they change.
	s, ok := loadSaved()
	if !ok {
		return errors.New("no saved machine state")
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			// Forwarding is the bridge plugin's: pods need it while the node runs.
			values := map[string]string{}
			for k, v := range s.Sysctls {
				if !strings.Contains(k, "forwarding") && k != "net.ipv4.ip_forward" {
					values[k] = v
				}
			}
			if changed := restoreSysctls(values); len(changed) > 0 {
				c.mu.Lock()
				c.sysctlsRestored = append(c.sysctlsRestored, changed...)
				c.mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	c.stopGuard = func() { close(stop); <-done }
	return c.run("kubelet", c.tools["KUBELET"], nil,
		"--config="+c.path("config", "kubelet.yaml"),
		"--kubeconfig="+c.path("kubeconfigs", "kubelet.kubeconfig"),
		"--root-dir="+c.path("kubelet", "root"),
		"--hostname-override="+nodeName, "--node-ip="+nodeIP)
}

func (c *RealCluster) startKwok(ctx context.Context, n int) error {
	args := []string{
		"--kubeconfig=" + c.path("kubeconfigs", "admin.kubeconfig"),
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.244.0.0/16", "--node-ip=127.0.0.1",
	}
	for _, s := range []string{"node/fast/node-initialize.yaml", "node/heartbeat/node-heartbeat.yaml",
		"pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml"} {
		args = append(args, "--config="+filepath.Join(c.tools["KWOK_STAGES_DIR"], s))
	}
	if err := c.run("kwok", c.tools["KWOK"], nil, args...); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("kwok-node-%d", i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
				Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
		}
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("fake node %s: %w", name, err)
		}
	}
	return nil
}

func (c *RealCluster) startDNS(ctx context.Context) error {
	var image string
	for _, name := range c.Images {
		if strings.Contains(name, "/coredns/") {
			image = name
		}
	}
	for _, m := range corednsManifests(image) {
		if out, err := c.KubectlInput(m, "apply", "-f", "-"); err != nil {
			return fmt.Errorf("cluster DNS: %v: %s", err, out)
		}
	}
	return c.waitFor(ctx, "CoreDNS Ready", func() (bool, error) {
		d, err := c.Client.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 1, nil
	})
}

// Kubectl runs kubectl with the admin kubeconfig and returns its combined output.
func (c *RealCluster) Kubectl(args ...string) (string, error) { return c.KubectlInput("", args...) }

// KubectlInput runs kubectl with stdin.
func (c *RealCluster) KubectlInput(stdin string, args ...string) (string, error) {
	cmd := exec.Command(c.KubectlBinary, append([]string{"--kubeconfig=" + c.KubeconfigPath}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// PodProcesses are the live processes of a pod on the real node (its cgroup holds its UID).
func (c *RealCluster) PodProcesses(uid string) []int {
	marker := "pod" + uid
	seen := map[int]bool{}
	var out []int
	for _, dir := range nodeCgroups() {
		if !strings.Contains(dir, marker) {
			continue
		}
		data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] && !zombie(pid) {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	return out
}

// Routes are the machine's routes in every table, one normalized line each, sorted.
func Routes() []string {
	out, _ := exec.Command("ip", "route", "show", "table", "all").Output()
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			lines = append(lines, l)
		}
	}
	sort.Strings(lines)
	return lines
}

// BridgePorts are the interfaces on the node's bridge: a veth per pod.
func (c *RealCluster) BridgePorts() []string { return bridgePorts() }

// NetworkNamespaces are the pods' network namespaces (nsfs mounts under containerd's state).
func (c *RealCluster) NetworkNamespaces() []string {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		mp, rest, ok := strings.Cut(line, " - ")
		f := strings.Fields(mp)
		if ok && len(f) > 4 && strings.HasPrefix(rest, "nsfs ") && under(unescapeMount(f[4]), workRoot) {
			out = append(out, unescapeMount(f[4]))
		}
	}
	return out
}

// teardown stops the node in the order that leaves nothing behind: no new pods (controllers
// stopped), the pods deleted through the API so that the kubelet stops their containers and
// networks, kube-proxy's rules removed, kubelet stopped, the remaining containerd tasks killed
// (shims outlive containerd otherwise), containerd and the control plane stopped; then whatever
// remains is removed and the machine's settings restored.
func (c *RealCluster) teardown(t testing.TB) {
	if t.Failed() {
		c.logTails(t)
	}
	t0 := time.Now()
	var steps []string
	step := func(name string) {
		steps = append(steps, fmt.Sprintf("%s %s", name, time.Since(t0).Round(10*time.Millisecond)))
		t0 = time.Now()
	}
	defer func() { t.Logf("hostcluster: teardown: %s", strings.Join(steps, ", ")) }()
	c.stop("kwok", 5*time.Second)
	c.stop("kube-controller-manager", 5*time.Second)
	c.mu.Lock()
	kubelet, proxy, containerd := c.procs["kubelet"], c.procs["kube-proxy"], c.procs["containerd"]
	c.mu.Unlock()
	if c.Cluster != nil && kubelet != nil && kubelet.alive() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		if err := c.deleteAllPods(ctx); err != nil {
			t.Logf("hostcluster: teardown: pods: %v", err)
		}
		cancel()
	}
	step("pods deleted")
	c.stop("kube-proxy", 5*time.Second)
	if proxy != nil {
		if out, err := exec.Command(c.tools["KUBE_PROXY"], "--cleanup", "--config="+c.path("config", "kube-proxy.yaml")).CombinedOutput(); err != nil {
			t.Logf("hostcluster: kube-proxy --cleanup: %v: %s", err, lastLines(string(out), 5))
		}
	}
	step("kube-proxy")
	c.stop("kubelet", 10*time.Second)
	step("kubelet")
	if c.stopGuard != nil {
		c.stopGuard()
	}
	if containerd != nil {
		c.deleteContainers()
	}
	c.stop("containerd", 10*time.Second)
	step("containerd")
	c.stop("kube-scheduler", 5*time.Second)
	c.stop("kube-apiserver", 10*time.Second)
	c.stop("kine", 5*time.Second)
	step("control plane")
	if found := cleanMachine(); len(found) > 0 {
		t.Logf("hostcluster: teardown removed: %s", strings.Join(found, "; "))
	}
	step("machine cleaned")
}

// deleteAllPods deletes every pod of the real node and waits until the kubelet has stopped them.
func (c *RealCluster) deleteAllPods(ctx context.Context) error {
	grace := int64(1)
	list := func() ([]corev1.Pod, error) {
		pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeName})
		if err != nil {
			return nil, err
		}
		return pods.Items, nil
	}
	pods, err := list()
	if err != nil {
		return err
	}
	for _, p := range pods {
		_ = c.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	}
	return c.waitFor(ctx, "the real node's pods gone", func() (bool, error) {
		pods, err := list()
		return err == nil && len(pods) == 0 && len(bridgePorts()) == 0, nil
	})
}

// deleteContainers kills and deletes the tasks containerd still runs (the kubelet stopped every
// pod, but a task it had not deleted yet keeps its shim alive, and shims outlive containerd),
// then deletes the containers.
func (c *RealCluster) deleteContainers() {
	ctr := func(args ...string) (string, error) {
		cmd := exec.Command(c.tools["CTR"], append([]string{"--address", c.path("containerd", "containerd.sock"), "--namespace", "k8s.io"}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	tasks, err := ctr("tasks", "list", "--quiet")
	if err != nil {
		return
	}
	for _, id := range strings.Fields(tasks) {
		_, _ = ctr("tasks", "kill", "--signal", "SIGKILL", id)
	}
	for _, id := range strings.Fields(tasks) {
		_, _ = ctr("tasks", "delete", "--force", id)
	}
	if containers, err := ctr("containers", "list", "--quiet"); err == nil && len(strings.Fields(containers)) > 0 {
		_, _ = ctr(append([]string{"containers", "delete"}, strings.Fields(containers)...)...)
	}
}

func (c *RealCluster) logTails(t testing.TB) {
	entries, _ := os.ReadDir(c.path("logs"))
	for _, e := range entries {
		data, _ := os.ReadFile(c.path("logs", e.Name()))
		t.Logf("hostcluster: last lines of %s:\n%s", e.Name(), lastLines(string(data), 25))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (c *RealCluster) waitFor(ctx context.Context, what string, ok func() (bool, error)) error {
	for {
		done, err := ok()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if done {
			return nil
		}
		if dead := c.deadProcess(); dead != "" {
			return fmt.Errorf("waiting for %s: %s", what, dead)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// freePort is a loopback port outside the kernel's ephemeral range (internal/loopback says why),
// never one this process handed out before: the kernel's pick for `listen :0`, closed at once,
// could be taken by any outgoing connection before the API server, kine or kube-proxy bound it,
// and two calls could return the same port.
func freePort() int {
	ps, err := loopback.Take(1, nil)
	if err != nil {
		return 0
	}
	return ps[0]
}
