// Package store is kobe's own record of pools, instances, leases, quotas and audit events.
//
// The workflows are the authority for every transition; they write here through idempotent
// activities (upserts keyed by domain id), and the API reads from here for lists, status and
// audit. One interface, two drivers: SQLite (pure Go, the embedded default) and PostgreSQL (pgx).
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/kunobi-ninja/kobe/api"
)

// ErrNotFound is returned by Get* and Delete* for an id that does not exist.
var ErrNotFound = errors.New("not found")

// ErrAuditWrite wraps the error of an audit event that could not be written. A mutation whose
// event is written in its transaction fails with it and changes nothing.
var ErrAuditWrite = errors.New("the audit event could not be written")

// ErrLeaseEnded is returned when a write would bring an ended lease (Released, Expired or
// Failed) back: its row moving to another phase, or a credential stored for it. An ended lease
// stays ended, whoever writes late (the API binding it, a retried activity): test with errors.Is.
var ErrLeaseEnded = errors.New("the lease has ended")

// ErrAppendOnly is returned when something tries to change or remove an audit event.
var ErrAppendOnly = errors.New("audit events are append-only")

// Pool is a declared pool of clusters.
type Pool struct {
	Name    string
	Backend string
	// Spec is the validated ClusterPool manifest, as JSON.
	Spec json.RawMessage
	// ManagedBy names the Kubernetes resource that manages the pool ("ClusterPool/dev"), empty
	// for a pool applied through the API. Every upsert writes it.
	ManagedBy string
	// Generation grows with every apply of the pool's row: it starts at the row's creation
	// time in microseconds and counts one more on each upsert, so that a pool created again
	// after a delete is always newer than anything the deleted one was. A delete names the
	// generation it saw, and forgetting a drained pool never removes a pool applied (or
	// created) again since (DeletePoolGeneration). The caller's value is ignored.
	Generation int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Instance is one cluster created by a backend.
type Instance struct {
	ID      string
	Pool    string
	Backend string
	// Host is the kobe worker host that owns the instance (for host-local backends).
	Host    string
	Phase   api.InstancePhase
	LeaseID string
	// Endpoint is the instance's API server URL. Credentials are never stored here.
	Endpoint string
	// Data is backend-specific, non-secret state.
	Data      json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Lease is a principal's claim on an instance of a pool.
type Lease struct {
	ID             string
	Pool           string
	Principal      string
	Phase          api.LeasePhase
	InstanceID     string
	Alias          string
	IdempotencyKey string
	TTL            time.Duration
	// ExpiresAt is zero until the lease is bound.
	ExpiresAt time.Time
	Metadata  map[string]string
	// Reason is the reason code of a failed or ended lease (e.g. pool_exhausted).
	Reason api.ReasonCode
	// Role is the role of the principal that created it (aggregate quotas count by role).
	Role string
	// RequestHash identifies the creating request's body, for idempotent replays.
	RequestHash string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// LeaseCredential is a lease's kubeconfig as stored: sealed, never plain.
type LeaseCredential struct {
	LeaseID      string
	Sealed       []byte
	CredentialID string
	ExpiresAt    time.Time
}

// InstanceCertificates is when each of an instance's certificates expires.
type InstanceCertificates struct {
	InstanceID string
	Pool       string
	CA         time.Time
	Serving    time.Time
	Client     time.Time
	UpdatedAt  time.Time
}

// Quota limits what a subject (a principal or a role, e.g. "role:ci") may hold at once.
type Quota struct {
	Subject             string
	MaxConcurrentLeases int
	UpdatedAt           time.Time
}

// Event is one entry of the append-only audit log.
type Event struct {
	ID        int64
	Time      time.Time
	Actor     string
	Action    string
	Target    string
	Result    string
	RequestID string
	Detail    json.RawMessage
	// Pool the event concerns, if any (for filtering).
	Pool string
	// Key, if set, names the transition the event records: an event with a key is written
	// once, and appending it again returns the first (so that a retried activity that may have
	// written it already writes it exactly once).
	Key string
}

// InstanceFilter selects instances; empty fields match everything.
type InstanceFilter struct {
	Pool  string
	Phase api.InstancePhase
	Host  string
}

// LeaseFilter selects leases; empty fields match everything.
type LeaseFilter struct {
	Pool      string
	Principal string
	Alias     string
	Phases    []api.LeasePhase
}

// EventFilter selects audit events, oldest first; empty fields match everything.
type EventFilter struct {
	Since   time.Time
	AfterID int64
	Actor   string
	Action  string
	Target  string
	Pool    string
	Key     string
	Limit   int
}

// Store is implemented by the SQLite and PostgreSQL drivers.
// Every Upsert is idempotent: writing the same record twice leaves one row.
type Store interface {
	// Driver names the driver: "sqlite" or "postgres".
	Driver() string

	UpsertPool(ctx context.Context, p Pool) error
	GetPool(ctx context.Context, name string) (Pool, error)
	ListPools(ctx context.Context) ([]Pool, error)
	DeletePool(ctx context.Context, name string) error
	// DeletePoolGeneration deletes the pool only if its row is still at generation (or older);
	// deleted is false when there is no such row or it was applied again since.
	DeletePoolGeneration(ctx context.Context, name string, generation int64) (deleted bool, err error)

	UpsertInstance(ctx context.Context, in Instance) error
	GetInstance(ctx context.Context, id string) (Instance, error)
	ListInstances(ctx context.Context, f InstanceFilter) ([]Instance, error)
	DeleteInstance(ctx context.Context, id string) error

	// UpsertLease writes a lease's row. A row that has ended (Released, Expired, Failed) is not
	// moved to another phase (ErrLeaseEnded, nothing written); the same phase again is written.
	UpsertLease(ctx context.Context, l Lease) error
	GetLease(ctx context.Context, id string) (Lease, error)
	ListLeases(ctx context.Context, f LeaseFilter) ([]Lease, error)
	// FailPendingLease moves a lease from Pending to Failed with reason, only if its row is
	// still Pending when the write runs (a conditional write: a lease bound, released or ended
	// meanwhile is left as it is, and failed is false). The orphan reaper ends leases this way;
	// the caller appends the lease.failed event in the same transaction.
	FailPendingLease(ctx context.Context, id string, reason api.ReasonCode) (failed bool, err error)

	// AdmitLease records a new Pending lease if its principal's and role's limits allow it
	// (atomically); see the SQL implementation for idempotency and alias rules.
	AdmitLease(ctx context.Context, req AdmitRequest) (lease Lease, replayed bool, err error)

	CreateToken(ctx context.Context, t Token) (Token, error)
	GetTokenByHash(ctx context.Context, hash string) (Token, error)
	ListTokens(ctx context.Context) ([]Token, error)
	RevokeToken(ctx context.Context, id string) error
	TouchToken(ctx context.Context, id string, at time.Time) error

	// CreateSession records a portal session; GetSessionByHash finds one by its cookie's
	// hash (ErrNotFound); RevokeSession ends one (logout; idempotent, ErrNotFound if unknown).
	CreateSession(ctx context.Context, se Session) (Session, error)
	GetSessionByHash(ctx context.Context, hash string) (Session, error)
	RevokeSession(ctx context.Context, id string) error

	SetQuota(ctx context.Context, q Quota) error
	GetQuota(ctx context.Context, subject string) (Quota, error)
	ListQuotas(ctx context.Context) ([]Quota, error)
	DeleteQuota(ctx context.Context, subject string) error

	// InTx runs fn with a Store whose reads and writes all belong to one transaction: committed
	// if fn returns nil, rolled back otherwise (fn's error is returned as it is). This is how a
	// change and the audit event that records it are written together or not at all. fn must
	// use only the Store it is given (on SQLite the transaction holds the write lock), and must
	// not keep it. Inside a transaction, InTx joins it.
	InTx(ctx context.Context, fn func(tx Store) error) error

	// AppendEvent records an audit event and returns it with its id and time set (see
	// Event.Key for idempotent appends).
	AppendEvent(ctx context.Context, e Event) (Event, error)
	ListEvents(ctx context.Context, f EventFilter) ([]Event, error)

	// PutLeaseCredential stores a lease's sealed kubeconfig (replacing an older one);
	// GetLeaseCredential reads it; DeleteLeaseCredential removes it (idempotent).
	// PutLeaseCredential and AddLeaseCredential refuse a lease whose row has ended
	// (ErrLeaseEnded): its credential was revoked when it ended, and a late writer must not
	// store one again. They lock a live lease's row until their transaction ends, so that it
	// does not end meanwhile.
	PutLeaseCredential(ctx context.Context, c LeaseCredential) error
	// AddLeaseCredential stores a lease's sealed kubeconfig unless the lease has one already,
	// and returns the one stored: of two writers racing to mint a lease's first credential
	// (the API binding it, its workflow making sure it exists), both hand out the same.
	AddLeaseCredential(ctx context.Context, c LeaseCredential) (LeaseCredential, error)
	// PutPreparedCredential stores the sealed prepared lease credential of a Ready instance
	// (backends.PreparedCredential, replacing an older one); GetPreparedCredential reads it
	// (ErrNotFound: the instance has none). DeleteInstance removes it with the instance.
	PutPreparedCredential(ctx context.Context, instanceID string, sealed []byte) error
	GetPreparedCredential(ctx context.Context, instanceID string) ([]byte, error)
	// PutInstanceCertificates records when an instance's certificates expire (replacing what
	// was recorded); ListInstanceCertificates lists every instance's, by instance id.
	// DeleteInstance removes it with the instance.
	PutInstanceCertificates(ctx context.Context, c InstanceCertificates) error
	ListInstanceCertificates(ctx context.Context) ([]InstanceCertificates, error)
	GetLeaseCredential(ctx context.Context, leaseID string) (LeaseCredential, error)
	DeleteLeaseCredential(ctx context.Context, leaseID string) error

	// WriteProbe, ReadProbe and DeleteProbe let health checks and `kobe doctor` prove that the
	// store accepts writes and that two processes see the same data.
	WriteProbe(ctx context.Context, id string, at time.Time) error
	ReadProbe(ctx context.Context, id string) (time.Time, error)
	DeleteProbe(ctx context.Context, id string) error

	// SchemaVersion is the highest migration applied.
	SchemaVersion(ctx context.Context) (int, error)

	// SealedValues lists every sealed value of the store (sealing.go), lease credentials first,
	// each kind by id.
	SealedValues(ctx context.Context) ([]SealedValue, error)
	// ReplaceSealed writes resealed in place of v's sealed bytes, only if the row still holds
	// them (a row rewritten or deleted meanwhile is left alone: false).
	ReplaceSealed(ctx context.Context, v SealedValue, resealed []byte) (bool, error)
	// SealingKey returns the fingerprint of the key recorded as the one that seals the store's
	// values; ErrNotFound when none is recorded yet.
	SealingKey(ctx context.Context) (string, error)
	// RecordSealingKey records fingerprint in place of previous ("" when none is recorded). It
	// returns false, changing nothing, when the record is no longer previous.
	RecordSealingKey(ctx context.Context, previous, fingerprint string) (bool, error)

	// Release is the release of kobe that created the store or last started on it
	// (ErrNotFound: none since v0.1.0, which introduced it: the store was made before);
	// StampRelease records release as the one that started on it last (and as its first, when
	// there was none). See CheckRelease.
	Release(ctx context.Context) (ReleaseStamp, error)
	StampRelease(ctx context.Context, release string, at time.Time) error

	Close() error
}

// CheckWritable writes, reads back and removes a probe row: what /readyz means by "store writable".
func CheckWritable(ctx context.Context, s Store, id string) error {
	now := time.Now().UTC().Truncate(time.Microsecond)
	if err := s.WriteProbe(ctx, id, now); err != nil {
		return err
	}
	got, err := s.ReadProbe(ctx, id)
	if err != nil {
		return err
	}
	if !got.Equal(now) {
		return errors.New("store returned a different probe value than was written")
	}
	return s.DeleteProbe(ctx, id)
}
