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

// Sleep implements backends.Sleeper: every process stops, the datastore stays on disk.
func (b *Backend) Sleep(ctx context.Context, id string) error {
	unlock := b.lock(id)
	defer unlock()
	in, ok := b.get(id)
	if !ok {
		return backends.ErrNotFound
	}
	if err := in.stopAll(10 * time.Second); err != nil {
		return err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.stopping = false
	in.rec.Sleeping = true
	return in.save()
}

// Resume implements backends.Sleeper: the processes start again on the same ports and data.
// The caller waits for readiness with WaitReady.
func (b *Backend) Resume(ctx context.Context, id string) error {
	unlock := b.lock(id)
	defer unlock()
	in, ok := b.get(id)
	if !ok {
		return backends.ErrNotFound
	}
	in.mu.Lock()
	if len(in.procs) > 0 && !in.rec.Sleeping {
		in.mu.Unlock()
		return nil // already awake
	}
	in.rec.Sleeping = false
	in.failure = ""
	err := in.save()
	in.mu.Unlock()
	if err != nil {
		return err
	}
	for _, port := range []int{in.rec.APIPort, in.rec.KinePort} {
		if portOpen(port) {
			return fmt.Errorf("instance %s cannot resume: port %d is taken by another process", id, port)
		}
	}
	return in.start(b)
}

// CertificatesExpireAt implements backends.CertManager: the earliest expiry of the CA, serving
// and admin certificates.
func (b *Backend) CertificatesExpireAt(ctx context.Context, id string) (time.Time, error) {
	in, ok := b.get(id)
	if !ok {
		return time.Time{}, backends.ErrNotFound
	}
	var earliest time.Time
	for _, f := range []string{"ca.crt", "apiserver.crt", "admin.crt"} {
		data, err := os.ReadFile(in.path("pki", f))
		if err != nil {
			return time.Time{}, err
		}
		c, err := pki.ParseCert(data)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s: %w", f, err)
		}
		if earliest.IsZero() || c.NotAfter.Before(earliest) {
			earliest = c.NotAfter
		}
	}
	return earliest, nil
}

// RotateCertificates implements backends.CertManager: new serving and admin certificates from
// the same CA (so issued kubeconfigs stay valid), then the API server restarts to load them.
func (b *Backend) RotateCertificates(ctx context.Context, id string) error {
	unlock := b.lock(id)
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
	serving, err := ca.IssueAPIServer(nil, nil, certValidity)
	if err != nil {
		return err
	}
	admin, err := ca.IssueClient(pki.AdminUser, []string{pki.AdminGroup}, certValidity)
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
	if err := in.stopAll(10 * time.Second); err != nil {
		return err
	}
	in.mu.Lock()
	in.stopping = false
	in.client = nil
	in.mu.Unlock()
	return in.start(b)
}
