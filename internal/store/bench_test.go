package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// BenchmarkStore measures the writes a lease lifecycle makes, on both drivers.
func BenchmarkStore(b *testing.B) {
	for _, driver := range []string{"sqlite", "postgres"} {
		b.Run(driver, func(b *testing.B) {
			s := testsuite.NewStore(b, driver)
			ctx := context.Background()
			b.Run("UpsertLease", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					err := s.UpsertLease(ctx, store.Lease{ID: fmt.Sprintf("lease-%d", i%1000), Pool: "dev", Principal: "ci",
						Phase: "Bound", TTL: time.Hour, ExpiresAt: time.Now().Add(time.Hour), Metadata: map[string]string{"job": "e2e"}})
					require.NoError(b, err)
				}
			})
			b.Run("AppendEvent", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					_, err := s.AppendEvent(ctx, store.Event{Actor: "ci", Action: "lease.bound", Target: "lease-1", Result: "ok"})
					require.NoError(b, err)
				}
			})
			b.Run("CheckWritable", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					require.NoError(b, store.CheckWritable(ctx, s, "bench"))
				}
			})
			b.Run("ListActiveLeases", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					_, err := s.ListLeases(ctx, store.LeaseFilter{Principal: "ci", Phases: api.ActiveLeasePhases})
					require.NoError(b, err)
				}
			})
		})
	}
}
