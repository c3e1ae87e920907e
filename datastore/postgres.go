package datastore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

type postgres struct {
	admin *url.URL
}

func newPostgres(adminURL string) (*postgres, error) {
	u, err := url.Parse(adminURL)
	if err != nil {
		return nil, errors.New("not a valid URL")
	}
	if u.Host == "" {
		return nil, errors.New("missing host (postgres://user:password@host:5432/postgres)")
	}
	if u.User == nil || u.User.Username() == "" {
		return nil, errors.New("missing user (postgres://user:password@host:5432/postgres)")
	}
	u.Scheme = "postgres"
	return &postgres{admin: u}, nil
}

func (p *postgres) nameLimit() int { return postgresNameLimit }

func (p *postgres) open(ctx context.Context) (*sql.DB, error) {
	db, err := sql.Open("pgx", p.admin.String())
	if err != nil {
		return nil, err
	}
	return adminConnection(ctx, db)
}

func (p *postgres) ping(ctx context.Context) error { return pingWith(ctx, p.open) }

// pgQuote quotes an identifier (names are checked to be [a-z0-9_] before; quoting anyway).
func pgQuote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// pgCode is the SQLSTATE of a PostgreSQL error, or "".
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func (p *postgres) provision(ctx context.Context, name, password string) (DSN, error) {
	if err := checkName(name); err != nil {
		return DSN{}, err
	}
	db, err := p.open(ctx)
	if err != nil {
		return DSN{}, err
	}
	defer db.Close()
	// DDL takes no bind parameters; the password is hex, quoted as a literal.
	pw := "'" + password + "'"
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, name).Scan(&exists); err != nil {
		return DSN{}, err
	}
	if !exists {
		_, err = db.ExecContext(ctx, `CREATE ROLE `+pgQuote(name)+` LOGIN PASSWORD `+pw)
		if pgCode(err) == "42710" { // duplicate_object: created meanwhile by a concurrent call
			exists, err = true, nil
		}
		if err != nil {
			return DSN{}, fmt.Errorf("CREATE ROLE: %w", err)
		}
	}
	if exists {
		if _, err := db.ExecContext(ctx, `ALTER ROLE `+pgQuote(name)+` LOGIN PASSWORD `+pw); err != nil {
			return DSN{}, fmt.Errorf("ALTER ROLE: %w", err)
		}
	}
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return DSN{}, err
	}
	if !exists {
		_, err := db.ExecContext(ctx, `CREATE DATABASE `+pgQuote(name)+` OWNER `+pgQuote(name))
		if err != nil && pgCode(err) != "42P04" { // duplicate_database: a concurrent call
			return DSN{}, fmt.Errorf("CREATE DATABASE: %w", err)
		}
	}
	// Only the owner (and superusers) may connect: PUBLIC has CONNECT and TEMPORARY by default.
	if _, err := db.ExecContext(ctx, `REVOKE ALL ON DATABASE `+pgQuote(name)+` FROM PUBLIC`); err != nil {
		return DSN{}, fmt.Errorf("REVOKE: %w", err)
	}
	u := *p.admin
	u.User = url.UserPassword(name, password)
	u.Path = "/" + name
	u.RawPath = ""
	return NewDSN(u.String()), nil
}

func (p *postgres) drop(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	db, err := p.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	// Sessions of the instance (its kine, a k3s server) hold the database open; DROP DATABASE
	// refuses while they do. The role cannot log in again once it is dropped, but it is dropped
	// after the database (it owns it), so first stop new logins, then end the sessions.
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		if _, err := db.ExecContext(ctx, `ALTER ROLE `+pgQuote(name)+` NOLOGIN`); err != nil {
			return fmt.Errorf("ALTER ROLE NOLOGIN: %w", err)
		}
	}
	for attempt := 0; ; attempt++ {
		if _, err := db.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE (datname = $1 OR usename = $1) AND pid <> pg_backend_pid()`, name); err != nil {
			return fmt.Errorf("ending the sessions of %s: %w", name, err)
		}
		_, err := db.ExecContext(ctx, `DROP DATABASE IF EXISTS `+pgQuote(name))
		if err == nil {
			break
		}
		// 55006 object_in_use: a session came back between the two statements.
		if pgCode(err) != "55006" || attempt >= 20 {
			return fmt.Errorf("DROP DATABASE: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if _, err := db.ExecContext(ctx, `DROP ROLE IF EXISTS `+pgQuote(name)); err != nil {
		return fmt.Errorf("DROP ROLE: %w", err)
	}
	return nil
}

func (p *postgres) objects(ctx context.Context, prefix string) ([]string, error) {
	return namedObjects(ctx, p.open, prefix, []objectQuery{
		{"database", `SELECT datname FROM pg_database ORDER BY datname`},
		{"role", `SELECT rolname FROM pg_roles ORDER BY rolname`},
	})
}
