package leasecred

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/kubeconfig"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// Mint returns the kubeconfig of lease leaseID, valid until notAfter (the lease's bind time
// plus its maxTtl: no extension can make the lease outlive it). Its token lives as long as the
// instance's holder: the lease's end deletes the holder (RevokeCredentials), and the instance,
// which has no other holder in its life, is torn down after it.
func Mint(p backends.PreparedCredential, leaseID string, notAfter time.Time) (backends.Credential, error) {
	if leaseID == "" {
		return backends.Credential{}, errors.New("lease credential needs a lease id")
	}
	if !time.Now().Before(notAfter) {
		return backends.Credential{}, fmt.Errorf("lease %s: its credential would already have expired (%s)", leaseID, notAfter.Format(time.RFC3339))
	}
	if p.Token == "" {
		return backends.Credential{}, fmt.Errorf("prepared credential of %s: no token", p.Cluster)
	}
	expires := notAfter
	if !p.ExpiresAt.IsZero() && p.ExpiresAt.Before(expires) {
		// An API server that caps token lifetimes gave less than asked: the credential says
		// when it really ends.
		expires = p.ExpiresAt
	}
	kc, err := kubeconfig.ForToken(p.Cluster, p.Server, p.ServerCAPEM, p.Token, p.User)
	if err != nil {
		return backends.Credential{}, err
	}
	return backends.Credential{Kubeconfig: kc, User: p.User, ExpiresAt: expires, ID: p.TokenID}, nil
}

// preparedAAD binds a sealed prepared credential to its instance: a row copied to another
// instance's id does not open. The prefix keeps the name the rows had when they were called
// signers: rows sealed then must still open.
func preparedAAD(instanceID string) []byte { return []byte("lease-signer:" + instanceID) }

// SealPrepared seals an instance's prepared credential for the store.
func SealPrepared(box *secretbox.Box, instanceID string, s backends.PreparedCredential) ([]byte, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return box.Seal(data, preparedAAD(instanceID))
}

// OpenPrepared opens a prepared credential sealed by SealPrepared.
func OpenPrepared(box *secretbox.Box, instanceID string, sealed []byte) (backends.PreparedCredential, error) {
	data, err := box.Open(sealed, preparedAAD(instanceID))
	if err != nil {
		return backends.PreparedCredential{}, fmt.Errorf("opening the prepared lease credential of %s (is the secret key the workers' key?): %w", instanceID, err)
	}
	var s backends.PreparedCredential
	if err := json.Unmarshal(data, &s); err != nil {
		return backends.PreparedCredential{}, fmt.Errorf("prepared lease credential of %s: %w", instanceID, err)
	}
	return s, nil
}

// Ensure returns lease leaseID's kubeconfig: the one stored, or one minted now from the prepared
// credential of its instance and stored, valid until notAfter. Whoever stores first wins (the API binding
// the lease, or the lease's workflow making sure the credential exists after a crash of the
// API): both return the stored one, so the holder and a later GET see the same kubeconfig.
func Ensure(ctx context.Context, st store.Store, box *secretbox.Box, prepared backends.PreparedCredential, leaseID string, notAfter time.Time) ([]byte, error) {
	if kc, err := Kubeconfig(ctx, st, box, leaseID); !errors.Is(err, store.ErrNotFound) {
		return kc, err
	}
	cred, err := Mint(prepared, leaseID, notAfter)
	if err != nil {
		return nil, err
	}
	return Add(ctx, st, box, leaseID, cred)
}

// Prepared reads and opens an instance's prepared credential from the store
// (store.ErrNotFound: it has none).
func Prepared(ctx context.Context, st store.Store, box *secretbox.Box, instanceID string) (backends.PreparedCredential, error) {
	sealed, err := st.GetPreparedCredential(ctx, instanceID)
	if err != nil {
		return backends.PreparedCredential{}, err
	}
	return OpenPrepared(box, instanceID, sealed)
}

// Reseal opens a sealed value of the store with box, whichever of its keys sealed it, and seals
// it again with box's active key, bound to the same row (`kobe secrets rotate`).
func Reseal(box *secretbox.Box, v store.SealedValue) ([]byte, error) {
	var aad []byte
	switch v.Kind {
	case store.SealedLeaseCredential:
		aad = kubeconfigAAD(v.ID)
	case store.SealedPreparedCredential:
		aad = preparedAAD(v.ID)
	default:
		return nil, fmt.Errorf("a sealed value of kind %q", v.Kind)
	}
	plain, err := box.Open(v.Sealed, aad)
	if err != nil {
		return nil, fmt.Errorf("%s of %s: %w", v.Kind, v.ID, err)
	}
	return box.Seal(plain, aad)
}
