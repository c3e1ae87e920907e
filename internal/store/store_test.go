package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// driverCase opens a fresh store and can open a raw SQL connection to the same database,
// which the tests use to prove that the database itself enforces what the Go code promises.
type driverCase struct {
	name   string
	dsn    func(t *testing.T) string
	rawSQL func(t *testing.T, dsn string) *sql.DB
}

func drivers() []driverCase {
	return []driverCase{
		{
			name: "sqlite",
			dsn: func(t *testing.T) string {
				return "sqlite://" + filepath.Join(t.TempDir(), "kobe.db")
			},
			rawSQL: func(t *testing.T, dsn string) *sql.DB {
				db, err := sql.Open("sqlite", "file:"+dsn[len("sqlite://"):]+"?_pragma=busy_timeout(5000)")
				require.NoError(t, err)
				t.Cleanup(func() { db.Close() })
				return db
			},
		},
		{
			name: "postgres",
			dsn:  func(t *testing.T) string { return testsuite.PostgresDSN(t) },
			rawSQL: func(t *testing.T, dsn string) *sql.DB {
				db, err := sql.Open("pgx", dsn)
				require.NoError(t, err)
				t.Cleanup(func() { db.Close() })
				return db
			},
		},
	}
}

// TestStore runs the same suite against every driver.
func TestStore(t *testing.T) {
	for _, d := range drivers() {
		t.Run(d.name, func(t *testing.T) {
			dsn := d.dsn(t)
			ctx := context.Background()
			s, err := store.Open(ctx, dsn)
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			require.Equal(t, d.name, s.Driver())

			t.Run("pools", func(t *testing.T) { testPools(t, s) })
			t.Run("instances", func(t *testing.T) { testInstances(t, s) })
			t.Run("leases", func(t *testing.T) { testLeases(t, s) })
			t.Run("an ended lease stays ended", func(t *testing.T) { testLeaseEnded(t, s) })
			t.Run("a bind racing the lease's end", func(t *testing.T) { testBindRacingEnd(t, s) })
			t.Run("failing a lease only while it is Pending", func(t *testing.T) { testFailPendingLease(t, s) })
			t.Run("quotas", func(t *testing.T) { testQuotas(t, s) })
			t.Run("events", func(t *testing.T) { testEvents(t, s, d.rawSQL(t, dsn)) })
			t.Run("probes", func(t *testing.T) { testProbes(t, s) })
			t.Run("lease credentials", func(t *testing.T) { testLeaseCredentials(t, s) })
			t.Run("prepared credentials and first credentials", func(t *testing.T) { testPreparedCredentials(t, s) })
			t.Run("instance certificates", func(t *testing.T) { testInstanceCertificates(t, s) })
			t.Run("tokens", func(t *testing.T) { testTokens(t, s) })
			t.Run("sessions", func(t *testing.T) { testSessions(t, s) })
			t.Run("admission", func(t *testing.T) { testAdmission(t, s) })
			t.Run("admission burst", func(t *testing.T) { testAdmissionBurst(t, s) })
			t.Run("admission burst two roles", func(t *testing.T) { testAdmissionBurstTwoRoles(t, s) })
			t.Run("audit in the same transaction", func(t *testing.T) { testAuditInTx(t, s, dsn) })
			t.Run("concurrent writers", func(t *testing.T) { testConcurrent(t, s) })
			t.Run("reopen keeps data and schema", func(t *testing.T) { testReopen(t, s, dsn) })
		})
	}
}

func testPools(t *testing.T, s store.Store) {
	ctx := context.Background()
	p := store.Pool{Name: "dev", Backend: "local", Spec: json.RawMessage(`{"size":2}`)}
	require.NoError(t, s.UpsertPool(ctx, p))
	got, err := s.GetPool(ctx, "dev")
	require.NoError(t, err)
	first := got.Generation
	assert.Positive(t, first)
	require.NoError(t, s.UpsertPool(ctx, p), "upsert is idempotent: one row")

	got, err = s.GetPool(ctx, "dev")
	require.NoError(t, err)
	assert.Equal(t, first+1, got.Generation, "every apply counts")
	assert.Equal(t, "local", got.Backend)
	assert.JSONEq(t, `{"size":2}`, string(got.Spec))
	assert.False(t, got.CreatedAt.IsZero())
	created := got.CreatedAt

	p.Spec, p.Generation = json.RawMessage(`{"size":3}`), 99
	require.NoError(t, s.UpsertPool(ctx, p))
	got, err = s.GetPool(ctx, "dev")
	require.NoError(t, err)
	assert.Equal(t, first+2, got.Generation, "the store counts; the caller's value is ignored")
	assert.JSONEq(t, `{"size":3}`, string(got.Spec))
	assert.True(t, got.CreatedAt.Equal(created), "an update keeps the creation time")

	require.NoError(t, s.UpsertPool(ctx, store.Pool{Name: "ci", Backend: "k3s"}))
	pools, err := s.ListPools(ctx)
	require.NoError(t, err)
	require.Len(t, pools, 2)
	assert.Equal(t, "ci", pools[0].Name, "sorted by name")

	// A delete that saw an older generation does not remove the row applied again since.
	deleted, err := s.DeletePoolGeneration(ctx, "dev", first+1)
	require.NoError(t, err)
	assert.False(t, deleted, "applied again since the delete: kept")
	_, err = s.GetPool(ctx, "dev")
	require.NoError(t, err)
	deleted, err = s.DeletePoolGeneration(ctx, "dev", first+2)
	require.NoError(t, err)
	assert.True(t, deleted)
	deleted, err = s.DeletePoolGeneration(ctx, "dev", first+2)
	require.NoError(t, err)
	assert.False(t, deleted, "no row: nothing deleted")
	// Created again after the delete: newer than anything the deleted row was, so a late
	// retry of the old delete does not remove it.
	time.Sleep(time.Millisecond)
	require.NoError(t, s.UpsertPool(ctx, p))
	deleted, err = s.DeletePoolGeneration(ctx, "dev", first+2)
	require.NoError(t, err)
	assert.False(t, deleted, "a pool created again is not the deleted one")

	require.NoError(t, s.DeletePool(ctx, "ci"))
	assert.ErrorIs(t, s.DeletePool(ctx, "ci"), store.ErrNotFound)
	_, err = s.GetPool(ctx, "ci")
	assert.ErrorIs(t, err, store.ErrNotFound)
	assert.Error(t, s.UpsertPool(ctx, store.Pool{}), "empty name is refused")
}

func testInstances(t *testing.T, s store.Store) {
	ctx := context.Background()
	for i, phase := range []api.InstancePhase{"Creating", "Ready", "Ready"} {
		require.NoError(t, s.UpsertInstance(ctx, store.Instance{
			ID: fmt.Sprintf("instance-%d", i), Pool: "dev", Backend: "local", Host: "h1", Phase: phase,
			Data: json.RawMessage(`{"port":6443}`),
		}))
	}
	require.NoError(t, s.UpsertInstance(ctx, store.Instance{ID: "other", Pool: "ci", Backend: "k3s", Phase: "Ready"}))

	ready, err := s.ListInstances(ctx, store.InstanceFilter{Pool: "dev", Phase: "Ready"})
	require.NoError(t, err)
	assert.Len(t, ready, 2)
	all, err := s.ListInstances(ctx, store.InstanceFilter{})
	require.NoError(t, err)
	assert.Len(t, all, 4)

	in := ready[0]
	in.Phase, in.LeaseID, in.Endpoint = "Leased", "lease-1", "https://127.0.0.1:6443"
	require.NoError(t, s.UpsertInstance(ctx, in))
	got, err := s.GetInstance(ctx, in.ID)
	require.NoError(t, err)
	assert.Equal(t, api.InstancePhase("Leased"), got.Phase)
	assert.Equal(t, "lease-1", got.LeaseID)
	assert.JSONEq(t, `{"port":6443}`, string(got.Data))

	require.NoError(t, s.DeleteInstance(ctx, in.ID))
	_, err = s.GetInstance(ctx, in.ID)
	assert.ErrorIs(t, err, store.ErrNotFound)
	assert.ErrorIs(t, s.DeleteInstance(ctx, in.ID), store.ErrNotFound)
}

func testLeases(t *testing.T, s store.Store) {
	ctx := context.Background()
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	l := store.Lease{
		ID: "lease-a", Pool: "dev", Principal: "alice", Phase: "Pending", TTL: 90 * time.Minute,
		Alias: "mine", IdempotencyKey: "k1", Metadata: map[string]string{"job": "e2e"},
	}
	require.NoError(t, s.UpsertLease(ctx, l))
	got, err := s.GetLease(ctx, "lease-a")
	require.NoError(t, err)
	assert.True(t, got.ExpiresAt.IsZero(), "a pending lease has no expiry")
	assert.Equal(t, 90*time.Minute, got.TTL)
	assert.Equal(t, map[string]string{"job": "e2e"}, got.Metadata)

	l.Phase, l.InstanceID, l.ExpiresAt = "Bound", "instance-1", exp
	require.NoError(t, s.UpsertLease(ctx, l))
	got, err = s.GetLease(ctx, "lease-a")
	require.NoError(t, err)
	assert.Equal(t, api.LeaseBound, got.Phase)
	assert.True(t, got.ExpiresAt.Equal(exp), "expiry round-trips: %v vs %v", got.ExpiresAt, exp)

	require.NoError(t, s.UpsertLease(ctx, store.Lease{ID: "lease-b", Pool: "dev", Principal: "bob", Phase: "Released", Reason: "released"}))
	require.NoError(t, s.UpsertLease(ctx, store.Lease{ID: "lease-c", Pool: "ci", Principal: "alice", Phase: "Pending"}))

	active, err := s.ListLeases(ctx, store.LeaseFilter{Principal: "alice", Phases: api.ActiveLeasePhases})
	require.NoError(t, err)
	assert.Len(t, active, 2)
	byAlias, err := s.ListLeases(ctx, store.LeaseFilter{Alias: "mine"})
	require.NoError(t, err)
	require.Len(t, byAlias, 1)
	assert.Equal(t, "lease-a", byAlias[0].ID)
	devs, err := s.ListLeases(ctx, store.LeaseFilter{Pool: "dev"})
	require.NoError(t, err)
	assert.Len(t, devs, 2)

	_, err = s.GetLease(ctx, "nope")
	assert.ErrorIs(t, err, store.ErrNotFound)
}

// A lease that has ended (Released, Expired, Failed) does not come back: its row refuses
// another phase, and no credential is stored for it; writing the same end again is a no-op
// retry, not an error.
func testLeaseEnded(t *testing.T, s store.Store) {
	ctx := context.Background()
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	for _, end := range []api.LeasePhase{api.LeaseReleased, api.LeaseExpired, api.LeaseFailed} {
		id := "lease-end-" + strings.ToLower(string(end))
		l := store.Lease{ID: id, Pool: "dev", Principal: "alice", Phase: api.LeasePending, TTL: time.Hour}
		require.NoError(t, s.UpsertLease(ctx, l))
		l.Phase, l.InstanceID, l.ExpiresAt = api.LeaseBound, "inst-1", exp
		require.NoError(t, s.UpsertLease(ctx, l))
		l.Phase, l.Reason = end, "ended"
		require.NoError(t, s.UpsertLease(ctx, l))
		require.NoError(t, s.UpsertLease(ctx, l), "recording the same end again (a retry) is fine")

		for _, next := range []api.LeasePhase{api.LeasePending, api.LeaseBound, api.LeaseReleased, api.LeaseExpired, api.LeaseFailed} {
			if next == end {
				continue
			}
			back := l
			back.Phase, back.Reason = next, ""
			err := s.UpsertLease(ctx, back)
			require.ErrorIs(t, err, store.ErrLeaseEnded, "%s -> %s", end, next)
		}
		got, err := s.GetLease(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, end, got.Phase, "the row stays %s", end)
		assert.Equal(t, api.ReasonCode("ended"), got.Reason)

		// The credential was revoked when the lease ended; a late writer does not store one again.
		_, err = s.AddLeaseCredential(ctx, store.LeaseCredential{LeaseID: id, Sealed: []byte("late"), CredentialID: "9", ExpiresAt: exp})
		require.ErrorIs(t, err, store.ErrLeaseEnded)
		err = s.PutLeaseCredential(ctx, store.LeaseCredential{LeaseID: id, Sealed: []byte("late"), CredentialID: "9", ExpiresAt: exp})
		require.ErrorIs(t, err, store.ErrLeaseEnded)
		_, err = s.GetLeaseCredential(ctx, id)
		require.ErrorIs(t, err, store.ErrNotFound, "no credential for an ended lease")
	}
	// A live lease (Pending: the API binds it and stores its credential with its Bound row)
	// takes a credential.
	require.NoError(t, s.UpsertLease(ctx, store.Lease{ID: "lease-live", Pool: "dev", Principal: "alice", Phase: api.LeasePending}))
	_, err := s.AddLeaseCredential(ctx, store.LeaseCredential{LeaseID: "lease-live", Sealed: []byte("x"), ExpiresAt: exp})
	require.NoError(t, err)
}

// The race of a warm bind (the API's transaction: the credential, then the Bound row) with
// the lease ending (its workflow records Expired, then revokes the credential): the end's
// write is in flight, not committed, when the bind's transaction starts. Whatever the order
// the engine lets them run in, the row ends Expired without a credential and the bind is told
// ErrLeaseEnded.
func testBindRacingEnd(t *testing.T, s store.Store) {
	ctx := context.Background()
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	l := store.Lease{ID: "lease-race", Pool: "dev", Principal: "alice", Phase: api.LeasePending, TTL: time.Second}
	require.NoError(t, s.UpsertLease(ctx, l))

	ended := make(chan struct{})
	release := make(chan struct{})
	endDone := make(chan error, 1)
	go func() {
		endDone <- s.InTx(ctx, func(tx store.Store) error {
			e := l
			e.Phase, e.Reason = api.LeaseExpired, "expired"
			if err := tx.UpsertLease(ctx, e); err != nil {
				return err
			}
			close(ended)
			<-release // hold the uncommitted end while the bind starts
			return nil
		})
	}()
	<-ended
	bindDone := make(chan error, 1)
	go func() {
		bindDone <- s.InTx(ctx, func(tx store.Store) error {
			if _, err := tx.AddLeaseCredential(ctx, store.LeaseCredential{LeaseID: l.ID, Sealed: []byte("api"), CredentialID: "1", ExpiresAt: exp}); err != nil {
				return err
			}
			b := l
			b.Phase, b.InstanceID, b.ExpiresAt = api.LeaseBound, "inst-1", exp
			return tx.UpsertLease(ctx, b)
		})
	}()
	close(release)
	require.NoError(t, <-endDone)
	require.NoError(t, s.DeleteLeaseCredential(ctx, l.ID), "the workflow revokes after recording the end")
	err := <-bindDone
	require.ErrorIs(t, err, store.ErrLeaseEnded)

	got, err := s.GetLease(ctx, l.ID)
	require.NoError(t, err)
	assert.Equal(t, api.LeaseExpired, got.Phase, "the ended lease is not Bound again")
	_, err = s.GetLeaseCredential(ctx, l.ID)
	assert.ErrorIs(t, err, store.ErrNotFound, "no credential for the ended lease")
	active, err := s.ListLeases(ctx, store.LeaseFilter{Principal: "alice", Phases: api.ActiveLeasePhases})
	require.NoError(t, err)
	for _, a := range active {
		assert.NotEqual(t, l.ID, a.ID, "the ended lease holds no quota")
	}
}

// The orphan reaper's write: Pending → Failed only if the row is still Pending when it runs.
// It frees what the lease held (its principal's quota, its alias), changes nothing of a lease
// in any other phase, and loses to a Bound write committed first, whatever the order the
// engine lets the two run in.
func testFailPendingLease(t *testing.T, s store.Store) {
	ctx := context.Background()
	admit := func(id string) error {
		_, _, err := s.AdmitLease(ctx, store.AdmitRequest{Lease: store.Lease{ID: id, Pool: "dev", Principal: "orphan-owner", Role: "orphan-role",
			Alias: "mine", TTL: time.Hour}, MaxPerPrincipal: 1})
		return err
	}
	require.NoError(t, admit("lease-orphan-1"))
	require.ErrorIs(t, admit("lease-orphan-2"), store.ErrAliasTaken, "the Pending lease holds its alias")

	failed, err := s.FailPendingLease(ctx, "lease-orphan-1", api.ReasonOrphaned)
	require.NoError(t, err)
	assert.True(t, failed)
	got, err := s.GetLease(ctx, "lease-orphan-1")
	require.NoError(t, err)
	assert.Equal(t, api.LeaseFailed, got.Phase)
	assert.Equal(t, api.ReasonOrphaned, got.Reason)
	assert.Equal(t, "mine", got.Alias, "the rest of the row is kept")
	failed, err = s.FailPendingLease(ctx, "lease-orphan-1", api.ReasonOrphaned)
	require.NoError(t, err)
	assert.False(t, failed, "an ended lease is not failed again")
	require.NoError(t, admit("lease-orphan-2"), "the quota and the alias are free again")

	// Any other phase is left as it is; an unknown lease is no error.
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	for _, phase := range []api.LeasePhase{api.LeaseBound, api.LeaseReleased, api.LeaseExpired} {
		id := "lease-not-pending-" + strings.ToLower(string(phase))
		require.NoError(t, s.UpsertLease(ctx, store.Lease{ID: id, Pool: "dev", Principal: "someone", Phase: phase, InstanceID: "i", ExpiresAt: exp}))
		failed, err := s.FailPendingLease(ctx, id, api.ReasonOrphaned)
		require.NoError(t, err)
		assert.False(t, failed, phase)
		got, err := s.GetLease(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, phase, got.Phase)
		assert.Empty(t, got.Reason)
	}
	failed, err = s.FailPendingLease(ctx, "lease-never-admitted", api.ReasonOrphaned)
	require.NoError(t, err)
	assert.False(t, failed)

	// A warm bind's Bound row in flight (written, not committed) when the reaper's write runs:
	// the reaper waits for it and finds the row Bound.
	l := store.Lease{ID: "lease-bind-vs-reaper", Pool: "dev", Principal: "someone", Phase: api.LeasePending, TTL: time.Hour}
	require.NoError(t, s.UpsertLease(ctx, l))
	bound := make(chan struct{})
	release := make(chan struct{})
	bindDone := make(chan error, 1)
	go func() {
		bindDone <- s.InTx(ctx, func(tx store.Store) error {
			b := l
			b.Phase, b.InstanceID, b.ExpiresAt = api.LeaseBound, "inst-1", exp
			if err := tx.UpsertLease(ctx, b); err != nil {
				return err
			}
			close(bound)
			<-release
			return nil
		})
	}()
	<-bound
	reapDone := make(chan error, 1)
	var reaped bool
	go func() {
		var err error
		reaped, err = s.FailPendingLease(ctx, l.ID, api.ReasonOrphaned)
		reapDone <- err
	}()
	time.Sleep(50 * time.Millisecond) // the reaper's write is waiting on the bind's
	close(release)
	require.NoError(t, <-bindDone)
	require.NoError(t, <-reapDone)
	assert.False(t, reaped, "the bind committed first: the lease is not failed")
	got, err = s.GetLease(ctx, l.ID)
	require.NoError(t, err)
	assert.Equal(t, api.LeaseBound, got.Phase)
}

func testQuotas(t *testing.T, s store.Store) {
	ctx := context.Background()
	require.NoError(t, s.SetQuota(ctx, store.Quota{Subject: "role:ci", MaxConcurrentLeases: 5}))
	require.NoError(t, s.SetQuota(ctx, store.Quota{Subject: "role:ci", MaxConcurrentLeases: 7}))
	q, err := s.GetQuota(ctx, "role:ci")
	require.NoError(t, err)
	assert.Equal(t, 7, q.MaxConcurrentLeases)
	assert.Error(t, s.SetQuota(ctx, store.Quota{Subject: "x", MaxConcurrentLeases: -1}))
	all, err := s.ListQuotas(ctx)
	require.NoError(t, err)
	assert.Len(t, all, 1)
	require.NoError(t, s.DeleteQuota(ctx, "role:ci"))
	_, err = s.GetQuota(ctx, "role:ci")
	assert.ErrorIs(t, err, store.ErrNotFound)
}

func testEvents(t *testing.T, s store.Store, raw *sql.DB) {
	ctx := context.Background()
	t0 := time.Now().Add(-time.Minute)
	var ids []int64
	for i := 0; i < 5; i++ {
		actor := "alice"
		if i%2 == 1 {
			actor = "bob"
		}
		e, err := s.AppendEvent(ctx, store.Event{
			Time: t0.Add(time.Duration(i) * time.Second), Actor: actor, Action: "lease.create",
			Target: fmt.Sprintf("lease-%d", i), Result: "ok", RequestID: fmt.Sprintf("req-%d", i),
			Detail: json.RawMessage(`{"pool":"dev"}`),
		})
		require.NoError(t, err)
		ids = append(ids, e.ID)
	}
	for i := 1; i < len(ids); i++ {
		assert.Greater(t, ids[i], ids[i-1], "ids increase")
	}
	bobs, err := s.ListEvents(ctx, store.EventFilter{Actor: "bob"})
	require.NoError(t, err)
	assert.Len(t, bobs, 2)
	recent, err := s.ListEvents(ctx, store.EventFilter{Since: t0.Add(3 * time.Second)})
	require.NoError(t, err)
	assert.Len(t, recent, 2)
	after, err := s.ListEvents(ctx, store.EventFilter{AfterID: ids[2], Limit: 1})
	require.NoError(t, err)
	require.Len(t, after, 1)
	assert.Equal(t, ids[3], after[0].ID)
	assert.JSONEq(t, `{"pool":"dev"}`, string(after[0].Detail))

	_, err = s.AppendEvent(ctx, store.Event{Action: "x"})
	assert.Error(t, err, "an event needs an actor")

	// The database refuses edits even from a client that bypasses kobe.
	_, err = raw.ExecContext(ctx, `UPDATE events SET result = 'forged' WHERE actor = 'alice'`)
	assert.ErrorContains(t, err, "append-only")
	_, err = raw.ExecContext(ctx, `DELETE FROM events`)
	assert.ErrorContains(t, err, "append-only")
	all, err := s.ListEvents(ctx, store.EventFilter{})
	require.NoError(t, err)
	assert.Len(t, all, 5)
	for _, e := range all {
		assert.Equal(t, "ok", e.Result)
	}
}

func testProbes(t *testing.T, s store.Store) {
	ctx := context.Background()
	require.NoError(t, store.CheckWritable(ctx, s, "readyz"))
	_, err := s.ReadProbe(ctx, "readyz")
	assert.ErrorIs(t, err, store.ErrNotFound, "CheckWritable cleans up after itself")
}

func testConcurrent(t *testing.T, s store.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for w := 0; w < 20; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				id := fmt.Sprintf("c-%d", i) // the same 10 ids from every writer: contended upserts
				if err := s.UpsertInstance(ctx, store.Instance{ID: id, Pool: "conc", Backend: "local", Phase: api.InstancePhase(fmt.Sprintf("w%d", w))}); err != nil {
					errs <- err
				}
				if _, err := s.AppendEvent(ctx, store.Event{Actor: fmt.Sprintf("w%d", w), Action: "conc"}); err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ins, err := s.ListInstances(ctx, store.InstanceFilter{Pool: "conc"})
	require.NoError(t, err)
	assert.Len(t, ins, 10, "contended upserts leave one row per id")
	evs, err := s.ListEvents(ctx, store.EventFilter{Action: "conc"})
	require.NoError(t, err)
	assert.Len(t, evs, 200, "no event is lost")
}

func testReopen(t *testing.T, s store.Store, dsn string) {
	ctx := context.Background()
	v, err := s.SchemaVersion(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, v, 1)

	// Two processes starting together (server and worker) both migrate: neither may fail.
	var wg sync.WaitGroup
	opened := make([]store.Store, 2)
	errs := make([]error, 2)
	for i := range opened {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			opened[i], errs[i] = store.Open(ctx, dsn)
		}(i)
	}
	wg.Wait()
	for i := range opened {
		require.NoError(t, errs[i])
		defer opened[i].Close()
		v2, err := opened[i].SchemaVersion(ctx)
		require.NoError(t, err)
		assert.Equal(t, v, v2)
		_, err = opened[i].GetPool(ctx, "dev")
		assert.NoError(t, err, "data written before is visible after reopening")
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	_, err := store.Open(ctx, "mysql://x")
	assert.ErrorContains(t, err, "unsupported scheme")

	_, err = store.Open(ctx, "postgres://kobe:s3cret@127.0.0.1:1/kobe?connect_timeout=2")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot connect")
	assert.NotContains(t, err.Error(), "s3cret", "the password never appears in errors")

	_, err = store.Open(ctx, "sqlite:///proc/definitely/not/writable/kobe.db")
	assert.Error(t, err)
}

func TestMemoryStoresAreSeparate(t *testing.T) {
	ctx := context.Background()
	a, err := store.Open(ctx, "sqlite://:memory:")
	require.NoError(t, err)
	defer a.Close()
	b, err := store.Open(ctx, "sqlite://:memory:")
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, a.UpsertPool(ctx, store.Pool{Name: "only-in-a", Backend: "local"}))
	_, err = b.GetPool(ctx, "only-in-a")
	assert.True(t, errors.Is(err, store.ErrNotFound))
}

func testLeaseCredentials(t *testing.T, s store.Store) {
	ctx := context.Background()
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	sealed := []byte{0, 1, 2, 255, 'x'}
	require.NoError(t, s.PutLeaseCredential(ctx, store.LeaseCredential{LeaseID: "lease-c", Sealed: sealed, CredentialID: "ab12", ExpiresAt: exp}))
	got, err := s.GetLeaseCredential(ctx, "lease-c")
	require.NoError(t, err)
	assert.Equal(t, sealed, got.Sealed, "binary round-trips")
	assert.True(t, got.ExpiresAt.Equal(exp))
	exp2 := exp.Add(time.Hour)
	require.NoError(t, s.PutLeaseCredential(ctx, store.LeaseCredential{LeaseID: "lease-c", Sealed: []byte("new"), CredentialID: "cd34", ExpiresAt: exp2}))
	got, err = s.GetLeaseCredential(ctx, "lease-c")
	require.NoError(t, err)
	assert.Equal(t, "cd34", got.CredentialID)
	require.NoError(t, s.DeleteLeaseCredential(ctx, "lease-c"))
	require.NoError(t, s.DeleteLeaseCredential(ctx, "lease-c"))
	_, err = s.GetLeaseCredential(ctx, "lease-c")
	assert.ErrorIs(t, err, store.ErrNotFound)
	assert.Error(t, s.PutLeaseCredential(ctx, store.LeaseCredential{LeaseID: "x"}))
}

// A Ready instance's sealed prepared lease credential is stored, replaced, and goes with the instance; the
// first credential of a lease wins when two writers race (AddLeaseCredential).
func testPreparedCredentials(t *testing.T, s store.Store) {
	ctx := context.Background()
	_, err := s.GetPreparedCredential(ctx, "inst-s")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, s.UpsertInstance(ctx, store.Instance{ID: "inst-s", Pool: "p", Backend: "local", Phase: api.InstanceReady}))
	require.NoError(t, s.PutPreparedCredential(ctx, "inst-s", []byte("one")))
	require.NoError(t, s.PutPreparedCredential(ctx, "inst-s", []byte("two")))
	got, err := s.GetPreparedCredential(ctx, "inst-s")
	require.NoError(t, err)
	assert.Equal(t, []byte("two"), got)
	require.Error(t, s.PutPreparedCredential(ctx, "inst-s", nil), "an empty credential is refused")
	require.NoError(t, s.DeleteInstance(ctx, "inst-s"))
	_, err = s.GetPreparedCredential(ctx, "inst-s")
	require.ErrorIs(t, err, store.ErrNotFound, "the prepared credential goes with its instance")

	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	first, err := s.AddLeaseCredential(ctx, store.LeaseCredential{LeaseID: "lease-first", Sealed: []byte("api"), CredentialID: "1", ExpiresAt: exp})
	require.NoError(t, err)
	assert.Equal(t, []byte("api"), first.Sealed)
	second, err := s.AddLeaseCredential(ctx, store.LeaseCredential{LeaseID: "lease-first", Sealed: []byte("workflow"), CredentialID: "2", ExpiresAt: exp})
	require.NoError(t, err)
	assert.Equal(t, []byte("api"), second.Sealed, "the first stored credential is kept and returned")
	assert.Equal(t, "1", second.CredentialID)
}

// When an instance's certificates expire is recorded, replaced on a re-issue, and goes with the
// instance.
func testInstanceCertificates(t *testing.T, s store.Store) {
	ctx := context.Background()
	require.NoError(t, s.UpsertInstance(ctx, store.Instance{ID: "inst-c", Pool: "p", Backend: "local", Phase: api.InstanceReady}))
	at := time.Now().UTC().Truncate(time.Microsecond)
	c := store.InstanceCertificates{InstanceID: "inst-c", Pool: "p", CA: at.Add(10 * time.Hour), Serving: at.Add(time.Hour), Client: at.Add(2 * time.Hour)}
	require.NoError(t, s.PutInstanceCertificates(ctx, c))
	c.Serving = at.Add(3 * time.Hour)
	require.NoError(t, s.PutInstanceCertificates(ctx, c))
	got, err := s.ListInstanceCertificates(ctx)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "p", got[0].Pool)
	assert.True(t, got[0].CA.Equal(c.CA) && got[0].Client.Equal(c.Client))
	assert.True(t, got[0].Serving.Equal(at.Add(3*time.Hour)), "a re-issue replaces the row")
	require.Error(t, s.PutInstanceCertificates(ctx, store.InstanceCertificates{}), "an id is required")
	require.NoError(t, s.DeleteInstance(ctx, "inst-c"))
	got, err = s.ListInstanceCertificates(ctx)
	require.NoError(t, err)
	assert.Empty(t, got, "the row goes with its instance")
}
