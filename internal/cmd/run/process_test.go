package run

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdtest"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdutil"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
)

// TestMain lets the test binary play `kobe run` as a separate process (the real factory, the
// real signal handling), so that signals can be sent to it as a CI runner or a terminal would.
func TestMain(m *testing.M) {
	if os.Getenv("KOBE_TEST_RUN_HELPER") == "1" {
		var args []string
		if err := json.Unmarshal([]byte(os.Getenv("KOBE_TEST_RUN_ARGS")), &args); err != nil {
			panic(err)
		}
		cmd := NewCmdRun(factory.New(), nil)
		cmd.SetArgs(args)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err != nil {
			os.Exit(cmdutil.Report(os.Stderr, err))
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func startKobeRun(t *testing.T, a *cmdtest.API, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	argsJSON, err := json.Marshal(args)
	require.NoError(t, err)
	p := exec.Command(os.Args[0], "-test.run=^$")
	p.Env = append(os.Environ(), "KOBE_TEST_RUN_HELPER=1", "KOBE_TEST_RUN_ARGS="+string(argsJSON),
		"KOBE_SERVER="+a.URL, "KOBE_TOKEN="+cmdtest.Token, "KOBE_CONFIG="+filepath.Join(t.TempDir(), "none.yaml"))
	var stderr bytes.Buffer
	p.Stderr = &stderr
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Process.Kill() })
	return p, &stderr
}

func exitStatus(t *testing.T, p *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			return 0
		}
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		return ee.ExitCode()
	case <-time.After(20 * time.Second):
		t.Fatal("kobe run did not exit")
		return -1
	}
}

func TestProcessSIGINTWhileCMDRuns(t *testing.T) {
	a := cmdtest.New(t)
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	p, stderr := startKobeRun(t, a, "ci", "--", "sh", "-c", `echo "$KUBECONFIG" > "$0.path"; touch "$0"; exec sleep 30`, started)
	waitForFile(t, started)
	require.NoError(t, p.Process.Signal(syscall.SIGINT))
	assert.Equal(t, 130, exitStatus(t, p), stderr.String())
	assert.Equal(t, api.LeaseReleased, a.OnlyLease(t).Phase)
	path, err := os.ReadFile(started + ".path")
	require.NoError(t, err)
	_, err = os.Stat(string(bytes.TrimSpace(path)))
	assert.True(t, os.IsNotExist(err), "the temporary kubeconfig is removed")
}

func TestProcessExitCodeAndSIGTERMWhileQueued(t *testing.T) {
	a := cmdtest.New(t)
	p, stderr := startKobeRun(t, a, "ci", "--", "sh", "-c", "exit 3")
	assert.Equal(t, 3, exitStatus(t, p), stderr.String())
	assert.Equal(t, api.LeaseReleased, a.OnlyLease(t).Phase)

	b := cmdtest.New(t)
	b.Mu.Lock()
	b.PendingPolls = 100000
	b.Mu.Unlock()
	p, stderr = startKobeRun(t, b, "ci", "--", "true")
	require.Eventually(t, func() bool { return len(b.Seen()) >= 2 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, p.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 143, exitStatus(t, p), stderr.String())
	assert.Equal(t, api.LeaseReleased, b.OnlyLease(t).Phase)
	assert.Contains(t, stderr.String(), "interrupted")

	c := cmdtest.New(t)
	c.Mu.Lock()
	c.Fail["POST /v1/leases"] = cmdtest.Failure{Status: 429, Reason: "quota_exhausted", Detail: "2 of 2 active leases"}
	c.Mu.Unlock()
	p, stderr = startKobeRun(t, c, "ci", "--", "true")
	assert.Equal(t, ExitLeaseFailed, exitStatus(t, p))
	assert.Contains(t, stderr.String(), "reason quota_exhausted")
	assert.Contains(t, stderr.String(), "hint: your role's quota is used up: 2 of 2 active leases")
}
