package k0s_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/k0s"
)

// Golden templates are refused on k0s with the reason (no running k0s shows which datastore
// keys hold its identity), as a spec error; the same datastore without them is taken.
func TestGoldenTemplatesRefusedOnK0s(t *testing.T) {
	f, err := backends.Resolve(k0s.Name)
	require.NoError(t, err)
	err = f.Prototype.Validate(spec("g1", `{"datastore":{"secretRef":"pg","goldenTemplates":true}}`))
	require.Error(t, err)
	assert.True(t, backends.IsInvalidSpec(err))
	assert.Contains(t, err.Error(), "spec.backend.datastore.goldenTemplates: not supported by kobe's k0s backend")
	require.NoError(t, f.Prototype.Validate(spec("g2", `{"datastore":{"secretRef":"pg"}}`)))
}
