package local

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/kubeconfig"
	"github.com/kunobi-ninja/kobe/internal/pki"
)

// newClusterPKI issues a new instance's certificates: a CA of caValidity, serving and admin
// certificates of validity (0: defaultCertValidity).
func newClusterPKI(id string, validity time.Duration) (*pki.ClusterPKI, error) {
	return pki.NewClusterPKIWithCA(id, nil, nil, caValidity, leafValidity(validity))
}

func leafValidity(v time.Duration) time.Duration {
	if v <= 0 {
		return defaultCertValidity
	}
	return v
}

// CertificateExpiry implements backends.CertManager: read from the instance's certificate files.
func (b *Backend) CertificateExpiry(ctx context.Context, id string) (backends.CertificateExpiry, error) {
	in, ok := b.get(id)
	if !ok {
		return backends.CertificateExpiry{}, backends.ErrNotFound
	}
	var e backends.CertificateExpiry
	for f, out := range map[string]*time.Time{"ca.crt": &e.CA, "apiserver.crt": &e.Serving, "admin.crt": &e.Client} {
		data, err := os.ReadFile(in.path("pki", f))
		if err != nil {
			return backends.CertificateExpiry{}, err
		}
		c, err := pki.ParseCert(data)
		if err != nil {
			return backends.CertificateExpiry{}, fmt.Errorf("%s: %w", f, err)
		}
		*out = c.NotAfter
	}
	return e, nil
}

// CertificatesExpireAt implements backends.CertManager: the earliest expiry of the CA, serving
// and admin certificates.
func (b *Backend) CertificatesExpireAt(ctx context.Context, id string) (time.Time, error) {
	e, err := b.CertificateExpiry(ctx, id)
	return e.Earliest(), err
}

// RotateCertificates implements backends.CertManager: new serving and admin certificates from
// the same CA (so issued kubeconfigs stay valid) with the instance's validity, then the API
// server restarts to load them. A sleeping instance only gets the files: Resume starts it with
// them.
func (b *Backend) RotateCertificates(ctx context.Context, id string) error {
	unlock := b.locks.Lock(id)
	defer unlock()
	in, ok := b.get(id)
	if !ok {
		return backends.ErrNotFound
	}
	caPEM, err := os.ReadFile(in.path("pki", "ca.crt"))
	if err != nil {
		return err
	}
	caKey, err := os.ReadFile(in.path("pki", "ca.key"))
	if err != nil {
		return err
	}
	ca, err := pki.LoadCA(caPEM, caKey)
	if err != nil {
		return err
	}
	in.mu.Lock()
	validity, sleeping := leafValidity(in.rec.CertValidity), in.rec.Sleeping
	in.mu.Unlock()
	serving, err := ca.IssueAPIServer(nil, nil, validity)
	if err != nil {
		return err
	}
	admin, err := ca.IssueClient(pki.AdminUser, []string{pki.AdminGroup}, validity)
	if err != nil {
		return err
	}
	adminKC, err := kubeconfig.ForClientCert(id, in.endpoint(), caPEM, admin.CertPEM, admin.KeyPEM, pki.AdminUser)
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		"pki/apiserver.crt": serving.CertPEM, "pki/apiserver.key": serving.KeyPEM,
		"pki/admin.crt": admin.CertPEM, "pki/admin.key": admin.KeyPEM,
		"kubeconfigs/admin.kubeconfig": adminKC,
	} {
		if err := os.WriteFile(in.path(name), data, 0o600); err != nil {
			return err
		}
	}
	if sleeping {
		return nil
	}
	if err := in.stopAll(10 * time.Second); err != nil {
		return err
	}
	in.mu.Lock()
	in.stopping = false
	in.client = nil
	in.mu.Unlock()
	return in.start(b)
}
