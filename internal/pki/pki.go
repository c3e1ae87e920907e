// Package pki issues the certificates and keys of kobe-managed clusters: each instance's CA,
// its API server's serving certificate, its service-account signing key, an admin client
// certificate, and short-lived per-lease client certificates. Because kobe issues every
// credential itself, it always knows when each one expires.
//
// Keys are ECDSA P-256: small, fast to generate (a cluster's whole PKI takes about a
// millisecond), and accepted by kube-apiserver for TLS, client auth and service-account tokens.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// clockSkew backdates NotBefore so that a certificate works at once on a host whose clock is
// slightly behind the issuer's.
const clockSkew = 5 * time.Minute

// CA is a certificate authority with its private key.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// Credential is an issued certificate and its private key, both PEM.
type Credential struct {
	CertPEM  []byte
	KeyPEM   []byte
	NotAfter time.Time
	// Serial identifies the certificate (hex) for audit and revocation.
	Serial string
}

// NewCA creates a self-signed CA valid for validity.
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"kobe"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// LoadCA parses a CA from PEM: kobe's own, or one made by someone else (Cluster API's, or
// kubeadm's code in the vcluster syncer; see ParseKey for the keys it reads). A key that is
// not the certificate's is refused here: the CA would sign certificates that nobody verifies.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("ca certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("ca certificate: not a CA")
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("ca key: %w", err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, errors.New("ca key: it is not the certificate's")
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// IssueServing issues a TLS server certificate for the given names and addresses.
func (ca *CA) IssueServing(commonName string, dnsNames []string, ips []net.IP, validity time.Duration) (Credential, error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, validity)
}

// IssueClient issues a client certificate. Kubernetes reads the user from the common name and
// the groups from the organizations.
func (ca *CA) IssueClient(user string, groups []string, validity time.Duration) (Credential, error) {
	if user == "" {
		return Credential{}, errors.New("client certificate needs a user")
	}
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, validity)
}

// IssueClientUntil is IssueClient with an absolute end: the certificate expires at notAfter
// (or with the CA, if sooner), not a moment after it.
func (ca *CA) IssueClientUntil(user string, groups []string, notAfter time.Time) (Credential, error) {
	if user == "" {
		return Credential{}, errors.New("client certificate needs a user")
	}
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotAfter:    notAfter,
	}, time.Until(notAfter))
}

func (ca *CA) issue(tmpl *x509.Certificate, validity time.Duration) (Credential, error) {
	if validity <= 0 {
		return Credential{}, fmt.Errorf("validity must be positive, got %s", validity)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Credential{}, err
	}
	serial, err := newSerial()
	if err != nil {
		return Credential{}, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-clockSkew)
	if tmpl.NotAfter.IsZero() || tmpl.NotAfter.After(now.Add(validity)) {
		tmpl.NotAfter = now.Add(validity)
	}
	// A certificate never outlives the CA that signed it.
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	// A certificate holds whole seconds: the Credential says the end it really has, not one up
	// to a second later.
	tmpl.NotAfter = tmpl.NotAfter.Truncate(time.Second)
	tmpl.BasicConstraintsValid = true
	tmpl.AuthorityKeyId = ca.Cert.SubjectKeyId
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return Credential{}, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return Credential{}, err
	}
	return Credential{CertPEM: encodeCert(der), KeyPEM: keyPEM, NotAfter: tmpl.NotAfter, Serial: serial.Text(16)}, nil
}

// NewSigningKey creates a key pair for signing service-account tokens; it returns the public
// and private keys as PEM.
func NewSigningKey() (publicPEM, privatePEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	priv, err := encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), priv, nil
}

// ParseCert parses the first certificate of a PEM bundle.
func ParseCert(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// ParseKey parses a private key in PKCS#8, EC or PKCS#1 RSA ("RSA PRIVATE KEY", what Cluster
// API and kubeadm write).
func ParseKey(keyPEM []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("no PEM key")
	}
	if block.Type == "RSA PRIVATE KEY" {
		return x509.ParsePKCS1PrivateKey(block.Bytes)
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, errors.New("key cannot sign")
		}
		return s, nil
	}
	return x509.ParseECPrivateKey(block.Bytes)
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func keyID(pub *ecdsa.PublicKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha256.Sum256(der)
	return sum[:20]
}

// Fingerprint is a short, loggable identity of a certificate (never the key).
func Fingerprint(certPEM []byte) string {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return ""
	}
	sum := sha256.Sum256(block.Bytes)
	return hex.EncodeToString(sum[:8])
}
