package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkDevStartToReady measures `kobe dev` from exec to a 200 on /readyz, on a fresh
// state dir and on an existing one (after a clean stop), and the process's RSS once idle.
// `make bench` reports the fresh-state-dir start and idle RSS too, once, beside the lease
// figures; this benchmark stays (under `make bench-go`) for the restart on an existing state
// dir and for repeated runs.
func BenchmarkDevStartToReady(b *testing.B) {
	for _, existing := range []bool{false, true} {
		name := "cold-state-dir"
		if existing {
			name = "existing-state-dir"
		}
		b.Run(name, func(b *testing.B) {
			t := b
			var total time.Duration
			var rss float64
			for i := 0; i < b.N; i++ {
				state := b.TempDir()
				ports := newDevPorts(t)
				if existing {
					p := startKobe(t, nil, ports.args(state)...)
					waitReady(t, ports.apiURL(), 90*time.Second)
					_ = p.cmd.Process.Signal(syscall.SIGTERM)
					p.wait(t, 30*time.Second)
				}
				t0 := time.Now()
				p := startKobe(t, nil, ports.args(state)...)
				waitReady(t, ports.apiURL(), 90*time.Second)
				total += time.Since(t0)
				time.Sleep(2 * time.Second) // let start-up garbage settle before reading RSS
				rss += rssMiB(p.cmd.Process.Pid)
				_ = p.cmd.Process.Signal(syscall.SIGTERM)
				p.wait(t, 30*time.Second)
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-ready")
			b.ReportMetric(rss/float64(b.N), "idle-RSS-MiB")
		})
	}
}

func rssMiB(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
