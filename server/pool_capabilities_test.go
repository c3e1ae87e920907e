package server

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	_ "github.com/kunobi-ninja/kobe/backends/k3s"
	_ "github.com/kunobi-ninja/kobe/backends/local"
)

// A pool's view lists sleep only where its members can sleep: always on local; on k3s only
// when the pool keeps the servers' data (claims or a shared datastore).
func TestPoolBackendCapabilities(t *testing.T) {
	assert.Equal(t, []string{"certRotation", "freeze", "sleep"}, poolBackendCapabilities("local", nil))
	assert.Equal(t, []string{}, poolBackendCapabilities("k3s", json.RawMessage(`{}`)), "an emptyDir: its state would not survive")
	assert.Equal(t, []string{"sleep"}, poolBackendCapabilities("k3s", json.RawMessage(`{"cluster":{"persistence":{"storageType":"pvc"}}}`)))
	assert.Equal(t, []string{}, poolBackendCapabilities("no-such-backend", nil))
}
