package hosted

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/backends"
)

const hostKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: host, cluster: {server: "https://%s:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: host, user: u}}]
current-context: c
`

// The worker's --host-kubeconfig wins over $KOBE_HOST_KUBECONFIG; without either (and outside a
// cluster) the backends say how to give them one.
func TestHostConfigFlagThenEnvironment(t *testing.T) {
	dir := t.TempDir()
	write := func(name, host string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(fmtHost(host)), 0o600))
		return p
	}
	fromFlag, fromEnv := write("flag", "flag.example"), write("env", "env.example")

	t.Setenv(HostKubeconfigEnv, fromEnv)
	cfg, why := HostConfig(backends.Environment{HostKubeconfig: fromFlag})
	require.Empty(t, why)
	assert.Equal(t, "https://flag.example:6443", cfg.Host)

	cfg, why = HostConfig(backends.Environment{})
	require.Empty(t, why)
	assert.Equal(t, "https://env.example:6443", cfg.Host)

	_, why = HostConfig(backends.Environment{HostKubeconfig: filepath.Join(dir, "missing")})
	assert.Contains(t, why, "--host-kubeconfig")

	t.Setenv(HostKubeconfigEnv, "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, why = HostConfig(backends.Environment{})
	assert.Contains(t, why, "start it with --host-kubeconfig")
}

func fmtHost(host string) string { return fmt.Sprintf(hostKubeconfig, host) }
