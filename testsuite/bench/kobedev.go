package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kunobi-ninja/kobe/internal/devserver"
)

// devProcess is a running `kobe dev` started by the bench, as a user would start it: its own
// process, its own state dir and free ports, no default pool. Its output goes to files in
// the bench's temp dir so that a failure can show its last lines.
type devProcess struct {
	cmd          *exec.Cmd
	done         chan struct{}
	stateDir     string
	logPath      string
	APIURL       string
	TemporalAddr string
}

// startDev execs `kobe dev` and returns once /readyz answers 200, with the time it took.
func startDev(ctx context.Context, kobe, toolsDir, workDir string) (*devProcess, time.Duration, error) {
	ports := make([]int, 3)
	for i := range ports {
		p, err := devserver.FreePort("127.0.0.1")
		if err != nil {
			return nil, 0, err
		}
		ports[i] = p
	}
	d := &devProcess{
		stateDir:     filepath.Join(workDir, "state"),
		logPath:      filepath.Join(workDir, "kobe-dev.log"),
		APIURL:       fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		TemporalAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		done:         make(chan struct{}),
	}
	logf, err := os.Create(d.logPath)
	if err != nil {
		return nil, 0, err
	}
	d.cmd = exec.Command(kobe, "dev", "--state-dir", d.stateDir, "--no-default-pool",
		"--api-address", fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"--temporal-port", fmt.Sprint(ports[1]), "--ui-port", fmt.Sprint(ports[2]))
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.Env = append(os.Environ(),
		"KOBE_TOOLS_DIR="+toolsDir,
		// kobe dev writes a CLI context for itself: into the bench's config, never the user's.
		"KOBE_CONFIG="+filepath.Join(workDir, "kobe-config.yaml"))
	// Its own process group: a Ctrl-C in the terminal reaches the bench, which stops kobe with
	// SIGTERM itself after the measurements are interrupted.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t0 := time.Now()
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		return nil, 0, fmt.Errorf("starting %s dev: %w", kobe, err)
	}
	go func() {
		_ = d.cmd.Wait()
		logf.Close()
		close(d.done)
	}()

	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-d.done:
			return d, 0, fmt.Errorf("kobe dev exited before it was ready (%s); last lines of its log:\n%s", d.cmd.ProcessState, d.logTail(20))
		case <-ctx.Done():
			return d, 0, ctx.Err()
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.APIURL+"/readyz", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d, time.Since(t0), nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return d, 0, fmt.Errorf("kobe dev: %s/readyz not 200 after 2 minutes; last lines of its log:\n%s", d.APIURL, d.logTail(20))
}

// AdminToken reads the token kobe dev wrote into its state dir.
func (d *devProcess) AdminToken() (string, error) {
	data, err := os.ReadFile(filepath.Join(d.stateDir, "admin-token"))
	if err != nil {
		return "", fmt.Errorf("kobe dev's admin token: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// Alive reports an error if kobe dev has exited (with the end of its log).
func (d *devProcess) Alive() error {
	select {
	case <-d.done:
		return fmt.Errorf("kobe dev exited (%s); last lines of its log:\n%s", d.cmd.ProcessState, d.logTail(20))
	default:
		return nil
	}
}

// Stop sends SIGTERM (a clean stop) and waits up to grace, then kills. It is safe to call
// more than once.
func (d *devProcess) Stop(grace time.Duration) error {
	if d == nil || d.cmd == nil || d.cmd.Process == nil {
		return nil
	}
	select {
	case <-d.done:
		return nil
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		return nil
	case <-time.After(grace):
		_ = d.cmd.Process.Kill()
		<-d.done
		return errors.New("kobe dev did not stop within " + grace.String() + " of SIGTERM; killed")
	}
}

// logTail returns the last n lines of kobe dev's log.
func (d *devProcess) logTail(n int) string { return tailFile(d.logPath, n) }

// tailFile returns the last n lines of a file.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
