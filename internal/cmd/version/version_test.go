package version

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kunobi-ninja/kobe/internal/buildinfo"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdtest"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
)

func TestOutputs(t *testing.T) {
	ios, _, out, _ := iostreams.Test()
	f := &factory.Factory{IOStreams: ios}
	require.NoError(t, cmdtest.Run(NewCmdVersion(f, nil)))
	// A plain build (no -ldflags, as in tests) prints the release of the source.
	assert.Regexp(t, `^kobe v0\.1\.0 \(commit `, out.String())
	assert.Equal(t, buildinfo.Release, buildinfo.Get().Version)

	out.Reset()
	require.NoError(t, cmdtest.Run(NewCmdVersion(f, nil), "-o", "yaml"))
	var bi buildinfo.Info
	require.NoError(t, yaml.Unmarshal(out.Bytes(), &bi))
	assert.Equal(t, buildinfo.Get().Version, bi.Version)

	err := cmdtest.Run(NewCmdVersion(f, nil), "-o", "table")
	require.ErrorContains(t, err, `-o "table": must be text, json or yaml`)
}
