package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/kunobi-ninja/kobe/api"
)

// Token is an API bearer token as stored: the secret itself is never kept, only its hash.
type Token struct {
	ID         string
	Name       string
	Role       string
	Principal  string
	Hash       string
	CreatedAt  time.Time
	ExpiresAt  time.Time // zero: never
	RevokedAt  time.Time // zero: active
	LastUsedAt time.Time
}

// AdmitRequest asks to admit a new lease under its principal's and role's limits.
type AdmitRequest struct {
	Lease Lease // ID, Pool, Principal, Role, Alias, IdempotencyKey, RequestHash, TTL, Metadata
	// MaxPerPrincipal and MaxPerRole bound the active (Pending or Bound) leases; 0 = no limit.
	MaxPerPrincipal int
	MaxPerRole      int
}

// QuotaError says which limit refused a lease.
type QuotaError struct {
	Scope string // "principal" or "role"
	Name  string
	Used  int
	Limit int
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("%s %s holds %d of %d concurrent leases", e.Scope, e.Name, e.Used, e.Limit)
}

// Admission refusals other than quotas.
var (
	ErrIdempotencyConflict = errors.New("the idempotency key was used with a different request")
	ErrAliasTaken          = errors.New("the alias is held by another active lease")
)

// AdmitLease checks the limits and records the lease (phase Pending) in one transaction, so
// that concurrent requests cannot both pass a check that only one of them fits: writers are
// serialised per principal and per role (advisory locks on PostgreSQL, see admissionLocks; the
// single write lock on SQLite).
// A request repeating an idempotency key of the same principal returns the existing lease
// (replayed = true) if its body hash matches, ErrIdempotencyConflict otherwise.
func (s *sqlStore) AdmitLease(ctx context.Context, req AdmitRequest) (lease Lease, replayed bool, err error) {
	if req.Lease.ID == "" || req.Lease.Principal == "" {
		return Lease{}, false, errors.New("lease id and principal are required")
	}
	err = s.inTx(ctx, func(t *sqlStore) error {
		lease, replayed, err = t.admit(ctx, req)
		return err
	})
	if err != nil {
		return Lease{}, false, err
	}
	return lease, replayed, nil
}

// admit is AdmitLease inside its transaction.
func (s *sqlStore) admit(ctx context.Context, req AdmitRequest) (Lease, bool, error) {
	l := req.Lease
	if s.driver == "postgres" {
		for _, key := range admissionLocks(l.Principal, l.Role) {
			if _, err := s.exec(ctx, `SELECT pg_advisory_xact_lock(?)`, key); err != nil {
				return Lease{}, false, err
			}
		}
	}
	q := func(query string, args ...any) *sql.Row { return s.queryRow(ctx, query, args...) }
	if l.IdempotencyKey != "" {
		prev, err := scanLease(q(`SELECT `+leaseColumns+` FROM leases WHERE principal = ? AND idempotency_key = ?`, l.Principal, l.IdempotencyKey))
		switch {
		case err == nil && prev.RequestHash == l.RequestHash:
			return prev, true, nil
		case err == nil:
			return Lease{}, false, ErrIdempotencyConflict
		case !errors.Is(err, sql.ErrNoRows):
			return Lease{}, false, err
		}
	}
	active := `phase IN ('Pending', 'Bound')`
	if l.Alias != "" {
		var n int
		if err := q(`SELECT COUNT(*) FROM leases WHERE principal = ? AND alias = ? AND `+active, l.Principal, l.Alias).Scan(&n); err != nil {
			return Lease{}, false, err
		}
		if n > 0 {
			return Lease{}, false, ErrAliasTaken
		}
	}
	if req.MaxPerPrincipal > 0 {
		var n int
		if err := q(`SELECT COUNT(*) FROM leases WHERE principal = ? AND `+active, l.Principal).Scan(&n); err != nil {
			return Lease{}, false, err
		}
		if n >= req.MaxPerPrincipal {
			return Lease{}, false, &QuotaError{Scope: "principal", Name: l.Principal, Used: n, Limit: req.MaxPerPrincipal}
		}
	}
	if req.MaxPerRole > 0 {
		var n int
		if err := q(`SELECT COUNT(*) FROM leases WHERE role = ? AND `+active, l.Role).Scan(&n); err != nil {
			return Lease{}, false, err
		}
		if n >= req.MaxPerRole {
			return Lease{}, false, &QuotaError{Scope: "role", Name: l.Role, Used: n, Limit: req.MaxPerRole}
		}
	}
	meta := "{}"
	if len(l.Metadata) > 0 {
		b, err := jsonMarshal(l.Metadata)
		if err != nil {
			return Lease{}, false, err
		}
		meta = b
	}
	t := now()
	l.Phase, l.CreatedAt, l.UpdatedAt = api.LeasePending, t, t
	if _, err := s.exec(ctx, `INSERT INTO leases (id, pool, principal, phase, instance_id, alias, idempotency_key,
			ttl_ms, expires_at, metadata, reason, role, request_hash, created_at, updated_at)
		VALUES (?, ?, ?, ?, '', ?, ?, ?, NULL, ?, '', ?, ?, ?, ?)`,
		l.ID, l.Pool, l.Principal, l.Phase, l.Alias, l.IdempotencyKey, l.TTL.Milliseconds(), meta, l.Role, l.RequestHash, t, t); err != nil {
		return Lease{}, false, err
	}
	return l, false, nil
}

// admissionLocks are the advisory locks an admission holds on PostgreSQL: one per principal
// (its limit and its idempotency keys, whatever the role of the token that asks) and one per
// role (the role's aggregate quota). They are taken in ascending order, so that two admissions
// sharing both never wait for each other in a cycle. The role's key is the one earlier versions
// used, so that a server of either version excludes the other during a rolling upgrade.
func admissionLocks(principal, role string) []int64 {
	key := func(s string) int64 {
		h := fnv.New64a()
		h.Write([]byte(s))
		return int64(h.Sum64())
	}
	keys := []int64{key("kobe-admission-principal:" + principal), key("kobe-admission:" + role)}
	slices.Sort(keys)
	return keys
}

// ---- tokens ----

const tokenColumns = `id, name, role, principal, hash, created_at, expires_at, revoked_at, last_used_at`

func scanToken(sc interface{ Scan(...any) error }) (Token, error) {
	var t Token
	var created, expires, revoked, used dbTime
	if err := sc.Scan(&t.ID, &t.Name, &t.Role, &t.Principal, &t.Hash, &created, &expires, &revoked, &used); err != nil {
		return Token{}, err
	}
	t.CreatedAt, t.ExpiresAt, t.RevokedAt, t.LastUsedAt = created.t, expires.t, revoked.t, used.t
	return t, nil
}

func (s *sqlStore) CreateToken(ctx context.Context, t Token) (Token, error) {
	if t.ID == "" || t.Hash == "" || t.Role == "" || t.Principal == "" {
		return Token{}, errors.New("token id, hash, role and principal are required")
	}
	t.CreatedAt = now()
	_, err := s.exec(ctx, `INSERT INTO tokens (`+tokenColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL)`,
		t.ID, t.Name, t.Role, t.Principal, t.Hash, t.CreatedAt, nullTS(t.ExpiresAt))
	return t, err
}

func (s *sqlStore) GetTokenByHash(ctx context.Context, hash string) (Token, error) {
	t, err := scanToken(s.queryRow(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, ErrNotFound
	}
	return t, err
}

func (s *sqlStore) ListTokens(ctx context.Context) ([]Token, error) {
	rows, err := s.query(ctx, `SELECT `+tokenColumns+` FROM tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

func (s *sqlStore) RevokeToken(ctx context.Context, id string) error {
	res, err := s.exec(ctx, `UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, now(), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("token %s: %w", id, ErrNotFound)
	}
	return nil
}

func (s *sqlStore) TouchToken(ctx context.Context, id string, at time.Time) error {
	_, err := s.exec(ctx, `UPDATE tokens SET last_used_at = ? WHERE id = ?`, ts(at), id)
	return err
}

func jsonMarshal(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
