// Package secretbox seals secrets (kubeconfigs) before they are stored, with AES-256-GCM.
// Workflows only ever carry a reference to a sealed secret, never the secret itself.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Box seals and opens with one key.
type Box struct {
	aead cipher.AEAD
}

// KeySize is the length of a key in bytes.
const KeySize = 32

// New returns a Box for a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secret key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// LoadOrCreateKeyFile reads a base64 key from path, creating it (mode 0600) if it does not exist.
func LoadOrCreateKeyFile(path string) (*Box, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key := make([]byte, KeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		// The key is written whole to a file of its own, then linked into place: a link never
		// replaces an existing file, so when a server and a worker start together on a shared
		// volume exactly one key is installed, and nobody ever reads a half-written one (with
		// an O_EXCL create followed by a write, a reader could find the file empty).
		tmp, err := os.CreateTemp(filepath.Dir(path), ".secret-key-*")
		if err != nil {
			return nil, err
		}
		defer os.Remove(tmp.Name())
		_, werr := tmp.Write([]byte(base64.StdEncoding.EncodeToString(key) + "\n"))
		if cerr := tmp.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Chmod(tmp.Name(), 0o600)
		}
		if werr != nil {
			return nil, werr
		}
		if err := os.Link(tmp.Name(), path); errors.Is(err, os.ErrExist) {
			return loadAfterRace(path)
		} else if err != nil {
			return nil, err
		}
		return New(key)
	}
	if err != nil {
		return nil, err
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("secret key file %s: not base64: %v", path, err)
	}
	return New(key)
}

// loadAfterRace reads a key file another process is writing at this moment.
func loadAfterRace(path string) (*Box, error) {
	for i := 0; i < 50; i++ {
		data, err := os.ReadFile(path)
		if err == nil && len(strings.TrimSpace(string(data))) > 0 {
			return LoadOrCreateKeyFile(path)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, fmt.Errorf("secret key file %s stays empty", path)
}

// Random returns a Box with a fresh key that lives only in memory (ephemeral mode, tests).
func Random() *Box {
	key := make([]byte, KeySize)
	_, _ = rand.Read(key)
	b, _ := New(key)
	return b
}

// Seal encrypts plaintext; aad binds the ciphertext to its context (e.g. the lease id), so a
// sealed value copied onto another record does not open.
func (b *Box) Seal(plaintext, aad []byte) ([]byte, error) {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return b.aead.Seal(nonce, nonce, plaintext, aad), nil
}

// Open decrypts what Seal produced with the same aad.
func (b *Box) Open(sealed, aad []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed value too short")
	}
	out, err := b.aead.Open(nil, sealed[:n], sealed[n:], aad)
	if err != nil {
		return nil, errors.New("sealed value does not open with this key")
	}
	return out, nil
}
