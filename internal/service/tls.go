package service

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// certificateFiles serves the API's certificate from its two files and loads them again when
// either changes, so that a renewed certificate (cert-manager, a rotated Secret) is served
// from the next handshake on, without a restart. Each handshake costs two stat calls.
type certificateFiles struct {
	certFile, keyFile string
	logger            *zap.Logger

	mu   sync.Mutex
	seen filesVersion // of the files last loaded or tried
	cert *tls.Certificate
}

// filesVersion tells one content of the files from the next: a rename over a file (a mounted
// Secret's update) changes its inode, a rewrite in place its time or size.
type filesVersion struct {
	cert, key fileVersion
}

type fileVersion struct {
	inode   uint64
	size    int64
	modTime time.Time
}

func versionOf(path string) (fileVersion, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileVersion{}, err
	}
	v := fileVersion{size: fi.Size(), modTime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		v.inode = st.Ino
	}
	return v, nil
}

// newCertificateFiles loads the pair once: a pair that does not load stops the start with an
// error naming the flags.
func newCertificateFiles(certFile, keyFile string, logger *zap.Logger) (*certificateFiles, error) {
	c := &certificateFiles{certFile: certFile, keyFile: keyFile, logger: logger}
	v, err := c.version()
	if err != nil {
		return nil, err
	}
	cert, err := c.load()
	if err != nil {
		return nil, err
	}
	c.seen, c.cert = v, cert
	return c, nil
}

func (c *certificateFiles) version() (filesVersion, error) {
	cv, err := versionOf(c.certFile)
	if err != nil {
		return filesVersion{}, fmt.Errorf("--tls-cert-file: %w", err)
	}
	kv, err := versionOf(c.keyFile)
	if err != nil {
		return filesVersion{}, fmt.Errorf("--tls-key-file: %w", err)
	}
	return filesVersion{cert: cv, key: kv}, nil
}

func (c *certificateFiles) load() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file %s and --tls-key-file %s: %w", c.certFile, c.keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("--tls-cert-file %s: %w", c.certFile, err)
		}
	}
	return &cert, nil
}

// GetCertificate is the listener's tls.Config.GetCertificate. Files that changed but do not
// load (a certificate written before its key) keep the previous certificate in service; they
// are tried again once they change again.
func (c *certificateFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, err := c.version()
	if err != nil || v == c.seen {
		return c.cert, nil
	}
	c.seen = v
	cert, err := c.load()
	if err != nil {
		c.logger.Warn("the API's certificate files changed but do not load; serving the previous certificate", zap.Error(err))
		return c.cert, nil
	}
	c.cert = cert
	c.logger.Info("the API serves a new certificate", zap.String("serial", cert.Leaf.SerialNumber.Text(16)),
		zap.Time("notAfter", cert.Leaf.NotAfter), zap.Strings("dnsNames", cert.Leaf.DNSNames))
	return c.cert, nil
}
