package leasecred

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// A lease's kubeconfig is stored sealed to its lease: Put replaces it (an extension's new
// certificate), Add keeps the first, Kubeconfig reads it back; a row that is not the lease's,
// or a key that is not the workers', does not open; an ended lease stores nothing.
func TestALeasesKubeconfigIsStoredSealedToTheLease(t *testing.T) {
	ctx := context.Background()
	st, box := newStore(t), newBox(t)
	for _, id := range []string{"lease-1", "lease-2"} {
		require.NoError(t, st.UpsertLease(ctx, store.Lease{ID: id, Pool: "p", Principal: "alice", Phase: api.LeaseBound}))
	}
	cred := func(kc string) backends.Credential {
		return backends.Credential{Kubeconfig: []byte(kc), ID: kc, ExpiresAt: time.Now().Add(time.Hour)}
	}

	_, err := Kubeconfig(ctx, st, box, "lease-1")
	assert.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, Put(ctx, st, box, "lease-1", cred("first")))
	require.NoError(t, Put(ctx, st, box, "lease-1", cred("extended")))
	kc, err := Kubeconfig(ctx, st, box, "lease-1")
	require.NoError(t, err)
	assert.Equal(t, "extended", string(kc))
	row, err := st.GetLeaseCredential(ctx, "lease-1")
	require.NoError(t, err)
	assert.NotContains(t, string(row.Sealed), "extended", "sealed")

	kc, err = Add(ctx, st, box, "lease-2", cred("api"))
	require.NoError(t, err)
	assert.Equal(t, "api", string(kc))
	kc, err = Add(ctx, st, box, "lease-2", cred("workflow"))
	require.NoError(t, err)
	assert.Equal(t, "api", string(kc), "the first stored wins")

	_, err = open(box, "lease-2", row.Sealed)
	assert.ErrorContains(t, err, "opening the credential of lease lease-2", "lease-1's row does not open as lease-2's")
	_, err = Kubeconfig(ctx, st, newBox(t), "lease-1")
	assert.Error(t, err, "another key")

	require.NoError(t, st.UpsertLease(ctx, store.Lease{ID: "lease-3", Pool: "p", Principal: "alice", Phase: api.LeaseExpired}))
	assert.ErrorIs(t, Put(ctx, st, box, "lease-3", cred("late")), store.ErrLeaseEnded)
	_, err = Add(ctx, st, box, "lease-3", cred("late"))
	assert.ErrorIs(t, err, store.ErrLeaseEnded)
}
