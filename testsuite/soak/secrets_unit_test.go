package soak

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The scan must find a secret however it is embedded: as is, JSON-escaped, or base64-encoded
// at any offset inside a larger value (as JSON encodes []byte).
func TestFormsFindEmbeddedSecrets(t *testing.T) {
	secret := "kobe_9f8e7d6c5b4a39281706f5e4d3c2b1a0"
	contains := func(hay string) bool {
		for _, f := range forms(secret) {
			if strings.Contains(hay, f) {
				return true
			}
		}
		return false
	}
	assert.True(t, contains("Authorization: Bearer "+secret))
	for _, prefix := range []string{"", "x", "xy", "xyz", "some longer prefix: "} {
		wrapped, _ := json.Marshal(map[string][]byte{"data": []byte(prefix + secret + " and more")})
		assert.True(t, contains(string(wrapped)), "base64 after %q: %s", prefix, wrapped)
	}
	assert.False(t, contains("kobe_ something else entirely"))
	assert.False(t, contains(base64.StdEncoding.EncodeToString([]byte("unrelated bytes of the same length......"))))
}

func TestLongestLineSkipsPEMMarkers(t *testing.T) {
	pem := "-----BEGIN EC PRIVATE KEY-----\nAAAA\nBBBBBBBB\nCC\n-----END EC PRIVATE KEY-----\n"
	assert.Equal(t, "BBBBBBBB", longestLine(pem))
}
