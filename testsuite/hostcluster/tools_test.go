package hostcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The reason a real node cannot start names what is missing and how to get it.
func TestMissingNodeToolsAreNamed(t *testing.T) {
	dir := t.TempDir()
	_, err := loadNodeTools(dir)
	require.ErrorContains(t, err, "run `make tools`")

	// Every entry present but runc.
	var lines []string
	for _, k := range required {
		p := filepath.Join(dir, strings.ToLower(k))
		require.NoError(t, os.WriteFile(p, nil, 0o755))
		if k == "RUNC" {
			p = filepath.Join(dir, "no-runc")
		}
		lines = append(lines, k+"="+p)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "versions.env"), []byte("# comment\n"+strings.Join(lines, "\n")+"\n"), 0o644))
	_, err = loadNodeTools(dir)
	require.ErrorContains(t, err, "apt-get install runc")

	// All present, CoreDNS not built: the node runs without cluster DNS.
	lines = lines[:0]
	for _, k := range required {
		lines = append(lines, k+"="+filepath.Join(dir, strings.ToLower(k)))
	}
	lines = append(lines, "COREDNS="+filepath.Join(dir, "coredns-not-built"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "versions.env"), []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	tools, err := loadNodeTools(dir)
	require.NoError(t, err)
	require.NotContains(t, tools, "COREDNS")
	require.Equal(t, filepath.Join(dir, "kubelet"), tools["KUBELET"])
}
