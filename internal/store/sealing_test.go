package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite/dbtest"
)

// The sealed values and the sealing key's record, on both drivers: a value is replaced only
// while it holds what was read (a row rewritten or deleted meanwhile is left alone), and the
// record moves only from what the caller saw.
func TestSealedValuesAndTheSealingKey(t *testing.T) {
	for name, newDSN := range dbtest.StoreDSNs() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := store.Open(ctx, newDSN(t))
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, s.UpsertLease(ctx, store.Lease{ID: "l1", Pool: "ci", Principal: "a", Phase: api.LeasePending, TTL: time.Hour}))
			require.NoError(t, s.PutLeaseCredential(ctx, store.LeaseCredential{LeaseID: "l1", Sealed: []byte("v1"), ExpiresAt: time.Now()}))
			require.NoError(t, s.UpsertInstance(ctx, store.Instance{ID: "i1", Pool: "ci", Backend: "local", Phase: api.InstanceReady}))
			require.NoError(t, s.PutPreparedCredential(ctx, "i1", []byte("p1")))

			values, err := s.SealedValues(ctx)
			require.NoError(t, err)
			assert.Equal(t, []store.SealedValue{
				{Kind: store.SealedLeaseCredential, ID: "l1", Sealed: []byte("v1")},
				{Kind: store.SealedPreparedCredential, ID: "i1", Sealed: []byte("p1")},
			}, values)

			ok, err := s.ReplaceSealed(ctx, values[0], []byte("v1-resealed"))
			require.NoError(t, err)
			assert.True(t, ok)
			ok, err = s.ReplaceSealed(ctx, values[0], []byte("stale"))
			require.NoError(t, err)
			assert.False(t, ok, "the row no longer holds what was read")
			c, err := s.GetLeaseCredential(ctx, "l1")
			require.NoError(t, err)
			assert.Equal(t, []byte("v1-resealed"), c.Sealed)

			_, err = s.SealingKey(ctx)
			require.ErrorIs(t, err, store.ErrNotFound)
			ok, err = s.RecordSealingKey(ctx, "", "aaaa")
			require.NoError(t, err)
			assert.True(t, ok)
			ok, err = s.RecordSealingKey(ctx, "", "bbbb")
			require.NoError(t, err)
			assert.False(t, ok, "another process recorded one first")
			ok, err = s.RecordSealingKey(ctx, "cccc", "bbbb")
			require.NoError(t, err)
			assert.False(t, ok, "moves only from what the caller saw")
			ok, err = s.RecordSealingKey(ctx, "aaaa", "bbbb")
			require.NoError(t, err)
			assert.True(t, ok)
			fp, err := s.SealingKey(ctx)
			require.NoError(t, err)
			assert.Equal(t, "bbbb", fp)
		})
	}
}
