package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The values kobe seals (internal/secretbox) live in two tables: lease_credentials (a lease's
// kubeconfig) and prepared_credentials (a Ready member's prepared credential). The fingerprint
// of the key that seals them is recorded in kobe_sealing_key (migration 0012).

// Kinds of sealed values.
const (
	SealedLeaseCredential    = "lease_credential"
	SealedPreparedCredential = "prepared_credential"
)

// SealedValue is one sealed value of the store: its kind, the id of the row it belongs to (the
// lease's or the instance's), and the sealed bytes.
type SealedValue struct {
	Kind   string
	ID     string
	Sealed []byte
}

// sealedTables maps a kind to its table and its key column.
var sealedTables = map[string][2]string{
	SealedLeaseCredential:    {"lease_credentials", "lease_id"},
	SealedPreparedCredential: {"prepared_credentials", "instance_id"},
}

func (q *sqlStore) SealedValues(ctx context.Context) ([]SealedValue, error) {
	var out []SealedValue
	for _, kind := range []string{SealedLeaseCredential, SealedPreparedCredential} {
		t := sealedTables[kind]
		rows, err := q.query(ctx, `SELECT `+t[1]+`, sealed FROM `+t[0]+` ORDER BY `+t[1])
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			v := SealedValue{Kind: kind}
			if err := rows.Scan(&v.ID, &v.Sealed); err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, v)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (q *sqlStore) ReplaceSealed(ctx context.Context, v SealedValue, resealed []byte) (bool, error) {
	t, ok := sealedTables[v.Kind]
	if !ok {
		return false, fmt.Errorf("store: no sealed value of kind %q", v.Kind)
	}
	res, err := q.exec(ctx, `UPDATE `+t[0]+` SET sealed = ? WHERE `+t[1]+` = ? AND sealed = ?`, resealed, v.ID, v.Sealed)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (q *sqlStore) SealingKey(ctx context.Context) (string, error) {
	var fp string
	err := q.queryRow(ctx, `SELECT fingerprint FROM kobe_sealing_key WHERE id = 1`).Scan(&fp)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	return fp, err
}

func (q *sqlStore) RecordSealingKey(ctx context.Context, previous, fingerprint string) (bool, error) {
	at := time.Now().UTC().Format(time.RFC3339)
	var res sql.Result
	var err error
	if previous == "" {
		res, err = q.exec(ctx, `INSERT INTO kobe_sealing_key (id, fingerprint, recorded_at) VALUES (1, ?, ?)
			ON CONFLICT (id) DO NOTHING`, fingerprint, at)
	} else {
		res, err = q.exec(ctx, `UPDATE kobe_sealing_key SET fingerprint = ?, recorded_at = ? WHERE id = 1 AND fingerprint = ?`,
			fingerprint, at, previous)
	}
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
