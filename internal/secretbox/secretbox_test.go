package secretbox

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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

// A value sealed by kobe v0.1.0 (testdata/sealed-v0.1.0.json: written by the code of main at
// commit 2f884c0, no key id) opens with its key file, alone or in a ring where it is no longer
// the active key, and only with its aad.
func TestOpensAValueSealedByV010(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "sealed-v0.1.0.json"))
	require.NoError(t, err)
	var v struct{ KeyFile, AAD, Plaintext, Sealed string }
	require.NoError(t, json.Unmarshal(raw, &v))
	sealed, err := base64.StdEncoding.DecodeString(v.Sealed)
	require.NoError(t, err)
	assert.Empty(t, SealedBy(sealed), "v0.1.0 named no key")

	path := filepath.Join(t.TempDir(), "secret.key")
	require.NoError(t, os.WriteFile(path, []byte(v.KeyFile), 0o600))
	b, err := LoadKeyFile(path)
	require.NoError(t, err)
	got, err := b.Open(sealed, []byte(v.AAD))
	require.NoError(t, err)
	assert.Equal(t, v.Plaintext, string(got))
	_, err = b.Open(sealed, []byte("lease/other"))
	assert.Error(t, err)

	rotated, err := AddKey(path)
	require.NoError(t, err)
	require.Len(t, rotated.Fingerprints(), 2)
	got, err = rotated.Open(sealed, []byte(v.AAD))
	require.NoError(t, err, "the old key still opens it after a new key was added")
	assert.Equal(t, v.Plaintext, string(got))
	resealed, err := rotated.Seal(got, []byte(v.AAD))
	require.NoError(t, err)
	assert.Equal(t, rotated.Fingerprint(), SealedBy(resealed), "re-sealed with the new key")
	assert.NotEqual(t, b.Fingerprint(), rotated.Fingerprint())
}

// A ring opens what any of its keys sealed and seals with the last; a value names its key, and
// a ring without that key says which it lacks.
func TestKeyRing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	first, err := CreateKeyFile(path)
	require.NoError(t, err)
	_, err = CreateKeyFile(path)
	require.ErrorIs(t, err, os.ErrExist, "init never replaces a key file")
	old, err := first.Seal([]byte("old"), []byte("a"))
	require.NoError(t, err)
	assert.Equal(t, first.Fingerprint(), SealedBy(old))
	assert.Len(t, first.Fingerprint(), 16)

	ring, err := AddKey(path)
	require.NoError(t, err)
	assert.Equal(t, []string{first.Fingerprint(), ring.Fingerprint()}, ring.Fingerprints())
	fresh, err := ring.Seal([]byte("new"), []byte("a"))
	require.NoError(t, err)
	assert.Equal(t, ring.Fingerprint(), SealedBy(fresh))
	for sealed, want := range map[string]string{string(old): "old", string(fresh): "new"} {
		got, err := ring.Open([]byte(sealed), []byte("a"))
		require.NoError(t, err)
		assert.Equal(t, want, string(got))
	}
	_, err = first.Open(fresh, []byte("a"))
	require.Error(t, err)
	assert.Equal(t, "sealed value does not open: it was sealed with key "+ring.Fingerprint()+
		", and this key ring holds "+first.Fingerprint(), err.Error())

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Len(t, strings.Split(strings.TrimSpace(string(data)), "\n"), 2, "one key per line")
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	_, err = LoadKeyFile(filepath.Join(t.TempDir(), "missing.key"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not exist: create it once with `kobe secrets init --secret-key-file ")
	bad := filepath.Join(t.TempDir(), "bad.key")
	require.NoError(t, os.WriteFile(bad, []byte("# comment\n\nnot base64!\n"), 0o600))
	_, err = LoadKeyFile(bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 3: not base64")
	require.NoError(t, os.WriteFile(bad, append(data, data...), 0o600))
	_, err = LoadKeyFile(bad)
	assert.ErrorContains(t, err, "is in the ring twice")
}
