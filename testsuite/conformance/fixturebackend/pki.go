package fixturebackend

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// authority is an instance's certificate authority: it signs the instance's serving certificate
// and every client certificate of it, and nothing else trusts it.
type authority struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	pool    *x509.CertPool
}

// issued is a certificate and its key, as a kubeconfig carries them.
type issued struct {
	certPEM, keyPEM []byte
	notAfter        time.Time
	serial          string
}

func newAuthority(id string) (*authority, error) {
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
		SerialNumber: serial, Subject: pkix.Name{CommonName: "fixture-ca-" + id},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &authority{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pool: pool}, nil
}

// servingCertificate is the API server's, for 127.0.0.1.
func (ca *authority) servingCertificate() (tls.Certificate, error) {
	c, err := ca.sign(&x509.Certificate{
		Subject: pkix.Name{CommonName: "fixture-apiserver"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, time.Now().Add(365*24*time.Hour))
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(c.certPEM, c.keyPEM)
}

// clientCertificate authenticates user until notAfter.
func (ca *authority) clientCertificate(user string, notAfter time.Time) (issued, error) {
	return ca.sign(&x509.Certificate{Subject: pkix.Name{CommonName: user}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, notAfter)
}

func (ca *authority) sign(tmpl *x509.Certificate, notAfter time.Time) (issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return issued{}, err
	}
	if tmpl.SerialNumber, err = newSerial(); err != nil {
		return issued{}, err
	}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Minute), notAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return issued{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return issued{}, err
	}
	return issued{
		certPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		notAfter: notAfter, serial: fmt.Sprintf("%x", tmpl.SerialNumber),
	}, nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}
