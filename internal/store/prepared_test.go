package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// Migration 0010 renames table lease_signers (named when it held a signing CA) to
// prepared_credentials (what it holds: a token of the instance's holder). A store of v0.1.0
// keeps its Ready members' prepared credentials across the rename, on both drivers.
func TestAV010StoreKeepsItsPreparedCredentialsAcrossTheRename(t *testing.T) {
	for _, d := range drivers() {
		t.Run(d.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := d.dsn(t)
			s, err := store.Open(ctx, dsn)
			require.NoError(t, err)
			require.NoError(t, s.UpsertInstance(ctx, store.Instance{ID: "ci-1", Pool: "ci", Backend: "local", Phase: api.InstanceReady}))
			require.NoError(t, s.Close())

			// Back to the schema of v0.1.0 (migrations up to 0009), with a prepared member.
			raw := d.rawSQL(t, dsn)
			_, err = raw.Exec(`ALTER TABLE prepared_credentials RENAME TO lease_signers`)
			require.NoError(t, err)
			if d.name == "postgres" {
				_, err = raw.Exec(`ALTER TABLE lease_signers RENAME CONSTRAINT prepared_credentials_pkey TO lease_signers_pkey`)
				require.NoError(t, err)
			}
			_, err = raw.Exec(`DELETE FROM schema_migrations WHERE version = 10`)
			require.NoError(t, err)
			insert := `INSERT INTO lease_signers (instance_id, sealed, updated_at) VALUES (?, ?, ?)`
			if d.name == "postgres" {
				insert = `INSERT INTO lease_signers (instance_id, sealed, updated_at) VALUES ($1, $2, $3)`
			}
			_, err = raw.Exec(insert, "ci-1", []byte("sealed-token"), time.Now().UTC())
			require.NoError(t, err)

			s, err = store.Open(ctx, dsn)
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			v, err := s.SchemaVersion(ctx)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, v, 10)
			got, err := s.GetPreparedCredential(ctx, "ci-1")
			require.NoError(t, err, "the row of v0.1.0 is read after the rename")
			assert.Equal(t, []byte("sealed-token"), got)
			require.NoError(t, s.PutPreparedCredential(ctx, "ci-1", []byte("again")), "and replaced (its primary key kept)")
			require.NoError(t, s.DeleteInstance(ctx, "ci-1"))
			_, err = s.GetPreparedCredential(ctx, "ci-1")
			require.ErrorIs(t, err, store.ErrNotFound, "it goes with its instance")
		})
	}
}
