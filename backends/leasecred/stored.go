package leasecred

import (
	"context"
	"fmt"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// A lease's kubeconfig is kept sealed in the store (lease_credentials), bound to the lease's
// id: a row copied to another lease does not open. The workflow history only ever holds the
// lease's id, never the kubeconfig.

// kubeconfigAAD binds a sealed kubeconfig to its lease.
func kubeconfigAAD(leaseID string) []byte { return []byte(leaseID) }

// Put seals cred's kubeconfig and stores it as lease leaseID's, replacing the one stored (an
// extension's new certificate). store.ErrLeaseEnded: the lease has ended, nothing is stored.
func Put(ctx context.Context, st store.Store, box *secretbox.Box, leaseID string, cred backends.Credential) error {
	sealed, err := box.Seal(cred.Kubeconfig, kubeconfigAAD(leaseID))
	if err != nil {
		return err
	}
	return st.PutLeaseCredential(ctx, store.LeaseCredential{LeaseID: leaseID, Sealed: sealed, CredentialID: cred.ID, ExpiresAt: cred.ExpiresAt})
}

// Add stores cred's kubeconfig as lease leaseID's unless the lease has one already, and
// returns the kubeconfig stored: of two writers racing to store a lease's first credential,
// both hand out the same. st may be a transaction. store.ErrLeaseEnded: the lease has ended.
func Add(ctx context.Context, st store.Store, box *secretbox.Box, leaseID string, cred backends.Credential) ([]byte, error) {
	sealed, err := box.Seal(cred.Kubeconfig, kubeconfigAAD(leaseID))
	if err != nil {
		return nil, err
	}
	stored, err := st.AddLeaseCredential(ctx, store.LeaseCredential{LeaseID: leaseID, Sealed: sealed, CredentialID: cred.ID, ExpiresAt: cred.ExpiresAt})
	if err != nil {
		return nil, err
	}
	return open(box, leaseID, stored.Sealed)
}

// Kubeconfig reads and opens lease leaseID's kubeconfig (store.ErrNotFound: it has none).
func Kubeconfig(ctx context.Context, st store.Store, box *secretbox.Box, leaseID string) ([]byte, error) {
	c, err := st.GetLeaseCredential(ctx, leaseID)
	if err != nil {
		return nil, fmt.Errorf("lease credential: %w", err)
	}
	return open(box, leaseID, c.Sealed)
}

func open(box *secretbox.Box, leaseID string, sealed []byte) ([]byte, error) {
	kc, err := box.Open(sealed, kubeconfigAAD(leaseID))
	if err != nil {
		return nil, fmt.Errorf("opening the credential of lease %s (is the secret key the workers' key?): %w", leaseID, err)
	}
	return kc, nil
}
