// Package secretbox seals secrets (kubeconfigs) before they are stored, with AES-256-GCM.
// Workflows only ever carry a reference to a sealed secret, never the secret itself.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Box is a keyring: it opens what any of its keys sealed and seals with its newest key, the
// active one. A sealed value names the key that sealed it (its key id); a value sealed before
// key ids existed (kobe v0.1.0) names none and is opened by trying each key.
type Box struct {
	// keys are in the order of the key file, oldest first: the last one seals.
	keys []key
}

type key struct {
	id   [idSize]byte
	aead cipher.AEAD
}

// KeySize is the length of a key in bytes.
const KeySize = 32

// A sealed value is magic, the key id, then the nonce and the ciphertext. A v0.1.0 value is
// the nonce and the ciphertext alone; the one in 2^32 of those that starts with magic by
// chance is still opened, by the fallback that tries every key on the whole value.
const (
	magic  = "kbx1"
	idSize = 8
)

// New returns a Box for a 32-byte key.
func New(k []byte) (*Box, error) { return NewRing(k) }

// NewRing returns a Box holding keys, oldest first: the last one seals, every one opens.
func NewRing(keys ...[]byte) (*Box, error) {
	if len(keys) == 0 {
		return nil, errors.New("a key ring needs at least one key")
	}
	b := &Box{}
	seen := map[[idSize]byte]bool{}
	for _, k := range keys {
		if len(k) != KeySize {
			return nil, fmt.Errorf("secret key must be %d bytes, got %d", KeySize, len(k))
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		id := keyID(k)
		if seen[id] {
			return nil, fmt.Errorf("key %x is in the ring twice", id)
		}
		seen[id] = true
		b.keys = append(b.keys, key{id: id, aead: aead})
	}
	return b, nil
}

// keyID names a key without revealing it: the first bytes of its SHA-256.
func keyID(k []byte) [idSize]byte {
	sum := sha256.Sum256(k)
	var id [idSize]byte
	copy(id[:], sum[:idSize])
	return id
}

// Fingerprint is the id of the key that seals, in hex: what the store records, so that every
// process of an installation proves it holds the same active key.
func (b *Box) Fingerprint() string {
	id := b.active().id
	return hex.EncodeToString(id[:])
}

// Fingerprints are the ids of every key of the ring, oldest first, in hex.
func (b *Box) Fingerprints() []string {
	out := make([]string, len(b.keys))
	for i, k := range b.keys {
		out[i] = hex.EncodeToString(k.id[:])
	}
	return out
}

// SealedBy returns the fingerprint of the key that sealed a value, "" for a value of v0.1.0
// (no key id).
func SealedBy(sealed []byte) string {
	if len(sealed) < len(magic)+idSize || string(sealed[:len(magic)]) != magic {
		return ""
	}
	return hex.EncodeToString(sealed[len(magic) : len(magic)+idSize])
}

func (b *Box) active() key { return b.keys[len(b.keys)-1] }

// A key file holds the ring: one base64 key per line, oldest first; the last key seals, every
// key opens. Blank lines and lines starting with # are ignored. The file of kobe v0.1.0 (one
// key) is a ring of one.

// LoadKeyFile reads the key ring of path. It never creates one: only `kobe dev` (its own
// state dir's) and `kobe secrets init` do.
func LoadKeyFile(path string) (*Box, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("secret key file %s does not exist: create it once with `kobe secrets init --secret-key-file %s` "+
			"and give the same file to the server and every worker", path, path)
	}
	if err != nil {
		return nil, err
	}
	var keys [][]byte
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("secret key file %s, line %d: not base64: %v", path, i+1, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("secret key file %s holds no key", path)
	}
	b, err := NewRing(keys...)
	if err != nil {
		return nil, fmt.Errorf("secret key file %s: %v", path, err)
	}
	return b, nil
}

// CreateKeyFile writes a new key file at path holding one fresh key, and refuses to replace one
// that exists (its keys may have sealed what the store holds).
func CreateKeyFile(path string) (*Box, error) {
	k, err := newKey()
	if err != nil {
		return nil, err
	}
	if err := installKeyFile(path, [][]byte{k}, false); err != nil {
		return nil, err
	}
	return NewRing(k)
}

// AddKey appends a fresh key to the key file at path: it becomes the active key (it seals), and
// the older ones still open. The file is replaced whole.
func AddKey(path string) (*Box, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if _, err := LoadKeyFile(path); err != nil {
		return nil, err
	}
	k, err := newKey()
	if err != nil {
		return nil, err
	}
	content := strings.TrimRight(string(data), "\n") + "\n" + base64.StdEncoding.EncodeToString(k) + "\n"
	if err := writeKeyFile(path, []byte(content), true); err != nil {
		return nil, err
	}
	return LoadKeyFile(path)
}

// LoadOrCreateKeyFile reads the key ring of path, creating it with one key if it does not
// exist: for `kobe dev`, which owns its state dir.
func LoadOrCreateKeyFile(path string) (*Box, error) {
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return LoadKeyFile(path)
	}
	b, err := CreateKeyFile(path)
	if errors.Is(err, os.ErrExist) {
		// Another process installed one a moment ago, whole (see writeKeyFile).
		return LoadKeyFile(path)
	}
	return b, err
}

func newKey() ([]byte, error) {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return k, nil
}

func installKeyFile(path string, keys [][]byte, replace bool) error {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(base64.StdEncoding.EncodeToString(k) + "\n")
	}
	return writeKeyFile(path, []byte(b.String()), replace)
}

// writeKeyFile writes content whole to a file of its own, then links it into place (or renames
// it over the old one when replace): nobody ever reads a half-written key file, and when a
// server and a worker of kobe dev start together on one state dir exactly one key is installed
// (a link never replaces an existing file).
func writeKeyFile(path string, content []byte, replace bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secret-key-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(content)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o600)
	}
	if werr != nil {
		return werr
	}
	if replace {
		return os.Rename(tmp.Name(), path)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("secret key file %s already exists: %w", path, os.ErrExist)
		}
		return err
	}
	return nil
}

// Random returns a Box with a fresh key that lives only in memory (ephemeral mode, tests).
func Random() *Box {
	k, _ := newKey()
	b, _ := New(k)
	return b
}

// Seal encrypts plaintext with the active key; aad binds the ciphertext to its context (e.g.
// the lease id), so a sealed value copied onto another record does not open.
func (b *Box) Seal(plaintext, aad []byte) ([]byte, error) {
	k := b.active()
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(magic)+idSize+len(nonce)+len(plaintext)+k.aead.Overhead())
	out = append(out, magic...)
	out = append(out, k.id[:]...)
	out = append(out, nonce...)
	return k.aead.Seal(out, nonce, plaintext, aad), nil
}

// Open decrypts what Seal produced with the same aad, with the key the value names, or, for a
// value of v0.1.0 (no key id), with whichever key of the ring sealed it.
func (b *Box) Open(sealed, aad []byte) ([]byte, error) {
	if id := SealedBy(sealed); id != "" {
		for _, k := range b.keys {
			if hex.EncodeToString(k.id[:]) == id {
				if out, err := openWith(k, sealed[len(magic)+idSize:], aad); err == nil {
					return out, nil
				}
			}
		}
	}
	for _, k := range b.keys {
		if out, err := openWith(k, sealed, aad); err == nil {
			return out, nil
		}
	}
	if id := SealedBy(sealed); id != "" {
		return nil, fmt.Errorf("sealed value does not open: it was sealed with key %s, and this key ring holds %s",
			id, strings.Join(b.Fingerprints(), ", "))
	}
	return nil, errors.New("sealed value does not open with this key")
}

func openWith(k key, sealed, aad []byte) ([]byte, error) {
	n := k.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed value too short")
	}
	return k.aead.Open(nil, sealed[:n], sealed[n:], aad)
}
