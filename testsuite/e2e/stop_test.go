package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shutdownNoise are the log lines of a part that still talks to Temporal while it stops: a
// worker polling, or a client dialling a frontend that is gone.
var shutdownNoise = []string{"dial error", "connection refused", "Failed to poll", "graceful_stop"}

// afterLine returns the lines of log that follow the first line containing marker.
func afterLine(log, marker string) []string {
	lines := strings.Split(log, "\n")
	for i, l := range lines {
		if strings.Contains(l, marker) {
			return lines[i+1:]
		}
	}
	return nil
}

// TestDevStopsCleanlyOnSIGINT: Ctrl-C of `kobe dev` stops its workers before the embedded
// Temporal, so nothing in the log after the signal is a worker or client failing to reach it,
// and the process exits 0.
func TestDevStopsCleanlyOnSIGINT(t *testing.T) {
	state := t.TempDir()
	ports := newDevPorts(t)
	dev := startKobe(t, nil, append(ports.args(state), "--ui-port", "0")...)
	waitReady(t, ports.apiURL(), 90*time.Second)

	// One doctor run: the worker has run workflow and activity tasks and its pollers are parked
	// in long polls when the signal comes.
	out, errOut, code := kobeCLI(t, nil, "doctor", "--server", ports.apiURL())
	require.Equal(t, 0, code, "doctor\nstdout:\n%s\nstderr:\n%s", out, errOut)

	require.NoError(t, dev.cmd.Process.Signal(syscall.SIGINT))
	exit := dev.wait(t, 2*time.Minute)
	stdout, stderr := dev.output(t)
	require.Equal(t, 0, exit, "exit code after SIGINT\nstderr:\n%s", stderr)

	after := afterLine(stderr, "shutting down")
	require.NotNil(t, after, "no 'shutting down' line in the log:\n%s", stderr)
	var noisy []string
	for _, l := range after {
		for _, n := range shutdownNoise {
			if strings.Contains(l, n) {
				noisy = append(noisy, l)
				break
			}
		}
	}
	assert.Empty(t, noisy, "%d log lines after the signal show a part still talking to a stopped Temporal", len(noisy))
	assert.Contains(t, stderr, "\tstopped", "the log ends with the stop")
	// No local cluster was created: the stop says nothing keeps running.
	assert.NotContains(t, stdout, "keep running")
}
