package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Session is a person's portal session, as stored: the cookie's secret is never kept, only
// its hash.
type Session struct {
	ID        string
	Hash      string
	Principal string
	Issuer    string
	// Claims of the ID token the login yielded (JSON object).
	Claims    json.RawMessage
	CreatedAt time.Time
	ExpiresAt time.Time
	RevokedAt time.Time // zero: active
}

const sessionColumns = `id, hash, principal, issuer, claims, created_at, expires_at, revoked_at`

func scanSession(sc interface{ Scan(...any) error }) (Session, error) {
	var se Session
	var claims string
	var created, expires, revoked dbTime
	if err := sc.Scan(&se.ID, &se.Hash, &se.Principal, &se.Issuer, &claims, &created, &expires, &revoked); err != nil {
		return Session{}, err
	}
	se.Claims = json.RawMessage(claims)
	se.CreatedAt, se.ExpiresAt, se.RevokedAt = created.t, expires.t, revoked.t
	return se, nil
}

func (s *sqlStore) CreateSession(ctx context.Context, se Session) (Session, error) {
	if se.ID == "" || se.Hash == "" || se.Principal == "" || se.ExpiresAt.IsZero() {
		return Session{}, errors.New("session id, hash, principal and expiry are required")
	}
	if len(se.Claims) == 0 {
		se.Claims = json.RawMessage(`{}`)
	}
	se.CreatedAt = now()
	se.ExpiresAt = ts(se.ExpiresAt)
	_, err := s.exec(ctx, `INSERT INTO sessions (`+sessionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)`,
		se.ID, se.Hash, se.Principal, se.Issuer, string(se.Claims), se.CreatedAt, se.ExpiresAt)
	return se, err
}

func (s *sqlStore) GetSessionByHash(ctx context.Context, hash string) (Session, error) {
	se, err := scanSession(s.queryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, ErrNotFound
	}
	return se, err
}

func (s *sqlStore) RevokeSession(ctx context.Context, id string) error {
	res, err := s.exec(ctx, `UPDATE sessions SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, now(), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	return nil
}
