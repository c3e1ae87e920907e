package local

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestToolsPickTheNewestByNumber(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"kine-v0.9.0/kine", "kine-v0.17.5/kine", "kubernetes-v1.9.11/kube-apiserver",
		"kubernetes-v1.37.2/kube-apiserver", "kubernetes-v1.37.10/kube-apiserver"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), nil, 0o755))
	}
	tools := Tools{Dir: dir}
	kine, err := tools.Newest("kine", "kine")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "kine-v0.17.5", "kine"), kine, "v0.17.5 is newer than v0.9.0")
	assert.Equal(t, []string{"v1.9.11", "v1.37.2", "v1.37.10"}, tools.KubernetesVersions())
}

func TestSortVersions(t *testing.T) {
	vs := []string{"v1.37.10", "v1.37.2-rc.1", "v1.4", "v1.37.2", "v1.37", "kine-v0.9.0", "kine-v0.17.5", "latest"}
	SortVersions(vs)
	assert.Equal(t, []string{"latest", "kine-v0.9.0", "kine-v0.17.5", "v1.4", "v1.37", "v1.37.2-rc.1", "v1.37.2", "v1.37.10"}, vs,
		"by number, a release candidate before its release")
}
