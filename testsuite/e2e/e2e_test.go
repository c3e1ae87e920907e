// Package e2e runs the real kobe binary as a user would: as separate processes, killed with
// SIGKILL, restarted, and driven through its CLI.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	localbackend "github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/internal/devserver"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

var kobeBin string

func TestMain(m *testing.M) {
	testsuite.MainWithKobeBinary(m, "e2e", "builds and runs the real binary", &kobeBin)
}

func freePort(t testing.TB) int {
	p, err := devserver.FreePort("127.0.0.1")
	require.NoError(t, err)
	return p
}

// proc is a running kobe process whose output goes to files in the test's temp dir.
type proc struct {
	cmd    *exec.Cmd
	stdout *os.File
	stderr *os.File
	done   chan struct{}
}

func startKobe(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "stdout"))
	require.NoError(t, err)
	errf, err := os.Create(filepath.Join(dir, "stderr"))
	require.NoError(t, err)
	cmd := exec.Command(kobeBin, args...)
	cmd.Stdout, cmd.Stderr = out, errf
	cmd.Env = append(os.Environ(), env...)
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, stdout: out, stderr: errf, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *proc) output(t testing.TB) (string, string) {
	o, err := os.ReadFile(p.stdout.Name())
	require.NoError(t, err)
	e, err := os.ReadFile(p.stderr.Name())
	require.NoError(t, err)
	return string(o), string(e)
}

func (p *proc) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		o, e := p.output(t)
		t.Fatalf("kobe %v still running after %s\nstdout:\n%s\nstderr:\n%s", p.cmd.Args[1:], timeout, o, e)
		return -1
	}
}

func waitReady(t testing.TB, apiURL string, timeout time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	for time.Since(t0) < timeout {
		resp, err := http.Get(apiURL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return time.Since(t0)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s/readyz not ready after %s", apiURL, timeout)
	return 0
}

type devPorts struct{ api, temporal, ui int }

// ownCLIConfig is the environment of a test's `kobe dev` and of the CLI it drives: a CLI config
// file of the test's own (where dev writes its "dev" context, admin token included) and no
// KOBE_SERVER/KOBE_TOKEN from the caller. POST /v1/doctor needs a token, and the CLI finds it
// in that context; without a config of its own the test would read and overwrite the user's.
func ownCLIConfig(t testing.TB) []string {
	return []string{"KOBE_CONFIG=" + filepath.Join(t.TempDir(), "config.yaml"), "KOBE_SERVER=", "KOBE_TOKEN="}
}

func newDevPorts(t testing.TB) devPorts {
	return devPorts{api: freePort(t), temporal: freePort(t), ui: freePort(t)}
}

func (d devPorts) args(stateDir string) []string {
	return []string{"dev", "--state-dir", stateDir, "--no-default-pool",
		"--api-address", fmt.Sprintf("127.0.0.1:%d", d.api),
		"--temporal-port", fmt.Sprint(d.temporal), "--ui-port", fmt.Sprint(d.ui)}
}

func (d devPorts) apiURL() string { return fmt.Sprintf("http://127.0.0.1:%d", d.api) }

// cliDev is a `kobe dev` (no Web UI) that the CLI reaches through the context it writes, with
// kubectl on PATH: the setup of the tests that drive kobe as a user would.
type cliDev struct {
	env      []string // for kobeCLI and startKobe: PATH with kubectl, a config file of its own
	ports    devPorts
	stateDir string
	dev      *proc
}

// startCLIDev starts it, with the default "dev" pool or none, and waits until the API is ready.
// kobe dev keeps its clusters across restarts (they are re-adopted), so a killed dev leaves them
// running: the cleanup, registered before dev starts, runs after dev is killed.
func startCLIDev(t *testing.T, defaultPool bool) *cliDev {
	kubectlDir := filepath.Join(localbackend.DefaultToolsDir(), "kubernetes-v1.37.2")
	if _, err := os.Stat(filepath.Join(kubectlDir, "kubectl")); err != nil {
		t.Fatalf("kubectl is built by make tools: %v", err)
	}
	d := &cliDev{
		env: []string{"PATH=" + kubectlDir + string(os.PathListSeparator) + os.Getenv("PATH"),
			"KOBE_CONFIG=" + filepath.Join(t.TempDir(), "config.yaml"), "KOBE_SERVER=", "KOBE_TOKEN="},
		ports:    newDevPorts(t),
		stateDir: filepath.Join(t.TempDir(), "state"),
	}
	t.Cleanup(func() {
		if left := leaks.KillNaming(d.stateDir); len(left) > 0 {
			t.Logf("stopped the clusters kobe dev left: %v", left)
		}
	})
	var args []string
	for _, a := range d.ports.args(d.stateDir) {
		if a == "--no-default-pool" && defaultPool {
			continue
		}
		args = append(args, a)
	}
	args = append(args[:len(args)-2], "--ui-port", "0") // no Web UI
	d.dev = startKobe(t, d.env, args...)
	waitReady(t, d.ports.apiURL(), 2*time.Minute)
	return d
}

// TestKill9DuringDurableTimer is the acceptance run: kill -9 `kobe dev` while a doctor
// run waits in a durable timer, start it again on the same state dir, and watch the run finish
// (the waiting CLI reports it) and its history appear in the Web UI.
func TestKill9DuringDurableTimer(t *testing.T) {
	state := t.TempDir()
	ports := newDevPorts(t)
	env := ownCLIConfig(t)
	dev := startKobe(t, env, ports.args(state)...)
	cold := waitReady(t, ports.apiURL(), 90*time.Second)

	// KOBE_SERVER names the server; the token comes from the context dev wrote for it.
	doctor := startKobe(t, append(env, "KOBE_SERVER="+ports.apiURL()), "doctor", "--hold", "5s", "--timeout", "3m")
	id := waitForDoctorID(t, doctor)
	waitForStage(t, ports.apiURL(), id, "holding")

	require.NoError(t, dev.cmd.Process.Signal(syscall.SIGKILL))
	<-dev.done

	dev2 := startKobe(t, env, ports.args(state)...)
	warm := waitReady(t, ports.apiURL(), 90*time.Second)
	t.Logf("time to /readyz: cold state dir %s, existing state dir after kill -9 %s", cold.Round(time.Millisecond), warm.Round(time.Millisecond))

	code := doctor.wait(t, 3*time.Minute)
	out, errOut := doctor.output(t)
	require.Equal(t, 0, code, "doctor failed\nstdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Contains(t, out, id+": Completed")
	assert.Contains(t, out, "durable timer")
	assert.Contains(t, out, "another worker process than before the hold")

	// The run's history is served by the Web UI's API of the restarted process.
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/v1/namespaces/default/workflows/%s/history", ports.ui, id))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, string(body))
	for _, ev := range []string{"TIMER_STARTED", "TIMER_FIRED", "ACTIVITY_TASK_COMPLETED", "WORKFLOW_EXECUTION_COMPLETED"} {
		assert.Contains(t, string(body), ev)
	}

	// A clean stop on SIGTERM: exit 0, every port released.
	require.NoError(t, dev2.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, dev2.wait(t, 30*time.Second))
	for _, p := range []int{ports.api, ports.temporal, ports.ui} {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		require.NoError(t, err, "port %d released", p)
		l.Close()
	}
}

var startedLine = regexp.MustCompile(`started (doctor-[0-9a-f]+)`)

func waitForDoctorID(t *testing.T, p *proc) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		_, e := p.output(t)
		if m := startedLine.FindStringSubmatch(e); m != nil {
			return m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	o, e := p.output(t)
	t.Fatalf("doctor did not start\nstdout:\n%s\nstderr:\n%s", o, e)
	return ""
}

func waitForStage(t *testing.T, apiURL, id, stage string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(apiURL + "/v1/doctor/" + id)
		if err == nil {
			var rep struct{ Stage string }
			_ = json.NewDecoder(resp.Body).Decode(&rep)
			resp.Body.Close()
			if rep.Stage == stage {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("doctor %s never reached stage %s", id, stage)
}

// TestBadConfigurationFailsWithOneLine checks what an operator sees for the usual mistakes:
// a non-zero exit and one line on stderr naming the problem.
func TestBadConfigurationFailsWithOneLine(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	closed := freePort(t)
	sqlite := "sqlite://" + filepath.Join(t.TempDir(), "kobe.db")
	// A server starts only on a migrated store, as an operator leaves it.
	migrate := exec.Command(kobeBin, "migrate", "up", "--store", sqlite)
	out, err := migrate.CombinedOutput()
	require.NoError(t, err, "kobe migrate up: %s", out)
	fresh := "sqlite://" + filepath.Join(t.TempDir(), "fresh.db")
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unreachable temporal", []string{"server", "--store", sqlite, "--temporal-address", fmt.Sprintf("127.0.0.1:%d", closed), "--api-address", "127.0.0.1:0"},
			fmt.Sprintf("cannot reach Temporal at 127.0.0.1:%d", closed)},
		{"bad store dsn", []string{"worker", "--store", "postgres://kobe:pw@127.0.0.1:" + fmt.Sprint(closed) + "/kobe", "--metrics-address", "127.0.0.1:0"},
			"store postgres://kobe:xxxxx@127.0.0.1"},
		{"unsupported store", []string{"server", "--store", "mysql://db/kobe"}, "unsupported scheme"},
		{"store not migrated", []string{"server", "--store", fresh, "--api-address", "127.0.0.1:0"},
			"store " + fresh + " has no schema yet (this kobe expects version 12): run `kobe migrate up --store " + fresh + "` first"},
		{"missing store", []string{"worker"}, "--store is required"},
		{"api port in use", []string{"dev", "--ephemeral", "--no-default-pool", "--api-address", busy.Addr().String()}, "is already in use"},
		{"temporal port in use", []string{"dev", "--ephemeral", "--no-default-pool", "--api-address", "127.0.0.1:0", "--temporal-port", fmt.Sprint(busy.Addr().(*net.TCPAddr).Port)},
			"--temporal-port"},
		{"bad log format", []string{"dev", "--log-format", "xml"}, "--log-format"},
		{"plain http off loopback", []string{"server", "--store", sqlite, "--api-address", "0.0.0.0:0"}, "pass --insecure-http to serve plain HTTP"},
		{"a TLS pair that does not load", []string{"server", "--store", sqlite, "--api-address", "127.0.0.1:0", "--tls-cert-file", notPEM, "--tls-key-file", notPEM},
			"--tls-cert-file " + notPEM + " and --tls-key-file " + notPEM + ": tls: failed to find any PEM data"},
		{"unknown flag", []string{"dev", "--nope"}, "unknown flag: --nope"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, kobeBin, tc.args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			t0 := time.Now()
			err := cmd.Run()
			took := time.Since(t0)
			require.Error(t, err, "must fail")
			assert.Equal(t, 1, cmd.ProcessState.ExitCode())
			lines := nonEmptyLines(stderr.String())
			require.Len(t, lines, 1, "exactly one line on stderr, got:\n%s", stderr.String())
			assert.True(t, strings.HasPrefix(lines[0], "kobe: "), lines[0])
			assert.Contains(t, lines[0], tc.want)
			assert.NotContains(t, lines[0], ":pw@", "no password")
			t.Logf("%-22s %6s  %s", tc.name, took.Round(time.Millisecond), lines[0])
		})
	}
}

func nonEmptyLines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			out = append(out, sc.Text())
		}
	}
	return out
}

// TestCLIAgainstARunningKobe drives status, doctor and version through the binary.
func TestCLIAgainstARunningKobe(t *testing.T) {
	ports := newDevPorts(t)
	cli := ownCLIConfig(t)
	startKobe(t, cli, append(ports.args(t.TempDir()), "--ephemeral")...)
	waitReady(t, ports.apiURL(), 90*time.Second)

	run := func(env []string, args ...string) (int, string, string) {
		cmd := exec.Command(kobeBin, args...)
		cmd.Env = append(append(os.Environ(), cli...), env...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		_ = cmd.Run()
		return cmd.ProcessState.ExitCode(), o.String(), e.String()
	}
	code, out, errOut := run([]string{"KOBE_SERVER=" + ports.apiURL()}, "status")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `Temporal\s+ok`, out)
	assert.Regexp(t, `Store\s+ok`, out)
	assert.Regexp(t, `Workers\s+1: kobe-dev@`, out)

	code, out, _ = run(nil, "status", "-o", "json", "--server", ports.apiURL())
	require.Equal(t, 0, code)
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	assert.Contains(t, st, "temporal")

	code, out, errOut = run(nil, "doctor", "--server", ports.apiURL(), "-o", "json")
	require.Equal(t, 0, code, errOut)
	var rep struct {
		Status string
		Hops   []struct {
			Name string
			OK   bool
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Equal(t, "Completed", rep.Status)
	assert.GreaterOrEqual(t, len(rep.Hops), 6)

	// Without a token (an empty CLI config, no KOBE_TOKEN) a probe is refused, with the hint.
	code, _, errOut = run([]string{"KOBE_CONFIG=" + filepath.Join(t.TempDir(), "none.yaml")}, "doctor", "--server", ports.apiURL())
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "KOBE_TOKEN", "the 401 tells how to pass a token")

	code, out, _ = run(nil, "version", "-o", "json")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"version"`)

	// Nothing listening: one clear line, a hint, and exit 1.
	code, _, errOut = run(nil, "status", "--server", fmt.Sprintf("http://127.0.0.1:%d", freePort(t)))
	assert.Equal(t, 1, code)
	lines := nonEmptyLines(errOut)
	require.Len(t, lines, 2, errOut)
	assert.Contains(t, lines[0], "cannot reach the kobe API")
	assert.True(t, strings.HasPrefix(lines[1], "hint: "), errOut)

	code, _, errOut = run(nil, "doctor", "--server", ports.apiURL(), "--hold", "2h")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--hold 2h0m0s: must be between 0s and 1h0m0s")
}
