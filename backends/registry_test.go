package backends_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/backends"
	_ "github.com/kunobi-ninja/kobe/backends/local"
)

func TestResolveNamesTheField(t *testing.T) {
	_, err := backends.Resolve("k9s")
	require.Error(t, err)
	assert.Equal(t, `spec.backend.type: unknown backend "k9s" (compiled in: local)`, err.Error())
	_, err = backends.Resolve("")
	assert.ErrorContains(t, err, "spec.backend.type: required")
	f, err := backends.Resolve("local")
	require.NoError(t, err)
	assert.Equal(t, "local", f.Name)
}

func TestRegisterTwicePanics(t *testing.T) {
	f, _ := backends.Lookup("local")
	assert.Panics(t, func() { backends.Register(f) })
}
