package local_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/internal/pki"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

// benchRuns is how many instances each benchmark creates (KOBE_BENCH_RUNS, default 20).
func benchRuns() int {
	if n, err := strconv.Atoi(os.Getenv("KOBE_BENCH_RUNS")); err == nil && n > 0 {
		return n
	}
	return 20
}

// BenchmarkLocalInstance measures, in one run so the ratios hold on a noisy machine:
// local instance create → ready and delete (verified gone), the RSS of an idle instance
// (apiserver only, and with controller-manager + scheduler + kwok and 3 fake nodes), and the
// same start done by hand the envtest way (fresh etcd + kube-apiserver, wait for /readyz).
//
// `make bench` (testsuite/bench) also times create → ready against an envtest-style start, in
// the same run as the lease path so that the warm/cold ratios hold. This benchmark stays (under
// `make bench-go`) for what that program does not measure: delete times, the full-stack
// footprint, and many runs of the package alone (e.g. with -cpuprofile).
func BenchmarkLocalInstance(b *testing.B) {
	runs := benchRuns()
	tools := local.Tools{Dir: local.DefaultToolsDir()}
	lb, err := local.New(local.Config{StateDir: b.TempDir(), HostID: "bench", ToolsDir: tools.Dir})
	require.NoError(b, err)
	ctx := context.Background()

	var create, del, envtest []time.Duration
	var rss []float64
	for i := 0; i < runs; i++ {
		id := fmt.Sprintf("bench-%d", i)
		t0 := time.Now()
		_, err := lb.Create(ctx, spec(id, ""))
		require.NoError(b, err)
		_, err = lb.WaitReady(ctx, id, nil)
		require.NoError(b, err)
		create = append(create, time.Since(t0))
		if i < 3 {
			time.Sleep(2 * time.Second)
			rss = append(rss, instanceRSS(b, id))
		}
		t1 := time.Now()
		require.NoError(b, lb.Delete(ctx, id))
		del = append(del, time.Since(t1))

		envtest = append(envtest, etcdAPIServerStart(b, tools))
	}

	// One full-stack instance for its footprint.
	_, err = lb.Create(ctx, spec("bench-full", `{"components":["apiserver","controller-manager","scheduler","kwok"],"nodes":3}`))
	require.NoError(b, err)
	t0 := time.Now()
	_, err = lb.WaitReady(ctx, "bench-full", nil)
	require.NoError(b, err)
	fullReady := time.Since(t0)
	time.Sleep(3 * time.Second)
	fullRSS := instanceRSS(b, "bench-full")
	require.NoError(b, lb.Delete(ctx, "bench-full"))

	b.ReportMetric(ms(pct(create, 0.5)), "create-ready-p50-ms")
	b.ReportMetric(ms(pct(create, 0.95)), "create-ready-p95-ms")
	b.ReportMetric(ms(pct(del, 0.5)), "delete-p50-ms")
	b.ReportMetric(ms(pct(del, 0.95)), "delete-p95-ms")
	b.ReportMetric(ms(pct(envtest, 0.5)), "etcd+apiserver-p50-ms")
	b.ReportMetric(ms(pct(envtest, 0.95)), "etcd+apiserver-p95-ms")
	b.ReportMetric(ms(pct(create, 0.5))/ms(pct(envtest, 0.5)), "local/etcd-ratio-p50")
	b.ReportMetric(avg(rss), "idle-RSS-MiB-apiserver-only")
	b.ReportMetric(fullRSS, "idle-RSS-MiB-full-stack-3-nodes")
	b.ReportMetric(ms(fullReady), "full-stack-ready-ms")
	b.Logf("%d runs: create→ready p50 %s p95 %s; delete p50 %s p95 %s; etcd+apiserver p50 %s p95 %s",
		runs, pct(create, .5), pct(create, .95), pct(del, .5), pct(del, .95), pct(envtest, .5), pct(envtest, .95))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func pct(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(p*float64(len(s)-1))]
}

func avg(v []float64) float64 {
	var sum float64
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

// instanceRSS sums VmRSS of every process of the instance, in MiB.
func instanceRSS(b *testing.B, id string) float64 {
	var total float64
	for _, p := range leaks.ProcessesNaming("/" + id + "/") {
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID))
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "VmRSS:") {
				kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
				total += kb / 1024
			}
		}
	}
	return total
}

// etcdAPIServerStart is what a user does without kobe (and what envtest does): start a fresh
// etcd and kube-apiserver and wait for /readyz. It returns the time to ready.
func etcdAPIServerStart(b *testing.B, tools local.Tools) time.Duration {
	etcd, err := tools.Newest("etcd", "etcd")
	require.NoError(b, err)
	apiserver, err := tools.Kubernetes(kubeVersion, "kube-apiserver")
	require.NoError(b, err)
	dir := b.TempDir()
	cp, err := pki.NewClusterPKI("envtest", nil, nil, time.Hour)
	require.NoError(b, err)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(b, os.WriteFile(p, data, 0o600))
		return p
	}
	ca := write("ca.crt", cp.CA.CertPEM)
	crt, key := write("apiserver.crt", cp.Serving.CertPEM), write("apiserver.key", cp.Serving.KeyPEM)
	saPub, saKey := write("sa.pub", cp.ServiceAccountPublicPEM), write("sa.key", cp.ServiceAccountPrivatePEM)
	clientPort, peerPort, apiPort := port(b), port(b), port(b)

	t0 := time.Now()
	etcdCmd := exec.Command(etcd, "--data-dir", filepath.Join(dir, "etcd"), "--unsafe-no-fsync",
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", clientPort),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", clientPort),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", peerPort))
	apiCmd := exec.Command(apiserver, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", apiPort), fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", clientPort),
		"--client-ca-file="+ca, "--tls-cert-file="+crt, "--tls-private-key-file="+key,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=RBAC",
		"--endpoint-reconciler-type=none", "--enable-priority-and-fairness=false")
	for _, c := range []*exec.Cmd{etcdCmd, apiCmd} {
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(b, c.Start())
	}
	defer func() {
		for _, c := range []*exec.Cmd{apiCmd, etcdCmd} {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			_ = c.Wait()
		}
	}()
	cert, err := tls.X509KeyPair(cp.Admin.CertPEM, cp.Admin.KeyPEM)
	require.NoError(b, err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.CA.CertPEM)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	for time.Since(t0) < 2*time.Minute {
		resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/readyz", apiPort))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return time.Since(t0)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatal("etcd + kube-apiserver did not become ready")
	return 0
}

func port(b *testing.B) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
