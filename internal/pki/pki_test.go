package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// verify checks cred's certificate against ca as a TLS peer would, for usage (server or client
// auth), and returns it.
func verify(t *testing.T, ca *CA, cred Credential, opts x509.VerifyOptions) (*x509.Certificate, error) {
	t.Helper()
	cert, err := ParseCert(cred.CertPEM)
	require.NoError(t, err)
	opts.Roots = x509.NewCertPool()
	opts.Roots.AddCert(ca.Cert)
	_, err = cert.Verify(opts)
	return cert, err
}

// A cluster's CA is a CA (it signs certificates and nothing else claims to), self-signed, and
// each instance gets its own: another instance's CA does not verify its certificates.
func TestTheCAOfAClusterSignsItsCertificatesOnly(t *testing.T) {
	p, err := NewClusterPKI("inst-1", nil, nil, time.Hour)
	require.NoError(t, err)
	ca := p.CA.Cert
	assert.True(t, ca.IsCA)
	assert.True(t, ca.BasicConstraintsValid)
	assert.NotZero(t, ca.KeyUsage&x509.KeyUsageCertSign, "a CA signs certificates")
	assert.Equal(t, "kobe-inst-1-ca", ca.Subject.CommonName)
	require.NoError(t, ca.CheckSignatureFrom(ca), "self-signed")
	assert.NotEmpty(t, ca.SubjectKeyId)
	assert.IsType(t, &ecdsa.PublicKey{}, ca.PublicKey, "keys are ECDSA P-256")
	assert.Equal(t, elliptic.P256(), ca.PublicKey.(*ecdsa.PublicKey).Curve)

	for name, cred := range map[string]Credential{"serving": p.Serving, "admin": p.Admin} {
		cert, err := ParseCert(cred.CertPEM)
		require.NoError(t, err)
		assert.False(t, cert.IsCA, "%s certificate is no CA", name)
		assert.True(t, cert.BasicConstraintsValid, "%s certificate says it is no CA", name)
		assert.Zero(t, cert.KeyUsage&x509.KeyUsageCertSign, "%s certificate signs nothing", name)
		assert.Equal(t, ca.SubjectKeyId, cert.AuthorityKeyId, "%s certificate names its CA", name)
	}

	other, err := NewClusterPKI("inst-2", nil, nil, time.Hour)
	require.NoError(t, err)
	_, err = verify(t, other.CA, p.Admin, x509.VerifyOptions{KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.Error(t, err, "another instance's CA does not verify this one's admin")
}

// The API server's certificate serves every name and address a client reaches it by (loopback,
// in-cluster, the ones asked for) and only serves: a client cannot present it.
func TestTheServingCertificateServesTheAPIServersNames(t *testing.T) {
	p, err := NewClusterPKI("inst-1", []string{"inst-1.example"}, []net.IP{net.ParseIP("10.1.0.2")}, time.Hour)
	require.NoError(t, err)
	server := x509.VerifyOptions{KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, name := range []string{"localhost", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
		"inst-1.example", "127.0.0.1", "::1", "10.0.0.1", "10.1.0.2"} {
		opts := server
		opts.DNSName = name
		_, err := verify(t, p.CA, p.Serving, opts)
		assert.NoError(t, err, name)
	}
	opts := server
	opts.DNSName = "elsewhere.example"
	_, err = verify(t, p.CA, p.Serving, opts)
	assert.Error(t, err, "a name not asked for")

	cert, err := verify(t, p.CA, p.Serving, server)
	require.NoError(t, err)
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, cert.ExtKeyUsage)
	assert.Equal(t, "kube-apiserver", cert.Subject.CommonName)
	_, err = verify(t, p.CA, p.Serving, x509.VerifyOptions{KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.Error(t, err, "the serving certificate is no client certificate")

	pair, err := tls.X509KeyPair(p.Serving.CertPEM, p.Serving.KeyPEM)
	require.NoError(t, err, "the key is the certificate's")
	assert.NotNil(t, pair.PrivateKey)
}

// A client certificate says who it is as Kubernetes reads it (user in the common name, groups
// in the organizations), is good for client auth only, and never outlives what it was asked
// for nor its CA.
func TestAClientCertificateIsAUserForClientAuthOnly(t *testing.T) {
	ca, err := NewCA("test-ca", 2*time.Hour)
	require.NoError(t, err)
	cred, err := ca.IssueClient("kobe:lease:l-1", []string{"kobe:leases"}, time.Hour)
	require.NoError(t, err)
	cert, err := verify(t, ca, cred, x509.VerifyOptions{KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
	assert.Equal(t, "kobe:lease:l-1", cert.Subject.CommonName)
	assert.Equal(t, []string{"kobe:leases"}, cert.Subject.Organization)
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, cert.ExtKeyUsage)
	assert.NotZero(t, cert.KeyUsage&x509.KeyUsageDigitalSignature, "an ECDSA key signs the TLS handshake")
	assert.Zero(t, cert.KeyUsage&x509.KeyUsageCertSign)
	assert.False(t, cert.IsCA)
	assert.Empty(t, cert.DNSNames)
	assert.Empty(t, cert.IPAddresses)
	_, err = verify(t, ca, cred, x509.VerifyOptions{KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	assert.Error(t, err, "a client certificate cannot serve")

	assert.Equal(t, cert.SerialNumber.Text(16), cred.Serial)
	assert.True(t, cert.NotAfter.Equal(cred.NotAfter))
	assert.WithinDuration(t, time.Now().Add(time.Hour), cert.NotAfter, time.Minute)
	assert.True(t, cert.NotBefore.Before(time.Now().Add(-time.Minute)), "backdated for a host whose clock is behind")
	_, err = tls.X509KeyPair(cred.CertPEM, cred.KeyPEM)
	require.NoError(t, err)

	long, err := ca.IssueClient("u", nil, 24*time.Hour)
	require.NoError(t, err)
	assert.True(t, long.NotAfter.Equal(ca.Cert.NotAfter), "a certificate never outlives its CA")

	_, err = ca.IssueClient("", nil, time.Hour)
	assert.Error(t, err, "no user")
	_, err = ca.IssueClient("u", nil, 0)
	assert.Error(t, err, "no validity")

	other, err := ca.IssueClient("kobe:lease:l-1", []string{"kobe:leases"}, time.Hour)
	require.NoError(t, err)
	assert.NotEqual(t, cred.Serial, other.Serial, "serials are unique")
}

// IssueClientUntil ends the certificate at the time asked for (a lease's end), not a moment
// after, nor after its CA.
func TestIssueClientUntilEndsAtTheTimeAskedFor(t *testing.T) {
	ca, err := NewCA("test-ca", 2*time.Hour)
	require.NoError(t, err)
	end := time.Now().Add(30 * time.Minute).Truncate(time.Second)
	cred, err := ca.IssueClientUntil("u", []string{"g"}, end)
	require.NoError(t, err)
	cert, err := verify(t, ca, cred, x509.VerifyOptions{KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
	assert.True(t, cert.NotAfter.Equal(end), "ends at %s, not %s", end, cert.NotAfter)

	beyond, err := ca.IssueClientUntil("u", nil, time.Now().Add(5*time.Hour))
	require.NoError(t, err)
	assert.True(t, beyond.NotAfter.Equal(ca.Cert.NotAfter))

	_, err = ca.IssueClientUntil("u", nil, time.Now().Add(-time.Minute))
	assert.Error(t, err, "already over")
}

// A CA read back from its PEM signs certificates its original verifies; a certificate that is
// no CA, or a key that is not the certificate's, is refused.
func TestLoadCAReadsItsOwnPEMAndRefusesAMismatch(t *testing.T) {
	ca, err := NewCA("test-ca", time.Hour)
	require.NoError(t, err)
	loaded, err := LoadCA(ca.CertPEM, ca.KeyPEM)
	require.NoError(t, err)
	cred, err := loaded.IssueClient("u", nil, time.Minute)
	require.NoError(t, err)
	_, err = verify(t, ca, cred, x509.VerifyOptions{KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)

	leaf, err := ca.IssueClient("u", nil, time.Minute)
	require.NoError(t, err)
	_, err = LoadCA(leaf.CertPEM, leaf.KeyPEM)
	assert.ErrorContains(t, err, "not a CA")

	other, err := NewCA("other-ca", time.Hour)
	require.NoError(t, err)
	_, err = LoadCA(ca.CertPEM, other.KeyPEM)
	assert.ErrorContains(t, err, "is not the certificate's", "a CA whose key is another's would sign certificates nobody verifies")

	_, err = LoadCA([]byte("junk"), ca.KeyPEM)
	assert.Error(t, err)
	_, err = LoadCA(ca.CertPEM, []byte("junk"))
	assert.Error(t, err)
}

// A CA made by someone else (Cluster API's, kubeadm's in the vcluster syncer) comes with an RSA
// key in PKCS#1: it loads and signs.
func TestLoadCAReadsAnRSAKeyInPKCS1(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})

	ca, err := LoadCA(certPEM, keyPEM)
	require.NoError(t, err)
	cred, err := ca.IssueClient("u", []string{"g"}, time.Minute)
	require.NoError(t, err)
	_, err = verify(t, ca, cred, x509.VerifyOptions{KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
}

// The service-account key pair is a pair: what the private key signs, the public key verifies.
func TestTheServiceAccountKeysAreAPair(t *testing.T) {
	pubPEM, privPEM, err := NewSigningKey()
	require.NoError(t, err)
	priv, err := ParseKey(privPEM)
	require.NoError(t, err)
	block, _ := pem.Decode(pubPEM)
	require.NotNil(t, block)
	assert.Equal(t, "PUBLIC KEY", block.Type)
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	require.NoError(t, err)
	assert.True(t, priv.Public().(*ecdsa.PublicKey).Equal(pub))
}

// A fingerprint names a certificate without its key, and differs between certificates.
func TestFingerprint(t *testing.T) {
	ca, err := NewCA("test-ca", time.Hour)
	require.NoError(t, err)
	other, err := NewCA("test-ca", time.Hour)
	require.NoError(t, err)
	assert.Len(t, Fingerprint(ca.CertPEM), 16)
	assert.NotEqual(t, Fingerprint(ca.CertPEM), Fingerprint(other.CertPEM))
	assert.Equal(t, "", Fingerprint([]byte("junk")))
}
