// Package capimgmt starts a Cluster API management cluster for tests, from real parts only:
// kube-apiserver + kine + kube-controller-manager (its garbage collector removes the Secrets a
// Cluster owns) made by kobe's local backend, the Cluster API CRDs, and the four managers that
// `make tools` builds (core CAPI, the kubeadm bootstrap and control-plane providers, CAPD with
// its in-memory infrastructure provider) as plain processes.
//
// What kustomize and cert-manager do in a real installation is done here: the contract labels
// on the provider CRDs, one self-signed CA with a serving certificate for 127.0.0.1 shared by
// the managers' webhook servers, and webhook configurations and CRD conversion pointing at
// https://127.0.0.1:<port> with that CA.
//
// CAPD's fake workload API servers take ports 20000+ and its debug server :19000, both fixed
// by CAPD: one management cluster per host at a time (Start waits for its turn).
package capimgmt

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/internal/pki"
)

// Manager is one Cluster API manager process.
type Manager struct {
	Name     string // capi, cabpk, kcp, capd
	Binary   string // file name under capi-<version>/bin
	Provider string // the cluster.x-k8s.io/provider label of its CRDs
	Config   string // its folder under capi-<version>/config
	Webhook  int    // webhook port on 127.0.0.1
	Health   int
	Metrics  int
}

// Managers in start order; ports as in research/capi-feasibility.md (the defaults collide).
var Managers = []Manager{
	{Name: "capi", Binary: "capi-manager", Provider: "cluster-api", Config: "core", Webhook: 19443, Health: 19450, Metrics: 19460},
	{Name: "cabpk", Binary: "kubeadm-bootstrap-manager", Provider: "bootstrap-kubeadm", Config: "bootstrap", Webhook: 19444, Health: 19451, Metrics: 19461},
	{Name: "kcp", Binary: "kubeadm-control-plane-manager", Provider: "control-plane-kubeadm", Config: "controlplane", Webhook: 19445, Health: 19452, Metrics: 19462},
	{Name: "capd", Binary: "capd-manager", Provider: "infrastructure-docker", Config: "infrastructure", Webhook: 19446, Health: 19453, Metrics: 19463},
}

// Cluster is a running management cluster.
type Cluster struct {
	Kubeconfig     []byte
	KubeconfigPath string
	Config         *rest.Config
	Kube           kubernetes.Interface
	Dynamic        dynamic.Interface

	// Ready is how long the whole start took; Timings its parts.
	Ready   time.Duration
	Timings []string

	tools   Tools
	dir     string // logs, certificates, pid files
	procs   map[string]*exec.Cmd
	exited  map[string]chan struct{}
	mapper  *restmapper.DeferredDiscoveryRESTMapper
	caPEM   []byte
	timings time.Time
}

// Tools are the built managers and their config.
type Tools struct {
	BinDir, ConfigDir string
}

// FindTools locates capi-<version>/{bin,config} under $KOBE_TOOLS_DIR (make tools builds them).
func FindTools() (Tools, error) {
	dir := local.DefaultToolsDir()
	built, _ := filepath.Glob(filepath.Join(dir, "capi-v*"))
	if len(built) == 0 {
		return Tools{}, fmt.Errorf("no Cluster API managers in %s (capi-v*/bin): run `make tools`", dir)
	}
	local.SortVersions(built)
	newest := built[len(built)-1]
	t := Tools{BinDir: filepath.Join(newest, "bin"), ConfigDir: filepath.Join(newest, "config")}
	for _, m := range Managers {
		if _, err := os.Stat(filepath.Join(t.BinDir, m.Binary)); err != nil {
			return Tools{}, fmt.Errorf("%s missing in %s: run `make tools`", m.Binary, t.BinDir)
		}
	}
	if _, err := os.Stat(filepath.Join(t.ConfigDir, ".complete")); err != nil {
		return Tools{}, fmt.Errorf("the Cluster API config in %s is incomplete: run `make tools`", t.ConfigDir)
	}
	return t, nil
}

// pidDir holds the pids of managers this package started, so that the next run ends the
// ones an interrupted run left (by pid, after checking the command line).
var pidDir = filepath.Join(os.TempDir(), "kobe-capimgmt")

// Start starts a management cluster and stops it when the test ends. It skips the test, saying
// what is missing, when the managers or the Kubernetes binaries are not built.
func Start(t testing.TB) *Cluster {
	t.Helper()
	tools, err := FindTools()
	if err != nil {
		t.Skip(err.Error())
	}
	lt := local.Tools{Dir: local.DefaultToolsDir()}
	versions := lt.KubernetesVersions()
	if len(versions) == 0 {
		t.Skipf("no Kubernetes binaries in %s: run `make tools`", lt.Dir)
	}
	hostLock(t)
	cleanDebris(t)
	c := &Cluster{tools: tools, dir: t.TempDir(), procs: map[string]*exec.Cmd{}, exited: map[string]chan struct{}{}, timings: time.Now()}
	t0 := time.Now()

	// The management cluster's own control plane, with the garbage collector.
	b, err := local.New(local.Config{StateDir: filepath.Join(c.dir, "state"), HostID: "capimgmt", ToolsDir: lt.Dir})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(local.Options{Components: []string{local.ComponentAPIServer, local.ComponentControllerManager}})
	spec := backends.InstanceSpec{ID: "mgmt", Pool: "capimgmt", KubernetesVersion: versions[len(versions)-1], Options: raw}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := b.Create(ctx, spec); err != nil {
		t.Fatalf("capimgmt: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Delete(context.Background(), spec.ID); err != nil {
			t.Errorf("capimgmt: delete the management cluster: %v", err)
		}
	})
	if _, err := b.WaitReady(ctx, spec.ID, nil); err != nil {
		t.Fatalf("capimgmt: %v", err)
	}
	cred, err := b.Credentials(ctx, spec.ID, backends.CredentialRequest{})
	if err != nil {
		t.Fatal(err)
	}
	c.Kubeconfig = cred.Kubeconfig
	c.KubeconfigPath = filepath.Join(c.dir, "kubeconfig")
	if err := os.WriteFile(c.KubeconfigPath, c.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	if c.Config, err = clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	c.Config.QPS, c.Config.Burst = 100, 200
	c.Config.WarningHandler = rest.NoWarnings{} // CAPD's deprecated Docker* kinds, on every list
	c.Kube = kubernetes.NewForConfigOrDie(c.Config)
	c.Dynamic = dynamic.NewForConfigOrDie(c.Config)
	c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(c.Config)))
	c.mark("management apiserver + controller-manager ready")

	if err := c.writeCerts(); err != nil {
		t.Fatal(err)
	}
	for _, m := range Managers {
		if err := c.installCRDs(ctx, m); err != nil {
			t.Fatalf("capimgmt: CRDs of %s: %v", m.Name, err)
		}
	}
	if err := c.waitCRDsEstablished(ctx); err != nil {
		t.Fatalf("capimgmt: %v", err)
	}
	c.mark("CRDs established")

	t.Cleanup(func() {
		if t.Failed() {
			// What the controllers said is usually why a cluster did not come up.
			for _, m := range Managers {
				t.Log(c.LogTail(m.Name, 25))
			}
		}
		c.stopAll(t)
	})
	for _, m := range Managers {
		if err := c.startManager(m); err != nil {
			t.Fatalf("capimgmt: %v", err)
		}
	}
	for _, m := range Managers {
		if err := c.waitManagerReady(ctx, m); err != nil {
			t.Fatalf("capimgmt: %v\n%s", err, c.LogTail(m.Name, 40))
		}
	}
	c.mark("managers ready")
	for _, m := range Managers {
		if err := c.installWebhooks(ctx, m); err != nil {
			t.Fatalf("capimgmt: webhooks of %s: %v", m.Name, err)
		}
	}
	c.mark("webhooks configured")
	c.Ready = time.Since(t0)
	t.Logf("capimgmt: management cluster ready in %s (%s); manager logs in %s", c.Ready.Round(time.Millisecond), strings.Join(c.Timings, "; "), c.dir)
	return c
}

func (c *Cluster) mark(what string) {
	c.Timings = append(c.Timings, fmt.Sprintf("%s at %.1fs", what, time.Since(c.timings).Seconds()))
}

// hostLock makes management clusters on one host take turns (CAPD's ports are fixed): a test
// in another package (go test runs packages in parallel unless -p 1) waits here until the one
// running ends. The lock is an flock, so a killed test process releases it.
func hostLock(t testing.TB) {
	if err := os.MkdirAll(pidDir, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(pidDir, "host.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Logf("capimgmt: another management cluster runs on this host; waiting for it to end")
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
	}
	// Registered first, so it runs last: after the managers and the cluster have stopped.
	t.Cleanup(func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() })
}

// cleanDebris ends the managers an interrupted earlier run left (they hold fixed ports).
func cleanDebris(t testing.TB) {
	entries, _ := os.ReadDir(pidDir)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".pid") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(pidDir, e.Name()))
		if err != nil {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if pid > 0 && err == nil && bytes.Contains(cmdline, []byte(strings.TrimSuffix(e.Name(), ".pid"))) {
			t.Logf("capimgmt: ending %s (pid %d) left by an earlier run", e.Name(), pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = os.Remove(filepath.Join(pidDir, e.Name()))
	}
}

// writeCerts makes the CA and the 127.0.0.1 serving certificate of every webhook server.
func (c *Cluster) writeCerts() error {
	ca, err := pki.NewCA("kobe-capimgmt-webhooks", 24*time.Hour)
	if err != nil {
		return err
	}
	srv, err := ca.IssueServing("127.0.0.1", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, 24*time.Hour)
	if err != nil {
		return err
	}
	dir := filepath.Join(c.dir, "webhook-certs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), srv.CertPEM, 0o600); err != nil {
		return err
	}
	c.caPEM = ca.CertPEM
	return os.WriteFile(filepath.Join(dir, "tls.key"), srv.KeyPEM, 0o600)
}

// readDocs reads a multi-document YAML file into objects.
func readDocs(path string) ([]map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseDocs(data)
}

// ParseDocs splits multi-document YAML into objects (empty documents skipped).
func ParseDocs(data []byte) ([]map[string]any, error) {
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var cur bytes.Buffer
	flush := func() error {
		if strings.TrimSpace(cur.String()) == "" {
			cur.Reset()
			return nil
		}
		var m map[string]any
		if err := yaml.Unmarshal(cur.Bytes(), &m); err != nil {
			return err
		}
		cur.Reset()
		if len(m) > 0 {
			out = append(out, m)
		}
		return nil
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimRight(line, " ") == "---" {
			if err := flush(); err != nil {
				return nil, err
			}
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, flush()
}

func (c *Cluster) installCRDs(ctx context.Context, m Manager) error {
	files, _ := filepath.Glob(filepath.Join(c.tools.ConfigDir, m.Config, "crd", "*.yaml"))
	if len(files) == 0 {
		return fmt.Errorf("no CRDs in %s", filepath.Join(c.tools.ConfigDir, m.Config, "crd"))
	}
	for _, f := range files {
		docs, err := readDocs(f)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		for _, crd := range docs {
			obj := &unstructured.Unstructured{Object: crd}
			lbl := obj.GetLabels()
			if lbl == nil {
				lbl = map[string]string{}
			}
			lbl["cluster.x-k8s.io/provider"] = m.Provider
			versions, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
			for _, v := range versions {
				name, _ := v.(map[string]any)["name"].(string)
				// The contract labels: a v1beta2 reference (apiGroup + kind) is resolved
				// to the CRD version named by the label of the contract CAPI speaks.
				if m.Name != "capi" && (name == "v1beta1" || name == "v1beta2") {
					lbl["cluster.x-k8s.io/"+name] = name
				}
			}
			obj.SetLabels(lbl)
			if len(versions) > 1 {
				_ = unstructured.SetNestedMap(crd, map[string]any{
					"strategy": "Webhook",
					"webhook": map[string]any{
						"conversionReviewVersions": []any{"v1", "v1beta1"},
						"clientConfig": map[string]any{
							"url":      fmt.Sprintf("https://127.0.0.1:%d/convert", m.Webhook),
							"caBundle": base64.StdEncoding.EncodeToString(c.caPEM),
						},
					},
				}, "spec", "conversion")
			}
			if err := c.apply(ctx, obj); err != nil {
				return fmt.Errorf("%s: %w", obj.GetName(), err)
			}
		}
	}
	return nil
}

func (c *Cluster) waitCRDsEstablished(ctx context.Context) error {
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for {
		list, err := c.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: "cluster.x-k8s.io/provider"})
		if err == nil {
			pending := 0
			for _, crd := range list.Items {
				ok := false
				conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
				for _, cond := range conds {
					m, _ := cond.(map[string]any)
					if m["type"] == "Established" && m["status"] == "True" {
						ok = true
					}
				}
				if !ok {
					pending++
				}
			}
			if pending == 0 && len(list.Items) > 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRDs not established: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// installWebhooks applies a manager's webhook configurations, renamed per manager and pointed
// at its webhook server on 127.0.0.1.
func (c *Cluster) installWebhooks(ctx context.Context, m Manager) error {
	docs, err := readDocs(filepath.Join(c.tools.ConfigDir, m.Config, "webhooks.yaml"))
	if err != nil {
		return err
	}
	for _, doc := range docs {
		obj := &unstructured.Unstructured{Object: doc}
		obj.SetName(m.Name + "-" + obj.GetName())
		hooks, _, _ := unstructured.NestedSlice(doc, "webhooks")
		for _, h := range hooks {
			hook := h.(map[string]any)
			path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
			hook["clientConfig"] = map[string]any{
				"url":      fmt.Sprintf("https://127.0.0.1:%d%s", m.Webhook, path),
				"caBundle": base64.StdEncoding.EncodeToString(c.caPEM),
			}
		}
		_ = unstructured.SetNestedSlice(doc, hooks, "webhooks")
		if err := c.apply(ctx, obj); err != nil {
			return fmt.Errorf("%s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// Apply server-side applies objects (multi-document YAML) to the management cluster.
func (c *Cluster) Apply(t testing.TB, manifest []byte) {
	t.Helper()
	docs, err := ParseDocs(manifest)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, d := range docs {
		if err := c.apply(ctx, &unstructured.Unstructured{Object: d}); err != nil {
			t.Fatalf("apply %v: %v", d["kind"], err)
		}
	}
}

func (c *Cluster) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	var lastErr error
	for attempt := 0; attempt < 60; attempt++ {
		mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			c.mapper.Reset()
			lastErr = err
		} else {
			data, _ := json.Marshal(obj.Object)
			ri := c.Dynamic.Resource(mapping.Resource)
			var r dynamic.ResourceInterface = ri
			if mapping.Scope.Name() == "namespace" {
				ns := obj.GetNamespace()
				if ns == "" {
					ns = "default"
				}
				r = ri.Namespace(ns)
			}
			force := true
			_, err = r.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "kobe-capimgmt", Force: &force})
			if err == nil {
				return nil
			}
			lastErr = err
			// A webhook whose server is still starting answers "connection refused".
			if !apierrors.IsInternalError(err) && !strings.Contains(err.Error(), "connection refused") && !apierrors.IsServiceUnavailable(err) {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%v (last: %v)", ctx.Err(), lastErr)
		case <-time.After(500 * time.Millisecond):
		}
	}
	return lastErr
}

func (c *Cluster) managerArgs(m Manager) []string {
	return []string{
		"--leader-elect=false",
		"--webhook-cert-dir=" + filepath.Join(c.dir, "webhook-certs"),
		"--webhook-port=" + strconv.Itoa(m.Webhook),
		"--health-addr=127.0.0.1:" + strconv.Itoa(m.Health),
		"--diagnostics-address=127.0.0.1:" + strconv.Itoa(m.Metrics),
		"--insecure-diagnostics",
		// ClusterClass is still an alpha gate in v1.14.
		"--feature-gates=ClusterTopology=true",
		"--v=2",
	}
}

func (c *Cluster) startManager(m Manager) error {
	logf, err := os.OpenFile(c.logPath(m.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	bin := filepath.Join(c.tools.BinDir, m.Binary)
	cmd := exec.Command(bin, c.managerArgs(m)...)
	// system:masters: no RBAC manifests needed. CAPD's in-memory servers listen on POD_IP.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath, "POD_IP=127.0.0.1")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting %s: %w", m.Name, err)
	}
	_ = os.MkdirAll(pidDir, 0o700)
	_ = os.WriteFile(filepath.Join(pidDir, m.Binary+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	c.procs[m.Name], c.exited[m.Name] = cmd, done
	return nil
}

func (c *Cluster) waitManagerReady(ctx context.Context, m Manager) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", m.Health)
	// The webhook server too: the managers report ready before it serves.
	wh := fmt.Sprintf("127.0.0.1:%d", m.Webhook)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.caPEM)
	for {
		select {
		case <-c.exited[m.Name]:
			return fmt.Errorf("%s exited", m.Name)
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				conn, err := tls.Dial("tcp", wh, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
				if err == nil {
					conn.Close()
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w", m.Name, ctx.Err())
		case <-c.exited[m.Name]:
			return fmt.Errorf("%s exited", m.Name)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Cluster) manager(name string) Manager {
	for _, m := range Managers {
		if m.Name == name {
			return m
		}
	}
	panic("no manager " + name)
}

// StopManager stops one manager (SIGTERM, then SIGKILL after 20 s) and waits for its exit.
func (c *Cluster) StopManager(t testing.TB, name string) {
	t.Helper()
	cmd := c.procs[name]
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited[name]:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-c.exited[name]
	}
	delete(c.procs, name)
	_ = os.Remove(filepath.Join(pidDir, c.manager(name).Binary+".pid"))
}

// StartManager starts a stopped manager again and waits until it is ready.
func (c *Cluster) StartManager(t testing.TB, name string) {
	t.Helper()
	m := c.manager(name)
	if err := c.startManager(m); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.waitManagerReady(ctx, m); err != nil {
		t.Fatalf("%v\n%s", err, c.LogTail(name, 40))
	}
}

func (c *Cluster) stopAll(t testing.TB) {
	for i := len(Managers) - 1; i >= 0; i-- {
		c.StopManager(t, Managers[i].Name)
	}
}

func (c *Cluster) logPath(name string) string { return filepath.Join(c.dir, name+".log") }

// LogTail returns the last n lines of a manager's log, for failure messages.
func (c *Cluster) LogTail(name string, n int) string {
	data, _ := os.ReadFile(c.logPath(name))
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return name + " log:\n" + strings.Join(lines, "\n")
}

// InMemoryClassManifest is the in-memory ClusterClass CAPD's test module ships, as copied by
// `make tools`.
func (c *Cluster) InMemoryClassManifest(t testing.TB) []byte {
	data, err := os.ReadFile(filepath.Join(c.tools.ConfigDir, "templates", "clusterclass-in-memory.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// WaitClassReconciled waits until CAPI has reconciled a ClusterClass (its variables are known):
// before that, Clusters of the class are refused by CAPI's webhook.
func (c *Cluster) WaitClassReconciled(t testing.TB, ns, name string) {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusterclasses"}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cc, err := c.Dynamic.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			observed, _, _ := unstructured.NestedInt64(cc.Object, "status", "observedGeneration")
			if observed == cc.GetGeneration() {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ClusterClass %s/%s not reconciled (last error: %v)\n%s", ns, name, err, c.LogTail("capi", 30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ObjectsNamedFor lists, in every namespace, the objects of every Cluster API group and the
// Secrets whose name is the cluster's name or starts with "<name>-": what CAPI and kobe name
// after a cluster (the -kubeconfig, -ca, -etcd, -sa, -proxy Secrets, machines, templates
// cloned from a ClusterClass…). It finds them by name, not by label, so that it does not
// share the backend's own way of looking.
func (c *Cluster) ObjectsNamedFor(ctx context.Context, name string) ([]string, error) {
	lists, err := discovery.NewDiscoveryClientForConfigOrDie(c.Config).ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return nil, err
	}
	match := func(n string) bool { return n == name || strings.HasPrefix(n, name+"-") }
	var out []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		capiGroup := gv.Group == "cluster.x-k8s.io" || strings.HasSuffix(gv.Group, ".cluster.x-k8s.io")
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !(capiGroup || (gv.Group == "" && r.Name == "secrets")) {
				continue
			}
			items, err := c.Dynamic.Resource(gv.WithResource(r.Name)).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", r.Name, err)
			}
			for _, it := range items.Items {
				if match(it.GetName()) {
					out = append(out, fmt.Sprintf("%s %s/%s", r.Kind, it.GetNamespace(), it.GetName()))
				}
			}
		}
	}
	return out, nil
}
