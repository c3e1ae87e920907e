package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/internal/pki"
)

// The real binary: `kobe dev` serving HTTPS from files made by a CA of the test's own, and the
// CLI refused without that CA, served with it on the command line or in a context.
func TestDevServesHTTPSToTheCLI(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("kobe e2e CA", time.Hour)
	require.NoError(t, err)
	cred, err := ca.IssueServing("kobe", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, time.Hour)
	require.NoError(t, err)
	caFile, certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(caFile, ca.CertPEM, 0o600))
	require.NoError(t, os.WriteFile(certFile, cred.CertPEM, 0o600))
	require.NoError(t, os.WriteFile(keyFile, cred.KeyPEM, 0o600))

	env := ownCLIConfig(t)
	ports := newDevPorts(t)
	url := fmt.Sprintf("https://127.0.0.1:%d", ports.api)
	startKobe(t, env, "dev", "--ephemeral", "--no-default-pool", "--ui-port", "0",
		"--api-address", fmt.Sprintf("127.0.0.1:%d", ports.api), "--temporal-port", fmt.Sprint(ports.temporal),
		"--tls-cert-file", certFile, "--tls-key-file", keyFile)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	require.Eventually(t, func() bool {
		resp, err := hc.Get(url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 2*time.Minute, 100*time.Millisecond, "kobe dev serves HTTPS")

	_, stderr, code := kobeCLI(t, env, "status", "--server", url)
	assert.NotZero(t, code, "refused without the CA")
	assert.Contains(t, stderr, "certificate signed by unknown authority")
	assert.Contains(t, stderr, "--certificate-authority")

	out, stderr, code := kobeCLI(t, env, "status", "--server", url, "--certificate-authority", caFile)
	require.Zero(t, code, stderr)
	assert.Contains(t, out, "v0.1.0")

	_, stderr, code = kobeCLI(t, env, "context", "set", "tls", "--server", url, "--certificate-authority", caFile, "--use")
	require.Zero(t, code, stderr)
	out, stderr, code = kobeCLI(t, env, "status")
	require.Zero(t, code, "the context's CA: %s", stderr)
	assert.Contains(t, out, "v0.1.0")
}
