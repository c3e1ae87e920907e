package backendscmd

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
)

var matrix = []backends.Capabilities{
	{Backend: "local", Contract: "v1", Description: "processes", Sleep: true, Freeze: true, CertRotate: true, HostBound: true, Activity: true, WarmBind: true},
	{Backend: "k3s", Contract: "v1", Description: "statefulsets", CertRotate: true, WarmBind: true},
}

func run(t *testing.T, args ...string) (string, error) {
	io, _, out, _ := iostreams.Test()
	// runF swaps the registry for a fixed matrix, then runs the real output code.
	cmdWithMatrix := NewCmdBackends(&factory.Factory{IOStreams: io}, func(o *Options) error {
		o.Matrix = func() []backends.Capabilities { return matrix }
		return backendsRun(o)
	})
	cmdWithMatrix.SetArgs(args)
	cmdWithMatrix.SilenceUsage, cmdWithMatrix.SilenceErrors = true, true
	err := cmdWithMatrix.Execute()
	return out.String(), err
}

func TestTable(t *testing.T) {
	out, err := run(t)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	assert.Contains(t, lines[0], "BACKEND")
	assert.Regexp(t, `^local\s+v1\s+yes\s+yes\s+yes\s+yes\s+yes\s+yes\s+processes`, lines[1])
	assert.Regexp(t, `^k3s\s+v1\s+-\s+-\s+yes\s+-\s+-\s+yes\s+statefulsets`, lines[2])
}

func TestJSON(t *testing.T) {
	out, err := run(t, "-o", "json")
	require.NoError(t, err)
	var got []backends.Capabilities
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, matrix, got)
}

func TestYAML(t *testing.T) {
	out, err := run(t, "-o", "yaml")
	require.NoError(t, err)
	var got []backends.Capabilities
	require.NoError(t, yaml.Unmarshal([]byte(out), &got))
	assert.Equal(t, matrix, got)
}

func TestBadOutput(t *testing.T) {
	_, err := run(t, "-o", "xml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `-o "xml": must be table, json or yaml`)
}
