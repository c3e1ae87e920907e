package readiness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kunobi-ninja/kobe/poolspec"
)

// x509Valid is the X509Valid gate: the CA and client certificate of the admin kubeconfig, and
// the serving certificate the API server presents, each valid for at least minRemaining more.
func (c *checker) x509Valid(ctx context.Context, minRemaining poolspec.Duration) error {
	need, err := poolspec.ParseDays("minRemaining", minRemaining)
	if err != nil {
		return fmt.Errorf("%v: %w", err, ErrUnsupported)
	}
	certs, err := presentedCertificates(ctx, c.cfg)
	if err != nil {
		return err
	}
	return RemainingAtLeast(certs, time.Now(), need)
}

// Certificate is one certificate a member relies on, by what it is for.
type Certificate struct {
	Kind     string // "ca", "client", "serving"
	Subject  string
	NotAfter time.Time
}

// RemainingAtLeast refuses the first certificate (in the order given) that expires within need
// of now; the error wraps ErrNeverPasses.
func RemainingAtLeast(certs []Certificate, now time.Time, need time.Duration) error {
	for _, c := range certs {
		if left := c.NotAfter.Sub(now); left < need {
			return fmt.Errorf("the %s certificate %q expires at %s, in %s: less than the %s required: %w",
				c.Kind, c.Subject, c.NotAfter.UTC().Format(time.RFC3339), left.Truncate(time.Second), need, ErrNeverPasses)
		}
	}
	return nil
}

// presentedCertificates reads the CA and client certificate of cfg and the serving certificate
// the API server at cfg.Host presents.
func presentedCertificates(ctx context.Context, cfg *rest.Config) ([]Certificate, error) {
	var out []Certificate
	for _, f := range []struct {
		kind string
		data []byte
	}{{"ca", cfg.TLSClientConfig.CAData}, {"client", cfg.TLSClientConfig.CertData}} {
		if len(f.data) == 0 {
			continue // a token kubeconfig has no client certificate; a system CA has no data
		}
		block, _ := pem.Decode(f.data)
		if block == nil {
			return nil, fmt.Errorf("the kubeconfig's %s certificate is not PEM", f.kind)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("the kubeconfig's %s certificate: %w", f.kind, err)
		}
		out = append(out, Certificate{Kind: f.kind, Subject: cert.Subject.CommonName, NotAfter: cert.NotAfter})
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("API server address %q: %w", cfg.Host, err)
	}
	if u.Scheme != "https" {
		return out, nil // nothing served over TLS to judge
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	d := tls.Dialer{Config: tlsCfg}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	defer conn.Close()
	chain := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(chain) == 0 {
		return nil, fmt.Errorf("%s presented no certificate", addr)
	}
	return append(out, Certificate{Kind: "serving", Subject: chain[0].Subject.CommonName, NotAfter: chain[0].NotAfter}), nil
}
