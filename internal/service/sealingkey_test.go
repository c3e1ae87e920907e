package service_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/service"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// A server and a worker on a real PostgreSQL store: neither creates a key file; the first to
// start records its key's fingerprint; a process whose key file does not hold it is refused at
// start naming both keys; one whose key file holds it as an older key (a key added for a
// rotation) starts and moves the record to its newer key, after which the old file is refused.
func TestServerAndWorkerProveTheyHoldTheSealingKey(t *testing.T) {
	ctx := context.Background()
	tmp := testsuite.StartTemporal(t)
	dsn := migrated(t, testsuite.PostgresDSN(t))
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "secret.key")
	c := config.Default()
	c.Store = dsn
	c.Temporal.Address = tmp.Address
	c.Temporal.TaskQueue = "kobe-sealing-key"
	c.APIAddress, c.MetricsAddress = "127.0.0.1:0", "127.0.0.1:0"
	c.StateDir = filepath.Join(dir, "state")
	c.SecretKeyFile = keyFile

	for _, mode := range []config.Mode{config.ModeServer, config.ModeWorker} {
		_, err := service.Start(ctx, c, mode, zap.NewNop())
		require.Error(t, err, mode)
		assert.Equal(t, "--secret-key-file: secret key file "+keyFile+" does not exist: create it once with `kobe secrets init --secret-key-file "+
			keyFile+"` and give the same file to the server and every worker", err.Error(), mode)
	}
	first, err := secretbox.CreateKeyFile(keyFile)
	require.NoError(t, err)
	start(t, c, config.ModeServer)
	start(t, c, config.ModeWorker)
	st, err := store.OpenCurrent(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	recorded, err := st.SealingKey(ctx)
	require.NoError(t, err)
	assert.Equal(t, first.Fingerprint(), recorded)

	other := c
	other.SecretKeyFile = filepath.Join(dir, "other.key")
	stranger, err := secretbox.CreateKeyFile(other.SecretKeyFile)
	require.NoError(t, err)
	for _, mode := range []config.Mode{config.ModeServer, config.ModeWorker} {
		_, err := service.Start(ctx, other, mode, zap.NewNop())
		require.Error(t, err, mode)
		assert.Equal(t, "--secret-key-file "+other.SecretKeyFile+": its active key is "+stranger.Fingerprint()+
			", but the store's values are sealed with key "+first.Fingerprint()+", which it does not hold: give this process the key file the "+
			"server and the workers share (to move to a new key, add it to that file with `kobe secrets init --add-key`, then run "+
			"`kobe secrets rotate`)", err.Error(), mode)
	}

	// A rotation: the shared file gets a new key; a worker started with it moves the record.
	rotated := c
	rotated.SecretKeyFile = filepath.Join(dir, "rotated.key")
	data, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	replaceFile(t, rotated.SecretKeyFile, data)
	ring, err := secretbox.AddKey(rotated.SecretKeyFile)
	require.NoError(t, err)
	start(t, rotated, config.ModeWorker)
	recorded, err = st.SealingKey(ctx)
	require.NoError(t, err)
	assert.Equal(t, ring.Fingerprint(), recorded)
	_, err = service.Start(ctx, c, config.ModeServer, zap.NewNop())
	require.Error(t, err, "the old file lacks the new key")
	assert.Contains(t, err.Error(), "sealed with key "+ring.Fingerprint()+", which it does not hold")
}
