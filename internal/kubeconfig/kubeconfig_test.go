package kubeconfig

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
)

// What kobe writes, client-go reads back as the same server, CA and credential.
func TestKubeconfigsReadBackWithClientGo(t *testing.T) {
	ca, cert, key := []byte("ca-pem"), []byte("cert-pem"), []byte("key-pem")

	kc, err := ForClientCert("c-1", "https://10.0.0.1:6443", ca, cert, key, "kobe:lease:l-1")
	require.NoError(t, err)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	require.NoError(t, err)
	assert.Equal(t, "https://10.0.0.1:6443", cfg.Host)
	assert.Equal(t, ca, cfg.CAData)
	assert.Equal(t, cert, cfg.CertData)
	assert.Equal(t, key, cfg.KeyData)
	assert.Empty(t, cfg.BearerToken)

	kc, err = ForToken("c-1", "https://10.0.0.1:6443", ca, "tok", "holder")
	require.NoError(t, err)
	raw, err := clientcmd.Load(kc)
	require.NoError(t, err)
	assert.Equal(t, "c-1", raw.CurrentContext)
	assert.Equal(t, "holder", raw.Contexts["c-1"].AuthInfo)
	cfg, err = clientcmd.RESTConfigFromKubeConfig(kc)
	require.NoError(t, err)
	assert.Equal(t, "tok", cfg.BearerToken)
	assert.Empty(t, cfg.CertData)
}
