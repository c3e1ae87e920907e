package secretbox

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSealOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	b, err := LoadOrCreateKeyFile(path)
	require.NoError(t, err)
	sealed, err := b.Seal([]byte("kubeconfig"), []byte("lease-1"))
	require.NoError(t, err)
	assert.NotContains(t, string(sealed), "kubeconfig")

	again, err := LoadOrCreateKeyFile(path)
	require.NoError(t, err)
	got, err := again.Open(sealed, []byte("lease-1"))
	require.NoError(t, err)
	assert.Equal(t, "kubeconfig", string(got))

	_, err = again.Open(sealed, []byte("lease-2"))
	assert.Error(t, err, "bound to its record")
	_, err = Random().Open(sealed, []byte("lease-1"))
	assert.Error(t, err, "another key does not open it")
	_, err = New([]byte("short"))
	assert.Error(t, err)
}

func TestConcurrentCreateAgreesOnOneKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	boxes := make([]*Box, 8)
	done := make(chan int)
	for i := range boxes {
		go func(i int) {
			b, err := LoadOrCreateKeyFile(path)
			if err == nil {
				boxes[i] = b
			}
			done <- i
		}(i)
	}
	for range boxes {
		<-done
	}
	for i, b := range boxes {
		require.NotNil(t, b, "process %d got no key (before the key was linked into place whole, a reader could find the file empty)", i)
	}
	sealed, err := boxes[0].Seal([]byte("x"), nil)
	require.NoError(t, err)
	for _, b := range boxes {
		_, err := b.Open(sealed, nil)
		assert.NoError(t, err, "every process uses the same key")
	}
}
