package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
	kobetest "github.com/kunobi-ninja/kobe/testsuite/dbtest"
)

func testTokens(t *testing.T, s store.Store) {
	ctx := context.Background()
	tok, err := s.CreateToken(ctx, store.Token{ID: "tok-1", Name: "gha", Role: "ci", Principal: "github", Hash: "h1",
		ExpiresAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	_, err = s.CreateToken(ctx, store.Token{ID: "tok-2", Name: "dup", Role: "ci", Principal: "x", Hash: "h1"})
	assert.Error(t, err, "a hash is unique")
	got, err := s.GetTokenByHash(ctx, "h1")
	require.NoError(t, err)
	assert.Equal(t, "github", got.Principal)
	assert.Equal(t, tok.CreatedAt, got.CreatedAt)
	assert.True(t, got.RevokedAt.IsZero())
	_, err = s.GetTokenByHash(ctx, "nope")
	assert.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, s.TouchToken(ctx, "tok-1", time.Now()))
	require.NoError(t, s.RevokeToken(ctx, "tok-1"))
	got, _ = s.GetTokenByHash(ctx, "h1")
	assert.False(t, got.RevokedAt.IsZero())
	assert.False(t, got.LastUsedAt.IsZero())
	assert.ErrorIs(t, s.RevokeToken(ctx, "tok-missing"), store.ErrNotFound)
	list, err := s.ListTokens(ctx)
	require.NoError(t, err)
	assert.Len(t, list, 1)
}

func testAdmission(t *testing.T, s store.Store) {
	ctx := context.Background()
	admit := func(id, principal, alias, key, hash string) (store.Lease, bool, error) {
		return s.AdmitLease(ctx, store.AdmitRequest{Lease: store.Lease{ID: id, Pool: "p", Principal: principal, Role: "dev",
			Alias: alias, IdempotencyKey: key, RequestHash: hash, TTL: time.Hour, Metadata: map[string]string{"job": id}},
			MaxPerPrincipal: 2, MaxPerRole: 3})
	}
	l, replayed, err := admit("lease-a1", "ann", "web", "k1", "body1")
	require.NoError(t, err)
	assert.False(t, replayed)
	assert.Equal(t, api.LeasePending, l.Phase)
	// Same key, same body: the same lease. Same key, other body: a conflict.
	again, replayed, err := admit("lease-a1-retry", "ann", "web", "k1", "body1")
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, "lease-a1", again.ID)
	assert.Equal(t, map[string]string{"job": "lease-a1"}, again.Metadata)
	_, _, err = admit("lease-a1-other", "ann", "", "k1", "body2")
	assert.ErrorIs(t, err, store.ErrIdempotencyConflict)
	// The same key from another principal is another lease.
	_, replayed, err = admit("lease-b1", "bob", "", "k1", "body1")
	require.NoError(t, err)
	assert.False(t, replayed)
	// An active alias cannot be taken twice by its principal.
	_, _, err = admit("lease-a2", "ann", "web", "", "x")
	assert.ErrorIs(t, err, store.ErrAliasTaken)
	_, _, err = admit("lease-a2", "ann", "api", "", "x")
	require.NoError(t, err)
	// ann holds 2 of 2.
	_, _, err = admit("lease-a3", "ann", "", "", "x")
	var qe *store.QuotaError
	require.True(t, errors.As(err, &qe), "%v", err)
	assert.Equal(t, store.QuotaError{Scope: "principal", Name: "ann", Used: 2, Limit: 2}, *qe)
	// The role holds 3 of 3 (ann 2, bob 1).
	_, _, err = admit("lease-c1", "cid", "", "", "x")
	require.True(t, errors.As(err, &qe), "%v", err)
	assert.Equal(t, "role", qe.Scope)
	// A lease that ended frees its place (and its alias).
	a1, err := s.GetLease(ctx, "lease-a1")
	require.NoError(t, err)
	a1.Phase = "Released"
	require.NoError(t, s.UpsertLease(ctx, a1))
	kept, err := s.GetLease(ctx, "lease-a1")
	require.NoError(t, err)
	assert.Equal(t, "dev", kept.Role, "upserts keep the admission fields")
	assert.Equal(t, "body1", kept.RequestHash)
	_, _, err = admit("lease-a4", "ann", "web", "", "x")
	require.NoError(t, err)
}

// 200 concurrent admissions of one principal with a limit of 5 admit exactly 5.
func testAdmissionBurst(t *testing.T, s store.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted, refused := 0, 0
	var other []error
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := s.AdmitLease(ctx, store.AdmitRequest{Lease: store.Lease{ID: fmt.Sprintf("lease-burst-%03d", i),
				Pool: "p", Principal: "matrix", Role: "ci", TTL: time.Hour}, MaxPerPrincipal: 5})
			mu.Lock()
			defer mu.Unlock()
			var qe *store.QuotaError
			switch {
			case err == nil:
				admitted++
			case errors.As(err, &qe):
				refused++
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	require.Empty(t, other)
	assert.Equal(t, 5, admitted)
	assert.Equal(t, 195, refused)
	active, err := s.ListLeases(ctx, store.LeaseFilter{Principal: "matrix", Phases: api.ActiveLeasePhases})
	require.NoError(t, err)
	assert.Len(t, active, 5)
}

// A principal holding tokens in two roles: 100 admissions started at once, half under each
// role, with a per-principal limit of 3, admit exactly 3 (the limit is the principal's, whatever
// the role of the token that asks). One burst races only at the boundary, so it is run for ten
// principals: on a role-keyed lock about half of the bursts over-admit.
func testAdmissionBurstTwoRoles(t *testing.T, s store.Store) {
	const rounds, n, limit = 10, 100, 3
	over := 0
	for round := range rounds {
		principal := fmt.Sprintf("both-roles-%d", round)
		admitted, refused := admissionBurst(t, s, principal, n, limit)
		active, err := s.ListLeases(context.Background(), store.LeaseFilter{Principal: principal, Phases: api.ActiveLeasePhases})
		require.NoError(t, err)
		assert.Len(t, active, admitted, "%s: admitted leases are active", principal)
		assert.Equal(t, n, admitted+refused)
		over += max(0, admitted-limit)
		assert.Equal(t, limit, admitted, "%s: admitted of %d concurrent requests under two roles", principal, n)
	}
	assert.Zero(t, over, "leases admitted over the limit in %d bursts", rounds)
}

// admissionBurst asks for n leases of one principal at once, alternating two roles, and counts
// the admitted and the refused (any other error fails the test).
func admissionBurst(t *testing.T, s store.Store, principal string, n, limit int) (admitted, refused int) {
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := make(chan struct{})
	var other []error
	for i := range n {
		role := []string{"ci", "dev"}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start // a barrier: every request asks at the same moment
			_, _, err := s.AdmitLease(ctx, store.AdmitRequest{Lease: store.Lease{ID: fmt.Sprintf("lease-%s-%03d", principal, i),
				Pool: "p", Principal: principal, Role: role, TTL: time.Hour}, MaxPerPrincipal: limit})
			mu.Lock()
			defer mu.Unlock()
			var qe *store.QuotaError
			switch {
			case err == nil:
				admitted++
			case errors.As(err, &qe):
				refused++
			default:
				other = append(other, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Empty(t, other)
	return admitted, refused
}

// A change and its audit event are written together or not at all (InTx), on both engines:
// with the audit log refusing inserts (a trigger in the database) every mutation fails and
// leaves no row changed.
func testAuditInTx(t *testing.T, s store.Store, dsn string) {
	ctx := context.Background()
	ev := func(action, target string) store.Event {
		return store.Event{Actor: "ann", Action: action, Target: target, Result: "ok"}
	}
	audited := func(change func(tx store.Store) error, e store.Event) error {
		return s.InTx(ctx, func(tx store.Store) error {
			if err := change(tx); err != nil {
				return err
			}
			_, err := tx.AppendEvent(ctx, e)
			return err
		})
	}
	require.NoError(t, s.UpsertPool(ctx, store.Pool{Name: "tx-pool", Backend: "local"}))
	_, err := s.CreateToken(ctx, store.Token{ID: "tok-tx-old", Name: "old", Role: "ci", Principal: "ann", Hash: "h-tx-old"})
	require.NoError(t, err)
	before, err := s.ListEvents(ctx, store.EventFilter{})
	require.NoError(t, err)

	restore := kobetest.BreakAudit(t, dsn)
	err = audited(func(tx store.Store) error {
		_, err := tx.CreateToken(ctx, store.Token{ID: "tok-tx-new", Name: "new", Role: "ci", Principal: "ann", Hash: "h-tx-new"})
		return err
	}, ev("token.create", "tok-tx-new"))
	assert.ErrorContains(t, err, kobetest.AuditDownMessage)
	err = audited(func(tx store.Store) error { return tx.RevokeToken(ctx, "tok-tx-old") }, ev("token.revoke", "tok-tx-old"))
	assert.ErrorContains(t, err, kobetest.AuditDownMessage)
	err = audited(func(tx store.Store) error {
		_, _, err := tx.AdmitLease(ctx, store.AdmitRequest{Lease: store.Lease{ID: "lease-tx", Pool: "tx-pool", Principal: "ann", Role: "ci"}})
		return err
	}, ev("lease.create", "lease-tx"))
	assert.ErrorContains(t, err, kobetest.AuditDownMessage)
	err = audited(func(tx store.Store) error { return tx.DeletePool(ctx, "tx-pool") }, ev("pool.delete", "tx-pool"))
	assert.ErrorContains(t, err, kobetest.AuditDownMessage)
	restore()

	_, err = s.GetTokenByHash(ctx, "h-tx-new")
	assert.ErrorIs(t, err, store.ErrNotFound, "no token without its token.create event")
	old, err := s.GetTokenByHash(ctx, "h-tx-old")
	require.NoError(t, err)
	assert.True(t, old.RevokedAt.IsZero(), "no revocation without its token.revoke event")
	_, err = s.GetLease(ctx, "lease-tx")
	assert.ErrorIs(t, err, store.ErrNotFound, "no admission without its lease.create event")
	_, err = s.GetPool(ctx, "tx-pool")
	assert.NoError(t, err, "no pool deletion without its pool.delete event")
	after, err := s.ListEvents(ctx, store.EventFilter{})
	require.NoError(t, err)
	assert.Len(t, after, len(before))

	// With the log back, the same calls commit both. A nested InTx joins its transaction.
	require.NoError(t, audited(func(tx store.Store) error {
		return tx.InTx(ctx, func(inner store.Store) error { return inner.RevokeToken(ctx, "tok-tx-old") })
	}, ev("token.revoke", "tok-tx-old")))
	old, _ = s.GetTokenByHash(ctx, "h-tx-old")
	assert.False(t, old.RevokedAt.IsZero())
	revokes, err := s.ListEvents(ctx, store.EventFilter{Action: "token.revoke", Target: "tok-tx-old"})
	require.NoError(t, err)
	assert.Len(t, revokes, 1)

	// A keyed event is written once, however many writers race to append it.
	var wg sync.WaitGroup
	ids := make([]int64, 20)
	errs := make([]error, 20)
	start := make(chan struct{})
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			e := ev("lease.bound", "lease-keyed")
			e.Key = "lease.bound:lease-keyed"
			got, err := s.AppendEvent(ctx, e)
			ids[i], errs[i] = got.ID, err
		}()
	}
	close(start)
	wg.Wait()
	for i := range ids {
		require.NoError(t, errs[i])
		assert.Equal(t, ids[0], ids[i], "every writer gets the one event")
	}
	keyed, err := s.ListEvents(ctx, store.EventFilter{Target: "lease-keyed"})
	require.NoError(t, err)
	require.Len(t, keyed, 1)
	assert.Equal(t, "lease.bound:lease-keyed", keyed[0].Key)
}
