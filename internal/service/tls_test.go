package service_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
	"github.com/kunobi-ninja/kobe/internal/cmd/root"
	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/internal/pki"
	"github.com/kunobi-ninja/kobe/internal/service"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// replaceFile writes data beside path and renames it over path, as a mounted Secret's update
// does: a reader sees the old file or the new one.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	require.NoError(t, os.WriteFile(tmp, data, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// servedSerial opens a new TLS connection (a new handshake) and returns the serial of the
// certificate the server presents.
func servedSerial(t *testing.T, addr string, roots *x509.CertPool) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", NextProtos: []string{"h2", "http/1.1"}})
	require.NoError(t, err)
	defer conn.Close()
	assert.Equal(t, "h2", conn.ConnectionState().NegotiatedProtocol, "HTTP/2 is offered")
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Text(16)
}

// runCLI runs the kobe CLI in this process, as the binary would, with a config file of its own.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	t.Setenv("KOBE_CONFIG", filepath.Join(t.TempDir(), "config.yaml"))
	for _, k := range []string{"KOBE_SERVER", "KOBE_TOKEN", "KOBE_CERTIFICATE_AUTHORITY", "KOBE_INSECURE_SKIP_TLS_VERIFY"} {
		t.Setenv(k, "")
	}
	f := factory.New()
	ios, _, out, errOut := iostreams.Test()
	f.IOStreams = ios
	cmd := root.NewCmdRoot(f)
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	err := cmd.Execute()
	return out.String(), err
}

// kobe server serves HTTPS from a certificate and key made by a CA of its own: the CLI reaches
// it with that CA (or when told to skip verification) and is refused without; the files
// replaced while it runs are served from the next handshake on, a half-done replacement (a new
// certificate, the old key) keeps the previous one; /metrics wants its token.
func TestServerServesHTTPSAndFollowsItsCertificateFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("kobe test CA", time.Hour)
	require.NoError(t, err)
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, ca.CertPEM, 0o600))
	issue := func() pki.Credential {
		cred, err := ca.IssueServing("kobe", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, time.Hour)
		require.NoError(t, err)
		return cred
	}
	first := issue()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	replaceFile(t, certFile, first.CertPEM)
	replaceFile(t, keyFile, first.KeyPEM)
	metricsToken := filepath.Join(dir, "metrics-token")
	require.NoError(t, os.WriteFile(metricsToken, []byte("scrape-me\n"), 0o600))

	tmp := testsuite.StartTemporal(t)
	c := config.Default()
	c.Store = migrated(t, "sqlite://"+filepath.Join(dir, "kobe.db"))
	c.Temporal.Address = tmp.Address
	c.APIAddress = "127.0.0.1:0"
	c.TLSCertFile, c.TLSKeyFile, c.MetricsTokenFile = certFile, keyFile, metricsToken
	p := start(t, c, config.ModeServer)
	require.True(t, strings.HasPrefix(p.APIURL, "https://"), p.APIURL)
	addr := strings.TrimPrefix(p.APIURL, "https://")

	_, err = runCLI(t, "status", "--server", p.APIURL)
	require.Error(t, err, "a server whose certificate the system does not trust is refused")
	assert.Contains(t, err.Error(), "certificate")
	assert.Contains(t, err.Error(), "--certificate-authority")
	out, err := runCLI(t, "status", "--server", p.APIURL, "--certificate-authority", caFile)
	require.NoError(t, err)
	assert.Contains(t, out, "v0.1.0")
	_, err = runCLI(t, "status", "--server", p.APIURL, "--insecure-skip-tls-verify")
	require.NoError(t, err)

	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	require.Equal(t, first.Serial, servedSerial(t, addr, roots))

	// A new certificate before its key: the pair does not match, the previous one stays.
	second := issue()
	replaceFile(t, certFile, second.CertPEM)
	assert.Equal(t, first.Serial, servedSerial(t, addr, roots), "a half-replaced pair keeps the previous certificate")
	replaceFile(t, keyFile, second.KeyPEM)
	assert.Equal(t, second.Serial, servedSerial(t, addr, roots), "the next handshake after the replacement shows the new serial")

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	scrape := func(token string) int {
		req, err := http.NewRequest(http.MethodGet, p.APIURL+"/metrics", nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, scrape(""))
	assert.Equal(t, http.StatusOK, scrape("scrape-me"))
}

// An API on a non-loopback address without TLS is refused before anything starts, naming the
// flag that allows it.
func TestPlainHTTPOffLoopbackIsRefused(t *testing.T) {
	c := config.Default()
	c.Store = "sqlite://" + filepath.Join(t.TempDir(), "kobe.db")
	c.APIAddress = "0.0.0.0:0"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := service.Start(ctx, c, config.ModeServer, zap.NewNop())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--insecure-http")
	_, statErr := os.Stat(filepath.Join(filepath.Dir(strings.TrimPrefix(c.Store, "sqlite://")), "kobe.db"))
	assert.True(t, os.IsNotExist(statErr), "nothing was opened")
}
