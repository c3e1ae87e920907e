package api

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An https:// server is verified: refused without its CA (the error says which flags help),
// accepted with its CA bundle, or with --insecure-skip-tls-verify; options that would not do
// what they say are refused.
func TestClientVerifiesTheServer(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"version":"v1"}`))
	}))
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	ctx := context.Background()

	plain, err := NewClientTLS(srv.URL, TLSOptions{})
	require.NoError(t, err)
	_, err = plain.Status(ctx)
	require.ErrorContains(t, err, "certificate")
	assert.ErrorContains(t, err, "--certificate-authority")

	withCA, err := NewClientTLS(srv.URL, TLSOptions{CAFile: caFile})
	require.NoError(t, err)
	st, err := withCA.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, "v1", st.Version)

	insecure, err := NewClientTLS(srv.URL, TLSOptions{InsecureSkipVerify: true})
	require.NoError(t, err)
	_, err = insecure.Status(ctx)
	require.NoError(t, err)

	_, err = NewClientTLS(srv.URL, TLSOptions{CAFile: caFile, InsecureSkipVerify: true})
	assert.ErrorContains(t, err, "not both")
	_, err = NewClientTLS("http://127.0.0.1:1", TLSOptions{CAFile: caFile})
	assert.ErrorContains(t, err, "not an https:// URL")
	_, err = NewClientTLS(srv.URL, TLSOptions{CAFile: filepath.Join(t.TempDir(), "missing.pem")})
	assert.ErrorContains(t, err, "certificate authority")
	notPEM := filepath.Join(t.TempDir(), "x.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("hello"), 0o600))
	_, err = NewClientTLS(srv.URL, TLSOptions{CAFile: notPEM})
	assert.ErrorContains(t, err, "no PEM certificate")
}
