package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/internal/devserver"
	"github.com/kunobi-ninja/kobe/internal/pki"
)

// newLocalBackend is the local backend in this process, set up as kobe's own (the boot CPU
// weight of $KOBE_LOCAL_BOOT_CPU_SHARES included), so that its figures compare with kobe's.
func newLocalBackend(stateDir string, tools local.Tools) (*local.Backend, error) {
	shares, err := local.BootCPUSharesFromEnv()
	if err != nil {
		return nil, err
	}
	return local.New(local.Config{StateDir: stateDir, HostID: "kobe-bench", ToolsDir: tools.Dir, BootCPUShares: shares})
}

// coldStarts times n cold starts of each kind, alternating a local instance and an etcd +
// kube-apiserver started the envtest way, so that both kinds see the same machine load (one
// kind after the other would give a load that changes during the run to one of them). The last
// envtest pair is returned still running but paused (SIGSTOP), for the idle-memory baseline
// measured later beside the warm instances (MeasureEnvtest); the caller stops it.
func coldStarts(ctx context.Context, tools local.Tools, version, workDir string, n int, log *progress) (localStarts, envtestStarts []time.Duration, kept *Envtest, err error) {
	lb, err := newLocalBackend(filepath.Join(workDir, "cold-local"), tools)
	if err != nil {
		return nil, nil, nil, err
	}
	etcd, err := tools.Newest("etcd", "etcd")
	if err != nil {
		return nil, nil, nil, err
	}
	apiserver, err := tools.Kubernetes(version, "kube-apiserver")
	if err != nil {
		return nil, nil, nil, err
	}
	for i := range n {
		d, err := coldLocal(ctx, lb, version, fmt.Sprintf("cold-%d", i+1))
		if err != nil {
			return nil, nil, nil, err
		}
		localStarts = append(localStarts, d)
		log.Printf("  local instance %d/%d ready in %s", i+1, n, FormatMs(Ms(d)))
		e, d, err := StartEnvtest(ctx, etcd, apiserver, filepath.Join(workDir, fmt.Sprintf("envtest-%d", i+1)))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("etcd + kube-apiserver start %d: %w", i+1, err)
		}
		envtestStarts = append(envtestStarts, d)
		log.Printf("  etcd + kube-apiserver %d/%d ready in %s", i+1, n, FormatMs(Ms(d)))
		if i < n-1 {
			e.Stop()
			continue
		}
		if err := e.Pause(); err != nil {
			e.Stop()
			return nil, nil, nil, fmt.Errorf("pausing etcd + kube-apiserver %d: %w", i+1, err)
		}
		kept = e
	}
	return localStarts, envtestStarts, kept, nil
}

// coldLocal creates a local instance with the local backend in this process (the code a pool
// member's Provision runs, without the workflow around it) and times Create → WaitReady.
// WaitReady is what makes an instance Ready: Status alone never turns Ready (the backend marks
// the instance ready-once inside WaitReady), so the bench calls it as the Provision workflow
// does. The instance is deleted afterwards, outside the timing.
func coldLocal(ctx context.Context, lb *local.Backend, version, id string) (time.Duration, error) {
	spec := backends.InstanceSpec{ID: id, Pool: "kobe-bench-cold", KubernetesVersion: version}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	t0 := time.Now()
	_, err := lb.Create(wctx, spec)
	if err == nil {
		_, err = lb.WaitReady(wctx, id, nil)
	}
	d := time.Since(t0)
	cancel()
	// Deleted whatever happened (a fresh context: ctx may be the one that was cancelled).
	dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
	derr := lb.Delete(dctx, id)
	dcancel()
	if err != nil {
		return 0, fmt.Errorf("local instance %s: %w", id, err)
	}
	if derr != nil {
		return 0, fmt.Errorf("deleting local instance %s: %w", id, derr)
	}
	return d, nil
}

// EnvtestStart starts what a user does without kobe, the way controller-runtime's envtest does
// it: a fresh etcd and a fresh kube-apiserver with envtest's default flags
// (pkg/internal/testing/controlplane: etcd.go and apiserver.go) in dir, and waits for /readyz
// 200. The certificates are generated inside the timing, as envtest's Start does. It returns
// the time to ready; both processes are killed and dir removed before it returns.
func EnvtestStart(ctx context.Context, etcdBin, apiserverBin, dir string) (time.Duration, error) {
	e, d, err := StartEnvtest(ctx, etcdBin, apiserverBin, dir)
	if err != nil {
		return 0, err
	}
	e.Stop()
	return d, nil
}

// Envtest is an etcd + kube-apiserver started the envtest way and still running: the bench
// keeps its last one to measure what such a pair holds when idle, the baseline of a warm local
// instance's memory.
type Envtest struct {
	dir     string
	logPath string
	procs   []envtestProc
}

type envtestProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// Stop kills both processes (their process groups) and removes the directory; a nil or
// stopped Envtest is left as it is.
func (e *Envtest) Stop() {
	if e == nil {
		return
	}
	for _, p := range e.procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	e.procs = nil
	_ = os.RemoveAll(e.dir)
}

// Pause stops both processes (SIGSTOP) so that, kept for a later measurement, they take no CPU
// from what is measured meanwhile. It returns once the kernel reports each one stopped (a
// signal is delivered to a running process's threads shortly after kill returns).
func (e *Envtest) Pause() error {
	if err := e.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range e.procs {
		for {
			state, err := ReadState(p.cmd.Process.Pid)
			if err != nil {
				return fmt.Errorf("%s (pid %d): %w", filepath.Base(p.cmd.Path), p.cmd.Process.Pid, err)
			}
			if state == "T" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s (pid %d) not stopped 5 s after SIGSTOP (state %s)", filepath.Base(p.cmd.Path), p.cmd.Process.Pid, state)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// Resume lets the processes run again.
func (e *Envtest) Resume() error { return e.signal(syscall.SIGCONT) }

func (e *Envtest) signal(sig syscall.Signal) error {
	for _, p := range e.procs {
		if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
			return fmt.Errorf("%s (pid %d): %w", filepath.Base(p.cmd.Path), p.cmd.Process.Pid, err)
		}
	}
	return nil
}

// PIDs are the processes by name: etcd and kube-apiserver.
func (e *Envtest) PIDs() map[string]int {
	out := map[string]int{}
	for _, p := range e.procs {
		out[filepath.Base(p.cmd.Path)] = p.cmd.Process.Pid
	}
	return out
}

// StartEnvtest is EnvtestStart without the stop: the pair keeps running until Stop. On an
// error nothing is left running.
func StartEnvtest(ctx context.Context, etcdBin, apiserverBin, dir string) (_ *Envtest, _ time.Duration, err error) {
	certDir, dataDir := filepath.Join(dir, "certs"), filepath.Join(dir, "etcd")
	// The log sits beside dir (removed at Stop), so that a failure can show it.
	e := &Envtest{dir: dir, logPath: dir + ".log"}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	for _, d := range []string{certDir, dataDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, 0, err
		}
	}
	etcdPort, err := devserver.FreePort("127.0.0.1")
	if err != nil {
		return nil, 0, err
	}
	apiPort, err := devserver.FreePort("127.0.0.1")
	if err != nil {
		return nil, 0, err
	}

	t0 := time.Now()
	cp, err := pki.NewClusterPKI("envtest", nil, nil, time.Hour)
	if err != nil {
		return nil, 0, err
	}
	// kube-apiserver finds its serving certificate in --cert-dir under these names, as envtest
	// provides it.
	files := map[string][]byte{
		"apiserver.crt": cp.Serving.CertPEM, "apiserver.key": cp.Serving.KeyPEM,
		"sa-signer.pub": cp.ServiceAccountPublicPEM, "sa-signer.key": cp.ServiceAccountPrivatePEM,
		"client-ca.crt": cp.CA.CertPEM,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
			return nil, 0, err
		}
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	etcdCmd := exec.Command(etcdBin,
		"--data-dir="+dataDir,
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls=http://localhost:0",
		// Not an envtest default: skipping fsync only makes this baseline faster (the ratio
		// against kobe more conservative), and it is what a user would set for tests.
		"--unsafe-no-fsync")
	// No --advertise-address (envtest's current defaults have none): the API server takes the
	// host's address; 127.0.0.1 is refused by its endpoint reconciler.
	apiCmd := exec.Command(apiserverBin,
		"--etcd-servers="+etcdURL,
		"--cert-dir="+certDir,
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--bind-address=127.0.0.1",
		"--disable-admission-plugins=ServiceAccount",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		"--authorization-mode=RBAC",
		fmt.Sprintf("--service-account-issuer=https://127.0.0.1:%d/", apiPort),
		"--service-account-key-file="+filepath.Join(certDir, "sa-signer.pub"),
		"--service-account-signing-key-file="+filepath.Join(certDir, "sa-signer.key"),
		// envtest's certificate authentication: a client CA, with an admin user it issued.
		"--client-ca-file="+filepath.Join(certDir, "client-ca.crt"))
	logf, err := os.Create(e.logPath)
	if err != nil {
		return nil, 0, err
	}
	defer logf.Close()
	for _, c := range []*exec.Cmd{etcdCmd, apiCmd} {
		c.Stdout, c.Stderr = logf, logf
		// Own process group, killed as a group; the arguments name dir, so a straggler is
		// found by the bench's final sweep too.
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			return nil, 0, err
		}
		p := envtestProc{cmd: c, done: make(chan struct{})}
		go func() { _ = c.Wait(); close(p.done) }()
		e.procs = append(e.procs, p)
	}

	cert, err := tls.X509KeyPair(cp.Admin.CertPEM, cp.Admin.KeyPEM)
	if err != nil {
		return nil, 0, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(cp.CA.CertPEM)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	url := fmt.Sprintf("https://127.0.0.1:%d/readyz", apiPort)
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		for _, p := range e.procs {
			select {
			case <-p.done:
				return nil, 0, fmt.Errorf("%s exited (%s); last lines of its log:\n%s", filepath.Base(p.cmd.Path), p.cmd.ProcessState, tailFile(e.logPath, 15))
			default:
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return e, time.Since(t0), nil
			}
		}
		// The same poll interval as the local backend's WaitReady.
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return nil, 0, err
		}
	}
	return nil, 0, fmt.Errorf("not ready after 3 minutes; last lines of the log:\n%s", tailFile(e.logPath, 15))
}

// backendCycles is the physical limit of a lease lifecycle on this machine: count create →
// ready → delete cycles of a local instance, from clients goroutines at once, with the local
// backend called directly in this process (no kobe around it). The rate is count / (first
// Create → last Delete returned), comparable with the lifecycles per second through kobe.
func backendCycles(ctx context.Context, tools local.Tools, version, workDir string, count, clients int, log *progress) (time.Duration, error) {
	lb, err := newLocalBackend(filepath.Join(workDir, "backend-cycles"), tools)
	if err != nil {
		return 0, err
	}
	next := make(chan int, count)
	for i := range count {
		next <- i + 1
	}
	close(next)
	errs := make(chan error, clients)
	t0 := time.Now()
	for range clients {
		go func() {
			for i := range next {
				if _, err := coldLocal(ctx, lb, version, fmt.Sprintf("cycle-%d", i)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range clients {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	elapsed := time.Since(t0)
	if first != nil {
		return 0, first
	}
	log.Printf("  %d backend create → ready → delete cycles from %d clients in %.1f s", count, clients, elapsed.Seconds())
	return elapsed, nil
}
