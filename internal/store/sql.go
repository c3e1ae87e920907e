package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kunobi-ninja/kobe/api"
)

// sqlStore implements Store for both drivers. The SQL is written once with "?" placeholders;
// rebind turns them into $1, $2… for PostgreSQL. Both engines accept INSERT … ON CONFLICT and RETURNING.
//
// A sqlStore is either the store itself (tx nil) or one transaction of it (see InTx): q is
// whichever of the two runs its statements.
type sqlStore struct {
	db     *sql.DB
	tx     *sql.Tx
	q      querier
	driver string
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func newSQLStore(db *sql.DB, driver string) *sqlStore {
	return &sqlStore{db: db, q: db, driver: driver}
}

func (s *sqlStore) Driver() string { return s.driver }

func (s *sqlStore) Close() error {
	if s.tx != nil {
		return errors.New("store: Close called on a transaction; it ends when InTx's function returns")
	}
	return s.db.Close()
}

// InTx runs fn in one transaction: committed if fn returns nil, rolled back otherwise, and fn's
// error is returned as it is. Inside a transaction, InTx joins it.
func (s *sqlStore) InTx(ctx context.Context, fn func(tx Store) error) error {
	return s.inTx(ctx, func(t *sqlStore) error { return fn(t) })
}

func (s *sqlStore) inTx(ctx context.Context, fn func(t *sqlStore) error) error {
	if s.tx != nil {
		return fn(s)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(&sqlStore{db: s.db, tx: tx, q: tx, driver: s.driver}); err != nil {
		return err
	}
	return s.wrap(tx.Commit())
}

func (s *sqlStore) rebind(q string) string { return rebindFor(s.driver, q) }

// rebindFor turns the ? placeholders of q into PostgreSQL's $n when driver is postgres.
func rebindFor(driver, q string) string {
	if driver != "postgres" {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (s *sqlStore) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	res, err := s.q.ExecContext(ctx, s.rebind(q), args...)
	return res, s.wrap(err)
}

func (s *sqlStore) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	rows, err := s.q.QueryContext(ctx, s.rebind(q), args...)
	return rows, s.wrap(err)
}

func (s *sqlStore) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return s.q.QueryRowContext(ctx, s.rebind(q), args...)
}

// wrap maps the engines' "append-only" trigger errors to ErrAppendOnly.
func (s *sqlStore) wrap(err error) error {
	if err == nil {
		return nil
	}
	if strings.Contains(err.Error(), "audit events are append-only") {
		return fmt.Errorf("%w: %v", ErrAppendOnly, err)
	}
	return err
}

// dbTime scans a timestamp from either engine: pgx returns time.Time; modernc returns
// time.Time for TIMESTAMP columns but a string for expressions.
type dbTime struct {
	t time.Time
}

func (d *dbTime) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		d.t = time.Time{}
	case time.Time:
		d.t = x.UTC()
	case string:
		return d.parse(x)
	case []byte:
		return d.parse(string(x))
	default:
		return fmt.Errorf("cannot scan %T into a time", v)
	}
	return nil
}

func (d *dbTime) parse(s string) error {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999-07:00", "2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			d.t = t.UTC()
			return nil
		}
	}
	return fmt.Errorf("cannot parse time %q", s)
}

// ts normalises a time for storage: UTC, microsecond precision (PostgreSQL's resolution),
// so that what is read back equals what was written on both engines.
func ts(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func nullTS(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return ts(t)
}

func jsonOrEmpty(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	return string(raw)
}

// now is the store's clock for created/updated stamps.
func now() time.Time { return ts(time.Now()) }

// ---- pools ----

func (s *sqlStore) UpsertPool(ctx context.Context, p Pool) error {
	if p.Name == "" {
		return errors.New("pool name is empty")
	}
	t := now()
	_, err := s.exec(ctx, `INSERT INTO pools (name, backend, spec, managed_by, generation, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET backend = excluded.backend, spec = excluded.spec, managed_by = excluded.managed_by,
			generation = pools.generation + 1, updated_at = excluded.updated_at`,
		p.Name, p.Backend, jsonOrEmpty(p.Spec), p.ManagedBy, t.UnixMicro(), t, t)
	return err
}

const poolColumns = `name, backend, spec, managed_by, generation, created_at, updated_at`

func scanPool(sc interface{ Scan(...any) error }) (Pool, error) {
	var p Pool
	var spec string
	var created, updated dbTime
	if err := sc.Scan(&p.Name, &p.Backend, &spec, &p.ManagedBy, &p.Generation, &created, &updated); err != nil {
		return Pool{}, err
	}
	p.Spec = json.RawMessage(spec)
	p.CreatedAt, p.UpdatedAt = created.t, updated.t
	return p, nil
}

func (s *sqlStore) GetPool(ctx context.Context, name string) (Pool, error) {
	p, err := scanPool(s.queryRow(ctx, `SELECT `+poolColumns+` FROM pools WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return Pool{}, fmt.Errorf("pool %q: %w", name, ErrNotFound)
	}
	return p, err
}

func (s *sqlStore) ListPools(ctx context.Context) ([]Pool, error) {
	rows, err := s.query(ctx, `SELECT `+poolColumns+` FROM pools ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Pool
	for rows.Next() {
		p, err := scanPool(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func (s *sqlStore) DeletePool(ctx context.Context, name string) error {
	return s.deleteOne(ctx, `DELETE FROM pools WHERE name = ?`, "pool", name)
}

func (s *sqlStore) DeletePoolGeneration(ctx context.Context, name string, generation int64) (bool, error) {
	res, err := s.exec(ctx, `DELETE FROM pools WHERE name = ? AND generation <= ?`, name, generation)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

func (s *sqlStore) deleteOne(ctx context.Context, q, kind, id string) error {
	res, err := s.exec(ctx, q, id)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s %q: %w", kind, id, ErrNotFound)
	}
	return nil
}

// ---- instances ----

func (s *sqlStore) UpsertInstance(ctx context.Context, in Instance) error {
	if in.ID == "" {
		return errors.New("instance id is empty")
	}
	t := now()
	_, err := s.exec(ctx, `INSERT INTO instances (id, pool, backend, host, phase, lease_id, endpoint, data, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET pool = excluded.pool, backend = excluded.backend, host = excluded.host,
			phase = excluded.phase, lease_id = excluded.lease_id, endpoint = excluded.endpoint,
			data = excluded.data, updated_at = excluded.updated_at`,
		in.ID, in.Pool, in.Backend, in.Host, in.Phase, in.LeaseID, in.Endpoint, jsonOrEmpty(in.Data), t, t)
	return err
}

const instanceColumns = `id, pool, backend, host, phase, lease_id, endpoint, data, created_at, updated_at`

func scanInstance(sc interface{ Scan(...any) error }) (Instance, error) {
	var in Instance
	var data string
	var created, updated dbTime
	if err := sc.Scan(&in.ID, &in.Pool, &in.Backend, &in.Host, &in.Phase, &in.LeaseID, &in.Endpoint, &data, &created, &updated); err != nil {
		return Instance{}, err
	}
	in.Data = json.RawMessage(data)
	in.CreatedAt, in.UpdatedAt = created.t, updated.t
	return in, nil
}

func (s *sqlStore) GetInstance(ctx context.Context, id string) (Instance, error) {
	in, err := scanInstance(s.queryRow(ctx, `SELECT `+instanceColumns+` FROM instances WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Instance{}, fmt.Errorf("instance %q: %w", id, ErrNotFound)
	}
	return in, err
}

func (s *sqlStore) ListInstances(ctx context.Context, f InstanceFilter) ([]Instance, error) {
	var where []string
	var args []any
	for col, v := range map[string]string{"pool": f.Pool, "phase": string(f.Phase), "host": f.Host} {
		if v != "" {
			where = append(where, col+" = ?")
			args = append(args, v)
		}
	}
	rows, err := s.query(ctx, `SELECT `+instanceColumns+` FROM instances`+whereClause(where)+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Instance
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, rows.Err()
}

func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

func (s *sqlStore) DeleteInstance(ctx context.Context, id string) error {
	if _, err := s.exec(ctx, `DELETE FROM prepared_credentials WHERE instance_id = ?`, id); err != nil {
		return err
	}
	if _, err := s.exec(ctx, `DELETE FROM instance_certificates WHERE instance_id = ?`, id); err != nil {
		return err
	}
	return s.deleteOne(ctx, `DELETE FROM instances WHERE id = ?`, "instance", id)
}

func (s *sqlStore) PutPreparedCredential(ctx context.Context, instanceID string, sealed []byte) error {
	if instanceID == "" || len(sealed) == 0 {
		return errors.New("a prepared lease credential needs an instance id and a sealed value")
	}
	_, err := s.exec(ctx, `INSERT INTO prepared_credentials (instance_id, sealed, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (instance_id) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at`,
		instanceID, sealed, now())
	return err
}

func (s *sqlStore) GetPreparedCredential(ctx context.Context, instanceID string) ([]byte, error) {
	var sealed []byte
	err := s.queryRow(ctx, `SELECT sealed FROM prepared_credentials WHERE instance_id = ?`, instanceID).Scan(&sealed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("prepared lease credential of %q: %w", instanceID, ErrNotFound)
	}
	return sealed, err
}

func (s *sqlStore) PutInstanceCertificates(ctx context.Context, c InstanceCertificates) error {
	if c.InstanceID == "" {
		return errors.New("instance certificates need an instance id")
	}
	_, err := s.exec(ctx, `INSERT INTO instance_certificates (instance_id, pool, ca_not_after, serving_not_after, client_not_after, updated_at)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (instance_id) DO UPDATE SET pool = excluded.pool, ca_not_after = excluded.ca_not_after,
			serving_not_after = excluded.serving_not_after, client_not_after = excluded.client_not_after, updated_at = excluded.updated_at`,
		c.InstanceID, c.Pool, ts(c.CA), ts(c.Serving), ts(c.Client), now())
	return err
}

func (s *sqlStore) ListInstanceCertificates(ctx context.Context) ([]InstanceCertificates, error) {
	rows, err := s.query(ctx, `SELECT instance_id, pool, ca_not_after, serving_not_after, client_not_after, updated_at
		FROM instance_certificates ORDER BY instance_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []InstanceCertificates
	for rows.Next() {
		var c InstanceCertificates
		var ca, serving, client, updated dbTime
		if err := rows.Scan(&c.InstanceID, &c.Pool, &ca, &serving, &client, &updated); err != nil {
			return nil, err
		}
		c.CA, c.Serving, c.Client, c.UpdatedAt = ca.t, serving.t, client.t, updated.t
		out = append(out, c)
	}
	return out, rows.Err()
}

// ---- leases ----

func (s *sqlStore) UpsertLease(ctx context.Context, l Lease) error {
	if l.ID == "" {
		return errors.New("lease id is empty")
	}
	meta, err := json.Marshal(l.Metadata)
	if err != nil {
		return fmt.Errorf("lease metadata: %w", err)
	}
	if l.Metadata == nil {
		meta = []byte("{}")
	}
	t := now()
	// The update's WHERE is checked against the row as it is when the update runs (PostgreSQL
	// re-reads a row a concurrent transaction changed; SQLite has one writer at a time): an
	// ended row changes only to the same phase (a retried record of the end), never to another.
	res, err := s.exec(ctx, `INSERT INTO leases (id, pool, principal, phase, instance_id, alias, idempotency_key, ttl_ms,
			expires_at, metadata, reason, role, request_hash, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET pool = excluded.pool, principal = excluded.principal, phase = excluded.phase,
			instance_id = excluded.instance_id, alias = excluded.alias, idempotency_key = excluded.idempotency_key,
			ttl_ms = excluded.ttl_ms, expires_at = excluded.expires_at, metadata = excluded.metadata,
			reason = excluded.reason, role = excluded.role, request_hash = excluded.request_hash,
			updated_at = excluded.updated_at
		WHERE leases.phase NOT IN (?, ?, ?) OR leases.phase = excluded.phase`,
		l.ID, l.Pool, l.Principal, l.Phase, l.InstanceID, l.Alias, l.IdempotencyKey, l.TTL.Milliseconds(),
		nullTS(l.ExpiresAt), string(meta), l.Reason, l.Role, l.RequestHash, t, t,
		api.LeaseReleased, api.LeaseExpired, api.LeaseFailed)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return s.endedLease(ctx, l.ID, l.Phase)
	}
	return nil
}

func (s *sqlStore) FailPendingLease(ctx context.Context, id string, reason api.ReasonCode) (bool, error) {
	// The WHERE is checked against the row as it is when the update runs (PostgreSQL re-reads
	// a row a concurrent transaction changed; SQLite has one writer at a time): a lease whose
	// Bound row committed first is not failed.
	res, err := s.exec(ctx, `UPDATE leases SET phase = ?, reason = ?, updated_at = ? WHERE id = ? AND phase = ?`,
		api.LeaseFailed, reason, now(), id, api.LeasePending)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// endedLease is the error of a write refused because lease id has ended.
func (s *sqlStore) endedLease(ctx context.Context, id string, want api.LeasePhase) error {
	var phase string
	if err := s.queryRow(ctx, `SELECT phase FROM leases WHERE id = ?`, id).Scan(&phase); err != nil {
		return fmt.Errorf("lease %q: refused to record %s, and reading it failed: %w", id, want, err)
	}
	return fmt.Errorf("lease %q is %s, not %s: %w", id, phase, want, ErrLeaseEnded)
}

// holdLiveLease refuses (ErrLeaseEnded) a write for a lease whose row has ended, and otherwise
// locks its row until the transaction ends, so that the lease cannot end (and have its
// credential revoked) between this check and the caller's write. The no-op UPDATE is the lock
// both engines share: PostgreSQL waits for a concurrent writer of the row and re-checks the
// WHERE against what it committed; SQLite's transactions hold the write lock from BEGIN.
// A lease the store has no row of is not refused: the store does not know it to have ended.
func (s *sqlStore) holdLiveLease(ctx context.Context, id string) error {
	res, err := s.exec(ctx, `UPDATE leases SET phase = phase WHERE id = ? AND phase NOT IN (?, ?, ?)`,
		id, api.LeaseReleased, api.LeaseExpired, api.LeaseFailed)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return err
	}
	var phase string
	err = s.queryRow(ctx, `SELECT phase FROM leases WHERE id = ?`, id).Scan(&phase)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("lease %q is %s: no credential is stored for it: %w", id, phase, ErrLeaseEnded)
}

const leaseColumns = `id, pool, principal, phase, instance_id, alias, idempotency_key, ttl_ms, expires_at, metadata, reason, role, request_hash, created_at, updated_at`

func scanLease(sc interface{ Scan(...any) error }) (Lease, error) {
	var l Lease
	var ttlMS int64
	var meta string
	var expires, created, updated dbTime
	if err := sc.Scan(&l.ID, &l.Pool, &l.Principal, &l.Phase, &l.InstanceID, &l.Alias, &l.IdempotencyKey, &ttlMS,
		&expires, &meta, &l.Reason, &l.Role, &l.RequestHash, &created, &updated); err != nil {
		return Lease{}, err
	}
	l.TTL = time.Duration(ttlMS) * time.Millisecond
	l.ExpiresAt, l.CreatedAt, l.UpdatedAt = expires.t, created.t, updated.t
	if meta != "" && meta != "{}" {
		if err := json.Unmarshal([]byte(meta), &l.Metadata); err != nil {
			return Lease{}, fmt.Errorf("lease %s metadata: %w", l.ID, err)
		}
	}
	return l, nil
}

func (s *sqlStore) GetLease(ctx context.Context, id string) (Lease, error) {
	l, err := scanLease(s.queryRow(ctx, `SELECT `+leaseColumns+` FROM leases WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, fmt.Errorf("lease %q: %w", id, ErrNotFound)
	}
	return l, err
}

func (s *sqlStore) ListLeases(ctx context.Context, f LeaseFilter) ([]Lease, error) {
	var where []string
	var args []any
	if f.Pool != "" {
		where, args = append(where, "pool = ?"), append(args, f.Pool)
	}
	if f.Principal != "" {
		where, args = append(where, "principal = ?"), append(args, f.Principal)
	}
	if f.Alias != "" {
		where, args = append(where, "alias = ?"), append(args, f.Alias)
	}
	if len(f.Phases) > 0 {
		marks := strings.TrimSuffix(strings.Repeat("?, ", len(f.Phases)), ", ")
		where = append(where, "phase IN ("+marks+")")
		for _, p := range f.Phases {
			args = append(args, p)
		}
	}
	rows, err := s.query(ctx, `SELECT `+leaseColumns+` FROM leases`+whereClause(where)+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// ---- quotas ----

func (s *sqlStore) SetQuota(ctx context.Context, q Quota) error {
	if q.Subject == "" {
		return errors.New("quota subject is empty")
	}
	if q.MaxConcurrentLeases < 0 {
		return fmt.Errorf("quota %q: maxConcurrentLeases must not be negative", q.Subject)
	}
	_, err := s.exec(ctx, `INSERT INTO quotas (subject, max_concurrent_leases, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (subject) DO UPDATE SET max_concurrent_leases = excluded.max_concurrent_leases, updated_at = excluded.updated_at`,
		q.Subject, q.MaxConcurrentLeases, now())
	return err
}

func scanQuota(sc interface{ Scan(...any) error }) (Quota, error) {
	var q Quota
	var updated dbTime
	if err := sc.Scan(&q.Subject, &q.MaxConcurrentLeases, &updated); err != nil {
		return Quota{}, err
	}
	q.UpdatedAt = updated.t
	return q, nil
}

func (s *sqlStore) GetQuota(ctx context.Context, subject string) (Quota, error) {
	q, err := scanQuota(s.queryRow(ctx, `SELECT subject, max_concurrent_leases, updated_at FROM quotas WHERE subject = ?`, subject))
	if errors.Is(err, sql.ErrNoRows) {
		return Quota{}, fmt.Errorf("quota %q: %w", subject, ErrNotFound)
	}
	return q, err
}

func (s *sqlStore) ListQuotas(ctx context.Context) ([]Quota, error) {
	rows, err := s.query(ctx, `SELECT subject, max_concurrent_leases, updated_at FROM quotas ORDER BY subject`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Quota
	for rows.Next() {
		q, err := scanQuota(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, rows.Err()
}

func (s *sqlStore) DeleteQuota(ctx context.Context, subject string) error {
	return s.deleteOne(ctx, `DELETE FROM quotas WHERE subject = ?`, "quota", subject)
}

// ---- audit events ----

func (s *sqlStore) AppendEvent(ctx context.Context, e Event) (Event, error) {
	if e.Actor == "" || e.Action == "" {
		return Event{}, errors.New("audit event needs an actor and an action")
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Time = ts(e.Time)
	if len(e.Detail) == 0 {
		e.Detail = json.RawMessage("{}")
	}
	err := s.queryRow(ctx, `INSERT INTO events (at, actor, action, target, result, request_id, detail, pool, dedup_key)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (dedup_key) WHERE dedup_key <> '' DO NOTHING RETURNING id`,
		e.Time, e.Actor, e.Action, e.Target, e.Result, e.RequestID, string(e.Detail), e.Pool, e.Key).Scan(&e.ID)
	if errors.Is(err, sql.ErrNoRows) && e.Key != "" {
		// Written before, by an earlier attempt: that one is the event.
		prev, err := s.ListEvents(ctx, EventFilter{Key: e.Key, Limit: 1})
		if err != nil {
			return Event{}, err
		}
		if len(prev) == 1 {
			return prev[0], nil
		}
		return Event{}, fmt.Errorf("audit event %s: neither written nor found", e.Key)
	}
	if err != nil {
		return Event{}, fmt.Errorf("%w (%s of %q): %w", ErrAuditWrite, e.Action, e.Target, s.wrap(err))
	}
	return e, nil
}

func (s *sqlStore) ListEvents(ctx context.Context, f EventFilter) ([]Event, error) {
	var where []string
	var args []any
	if !f.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, ts(f.Since))
	}
	if f.AfterID > 0 {
		where, args = append(where, "id > ?"), append(args, f.AfterID)
	}
	if f.Actor != "" {
		where, args = append(where, "actor = ?"), append(args, f.Actor)
	}
	if f.Action != "" {
		where, args = append(where, "action = ?"), append(args, f.Action)
	}
	if f.Target != "" {
		where, args = append(where, "target = ?"), append(args, f.Target)
	}
	if f.Pool != "" {
		where, args = append(where, "pool = ?"), append(args, f.Pool)
	}
	if f.Key != "" {
		where, args = append(where, "dedup_key = ?"), append(args, f.Key)
	}
	q := `SELECT id, at, actor, action, target, result, request_id, detail, pool, dedup_key FROM events` + whereClause(where) + ` ORDER BY id`
	if f.Limit > 0 {
		q += ` LIMIT ` + strconv.Itoa(f.Limit)
	}
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var at dbTime
		var detail string
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Target, &e.Result, &e.RequestID, &detail, &e.Pool, &e.Key); err != nil {
			return nil, err
		}
		e.Time, e.Detail = at.t, json.RawMessage(detail)
		out = append(out, e)
	}
	return out, rows.Err()
}

// ---- probes ----

func (s *sqlStore) WriteProbe(ctx context.Context, id string, at time.Time) error {
	_, err := s.exec(ctx, `INSERT INTO probes (id, written_at) VALUES (?, ?)
		ON CONFLICT (id) DO UPDATE SET written_at = excluded.written_at`, id, ts(at))
	return err
}

func (s *sqlStore) ReadProbe(ctx context.Context, id string) (time.Time, error) {
	var t dbTime
	err := s.queryRow(ctx, `SELECT written_at FROM probes WHERE id = ?`, id).Scan(&t)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, fmt.Errorf("probe %q: %w", id, ErrNotFound)
	}
	return t.t, err
}

func (s *sqlStore) DeleteProbe(ctx context.Context, id string) error {
	_, err := s.exec(ctx, `DELETE FROM probes WHERE id = ?`, id)
	return err
}

func (s *sqlStore) SchemaVersion(ctx context.Context) (int, error) {
	var v sql.NullInt64
	err := s.queryRow(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v)
	return int(v.Int64), err
}

// ---- lease credentials ----

func (s *sqlStore) PutLeaseCredential(ctx context.Context, c LeaseCredential) error {
	if c.LeaseID == "" || len(c.Sealed) == 0 {
		return errors.New("lease credential needs a lease id and a sealed value")
	}
	return s.inTx(ctx, func(t *sqlStore) error {
		if err := t.holdLiveLease(ctx, c.LeaseID); err != nil {
			return err
		}
		_, err := t.exec(ctx, `INSERT INTO lease_credentials (lease_id, sealed, credential_id, expires_at, updated_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (lease_id) DO UPDATE SET sealed = excluded.sealed, credential_id = excluded.credential_id,
			expires_at = excluded.expires_at, updated_at = excluded.updated_at`,
			c.LeaseID, c.Sealed, c.CredentialID, ts(c.ExpiresAt), now())
		return err
	})
}

func (s *sqlStore) AddLeaseCredential(ctx context.Context, c LeaseCredential) (LeaseCredential, error) {
	if c.LeaseID == "" || len(c.Sealed) == 0 {
		return LeaseCredential{}, errors.New("lease credential needs a lease id and a sealed value")
	}
	var stored LeaseCredential
	err := s.inTx(ctx, func(t *sqlStore) error {
		if err := t.holdLiveLease(ctx, c.LeaseID); err != nil {
			return err
		}
		if _, err := t.exec(ctx, `INSERT INTO lease_credentials (lease_id, sealed, credential_id, expires_at, updated_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (lease_id) DO NOTHING`,
			c.LeaseID, c.Sealed, c.CredentialID, ts(c.ExpiresAt), now()); err != nil {
			return err
		}
		var err error
		stored, err = t.GetLeaseCredential(ctx, c.LeaseID)
		return err
	})
	if err != nil {
		return LeaseCredential{}, err
	}
	return stored, nil
}

func (s *sqlStore) GetLeaseCredential(ctx context.Context, leaseID string) (LeaseCredential, error) {
	c := LeaseCredential{LeaseID: leaseID}
	var exp dbTime
	err := s.queryRow(ctx, `SELECT sealed, credential_id, expires_at FROM lease_credentials WHERE lease_id = ?`, leaseID).
		Scan(&c.Sealed, &c.CredentialID, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return LeaseCredential{}, fmt.Errorf("credential of %q: %w", leaseID, ErrNotFound)
	}
	c.ExpiresAt = exp.t
	return c, err
}

func (s *sqlStore) DeleteLeaseCredential(ctx context.Context, leaseID string) error {
	_, err := s.exec(ctx, `DELETE FROM lease_credentials WHERE lease_id = ?`, leaseID)
	return err
}
