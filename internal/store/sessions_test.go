package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/internal/store"
)

func testSessions(t *testing.T, s store.Store) {
	ctx := context.Background()
	exp := time.Now().Add(time.Hour)
	se, err := s.CreateSession(ctx, store.Session{ID: "sess-1", Hash: "sh1", Principal: "sso:ada@example.com",
		Issuer: "https://idp.example.com", Claims: []byte(`{"sub":"ada","groups":["ops"]}`), ExpiresAt: exp})
	require.NoError(t, err)
	_, err = s.CreateSession(ctx, store.Session{ID: "sess-2", Hash: "sh1", Principal: "x", ExpiresAt: exp})
	assert.Error(t, err, "a hash is unique")
	got, err := s.GetSessionByHash(ctx, "sh1")
	require.NoError(t, err)
	assert.Equal(t, "sso:ada@example.com", got.Principal)
	assert.JSONEq(t, `{"sub":"ada","groups":["ops"]}`, string(got.Claims))
	assert.Equal(t, se.ExpiresAt, got.ExpiresAt)
	assert.True(t, got.RevokedAt.IsZero())
	_, err = s.GetSessionByHash(ctx, "nope")
	assert.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, s.RevokeSession(ctx, "sess-1"))
	require.NoError(t, s.RevokeSession(ctx, "sess-1"), "idempotent")
	got, _ = s.GetSessionByHash(ctx, "sh1")
	assert.False(t, got.RevokedAt.IsZero())
	assert.ErrorIs(t, s.RevokeSession(ctx, "sess-missing"), store.ErrNotFound)
}
