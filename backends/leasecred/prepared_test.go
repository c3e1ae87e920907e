package leasecred

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
)

func prepared() backends.PreparedCredential {
	return backends.PreparedCredential{Cluster: "inst-1", Server: "https://10.1.0.2:6443", ServerCAPEM: []byte("server-ca"),
		User: "system:serviceaccount:kube-system:kobe-lease-holder", Token: "holder-token",
		ExpiresAt: time.Now().Add(24 * time.Hour), TokenID: "uid-1"}
}

func newBox(t *testing.T) *secretbox.Box {
	key := make([]byte, secretbox.KeySize)
	_, err := rand.Read(key)
	require.NoError(t, err)
	box, err := secretbox.New(key)
	require.NoError(t, err)
	return box
}

// newStore is a real store (SQLite) for the test.
func newStore(t *testing.T) store.Store {
	st, err := store.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "kobe.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func TestMintWritesTheHoldersToken(t *testing.T) {
	notAfter := time.Now().Add(time.Hour)
	cred, err := Mint(prepared(), "lease-1", notAfter)
	require.NoError(t, err)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(cred.Kubeconfig)
	require.NoError(t, err)
	assert.Equal(t, "https://10.1.0.2:6443", cfg.Host)
	assert.Equal(t, []byte("server-ca"), cfg.CAData)
	assert.Equal(t, "holder-token", cfg.BearerToken)
	assert.Empty(t, cfg.CertData, "no certificate: nothing in the row can sign one")
	assert.Equal(t, "system:serviceaccount:kube-system:kobe-lease-holder", cred.User)
	assert.Equal(t, "uid-1", cred.ID, "the id the instance's audit log records")
	assert.True(t, cred.ExpiresAt.Equal(notAfter), "the lease can live no longer than notAfter")
}

func TestMintSaysWhenAShortTokenEnds(t *testing.T) {
	p := prepared()
	p.ExpiresAt = time.Now().Add(10 * time.Minute)
	cred, err := Mint(p, "lease-1", time.Now().Add(time.Hour))
	require.NoError(t, err)
	assert.True(t, cred.ExpiresAt.Equal(p.ExpiresAt), "an API server that caps token lifetimes ends it first")
}

func TestMintRefusesWhatCannotBeValid(t *testing.T) {
	_, err := Mint(prepared(), "", time.Now().Add(time.Hour))
	assert.ErrorContains(t, err, "needs a lease id")
	_, err = Mint(prepared(), "lease-1", time.Now().Add(-time.Second))
	assert.ErrorContains(t, err, "would already have expired")
	_, err = Mint(backends.PreparedCredential{Cluster: "inst-1"}, "lease-1", time.Now().Add(time.Hour))
	assert.ErrorContains(t, err, "prepared credential of inst-1: no token")
}

// A sealed row opens only with the workers' key and only under its own instance's id: a row
// copied to another instance does not bind that instance's lease to this instance.
func TestSealedRowsOpenOnlyForTheirInstance(t *testing.T) {
	box := newBox(t)
	sealed, err := SealPrepared(box, "inst-1", prepared())
	require.NoError(t, err)
	assert.NotContains(t, string(sealed), "holder-token")
	got, err := OpenPrepared(box, "inst-1", sealed)
	require.NoError(t, err)
	assert.Equal(t, "holder-token", got.Token)
	assert.WithinDuration(t, prepared().ExpiresAt, got.ExpiresAt, time.Second)

	_, err = OpenPrepared(box, "inst-2", sealed)
	assert.ErrorContains(t, err, "opening the prepared lease credential of inst-2")
	_, err = OpenPrepared(newBox(t), "inst-1", sealed)
	assert.ErrorContains(t, err, "is the secret key the workers' key")
}

// The API binding a lease and its workflow making sure the credential exists race to store
// the lease's first kubeconfig: both hand out the one stored first, on a real store.
func TestEnsureHandsOutTheFirstStored(t *testing.T) {
	ctx := context.Background()
	st, box := newStore(t), newBox(t)
	require.NoError(t, st.UpsertInstance(ctx, store.Instance{ID: "inst-1", Pool: "p", Backend: "local", Phase: api.InstanceReady}))
	sealed, err := SealPrepared(box, "inst-1", prepared())
	require.NoError(t, err)
	require.NoError(t, st.PutPreparedCredential(ctx, "inst-1", sealed))
	require.NoError(t, st.UpsertLease(ctx, store.Lease{ID: "lease-1", Pool: "p", Principal: "alice", Phase: api.LeasePending}))

	p, err := Prepared(ctx, st, box, "inst-1")
	require.NoError(t, err)
	var wg sync.WaitGroup
	got := make([][]byte, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kc, err := Ensure(ctx, st, box, p, "lease-1", time.Now().Add(time.Hour))
			assert.NoError(t, err)
			got[i] = kc
		}()
	}
	wg.Wait()
	for _, kc := range got[1:] {
		assert.Equal(t, got[0], kc)
	}
	_, err = Prepared(ctx, st, box, "inst-2")
	assert.ErrorIs(t, err, store.ErrNotFound)

	// An ended lease gets none (its credential was revoked when it ended).
	require.NoError(t, st.UpsertLease(ctx, store.Lease{ID: "lease-2", Pool: "p", Principal: "alice", Phase: api.LeaseReleased}))
	_, err = Ensure(ctx, st, box, p, "lease-2", time.Now().Add(time.Hour))
	assert.ErrorIs(t, err, store.ErrLeaseEnded)
}
