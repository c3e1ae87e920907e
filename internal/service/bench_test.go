package service_test

import (
	"context"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/internal/devserver"
	"github.com/kunobi-ninja/kobe/internal/service"
)

// BenchmarkDoctorThroughAPI measures a whole doctor run through the real API of an in-memory
// `kobe dev`: POST (start workflow) → activity on the worker → store write/read → result.
func BenchmarkDoctorThroughAPI(b *testing.B) {
	c := config.Default()
	c.Ephemeral, c.NoDefaultPool, c.APIAddress, c.UIPort = true, true, "127.0.0.1:0", 0
	c.TemporalPort = freePortB(b)
	p := startB(b, c)
	client := doctorClient(b, p)
	ctx := context.Background()

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		started, err := client.StartDoctor(ctx, 0)
		if err != nil {
			b.Fatal(err)
		}
		for {
			rep, err := client.GetDoctor(ctx, started.ID, 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if rep.Status == "Completed" {
				break
			}
			if rep.Status != "Running" {
				b.Fatalf("doctor %s: %s %s", started.ID, rep.Status, rep.Error)
			}
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// BenchmarkReadyz measures /readyz: a Temporal health check plus a store write/read/delete.
func BenchmarkReadyz(b *testing.B) {
	c := config.Default()
	c.Ephemeral, c.NoDefaultPool, c.APIAddress, c.UIPort = true, true, "127.0.0.1:0", 0
	c.TemporalPort = freePortB(b)
	p := startB(b, c)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		resp, err := http.Get(p.APIURL + "/readyz")
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("readyz %d", resp.StatusCode)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

func freePortB(b *testing.B) int {
	p, err := devserver.FreePort("127.0.0.1")
	require.NoError(b, err)
	return p
}

func startB(b *testing.B, c config.Config) *service.Process {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := service.Start(ctx, c, config.ModeDev, zap.NewNop())
	require.NoError(b, err)
	b.Cleanup(p.Stop)
	return p
}
