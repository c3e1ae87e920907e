package instance_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
)

// BenchmarkLocalWake measures the wake of a sleeping local instance (kine and kube-apiserver):
// Resume, then WaitReady, as instance.Wake runs them. It wakes at least 10 times whatever b.N
// and reports the median (wake-p50-ms) and the slowest (wake-max-ms).
func BenchmarkLocalWake(b *testing.B) {
	tools := local.DefaultToolsDir()
	if len(local.Tools{Dir: tools}.KubernetesVersions()) == 0 {
		b.Skipf("no Kubernetes binaries in %s: run `make tools` (or set KOBE_TOOLS_DIR)", tools)
	}
	be, err := local.New(local.Config{StateDir: b.TempDir(), HostID: "bench-host", ToolsDir: tools})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const id = "wake-bench"
	b.Cleanup(func() { _ = be.Delete(context.Background(), id) })
	spec := backends.InstanceSpec{ID: id, Pool: "p", KubernetesVersion: "v1.37.2", Options: []byte(`{"components":["apiserver"]}`)}
	if _, err := be.Create(ctx, spec); err != nil {
		b.Fatal(err)
	}
	ready := func() {
		wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		if _, err := be.WaitReady(wctx, id, nil); err != nil {
			b.Fatal(err)
		}
	}
	ready()
	runs := max(b.N, 10)
	wakes := make([]time.Duration, 0, runs)
	b.ResetTimer()
	for range runs {
		b.StopTimer()
		if err := be.Sleep(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if err := be.Resume(ctx, id); err != nil {
			b.Fatal(err)
		}
		ready()
		wakes = append(wakes, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(wakes)
	b.ReportMetric(float64(wakes[len(wakes)/2].Milliseconds()), "wake-p50-ms")
	b.ReportMetric(float64(wakes[len(wakes)-1].Milliseconds()), "wake-max-ms")
	b.Logf("%d wakes: p50 %s, max %s", len(wakes), wakes[len(wakes)/2].Round(time.Millisecond), wakes[len(wakes)-1].Round(time.Millisecond))
}
