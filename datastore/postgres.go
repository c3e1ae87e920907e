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
	return p.provisionFrom(ctx, name, password, "")
}

// provisionFrom makes the instance's role and its database: empty, or a copy of template
// ("" for none) whose objects then pass from the template's role to the instance's.
func (p *postgres) provisionFrom(ctx context.Context, name, password, template string) (DSN, error) {
	if err := checkName(name); err != nil {
		return DSN{}, err
	}
	if template != "" {
		if err := checkName(template); err != nil {
			return DSN{}, err
		}
	}
	db, err := p.open(ctx)
	if err != nil {
		return DSN{}, err
	}
	defer db.Close()
	// DDL takes no bind parameters; the password is hex, quoted as a literal.
	if err := pgEnsureRole(ctx, db, name, "LOGIN PASSWORD '"+password+"'"); err != nil {
		return DSN{}, err
	}
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return DSN{}, err
	}
	if !exists {
		create := `CREATE DATABASE ` + pgQuote(name) + ` OWNER ` + pgQuote(name)
		if template != "" {
			create += ` TEMPLATE ` + pgQuote(template)
		}
		if err := pgCreateDatabase(ctx, db, create); err != nil {
			return DSN{}, err
		}
	}
	// Only the owner (and superusers) may connect: PUBLIC has CONNECT and TEMPORARY by default.
	if _, err := db.ExecContext(ctx, `REVOKE ALL ON DATABASE `+pgQuote(name)+` FROM PUBLIC`); err != nil {
		return DSN{}, fmt.Errorf("REVOKE: %w", err)
	}
	if template != "" {
		// The copied tables belong to the template's role: they become the instance's, so
		// that its kine may write them and no other member's role owns anything here.
		if err := p.inDatabase(ctx, name, `REASSIGN OWNED BY `+pgQuote(template)+` TO `+pgQuote(name)); err != nil {
			return DSN{}, fmt.Errorf("REASSIGN OWNED: %w", err)
		}
	}
	u := *p.admin
	u.User = url.UserPassword(name, password)
	u.Path = "/" + name
	u.RawPath = ""
	return NewDSN(u.String()), nil
}

// pgEnsureRole creates the role with the given options, or sets them when it exists (a fresh
// password for a retried provision).
func pgEnsureRole(ctx context.Context, db *sql.DB, name, options string) error {
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, name).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		_, err := db.ExecContext(ctx, `CREATE ROLE `+pgQuote(name)+` `+options)
		if pgCode(err) == "42710" { // duplicate_object: created meanwhile by a concurrent call
			exists, err = true, nil
		}
		if err != nil {
			return fmt.Errorf("CREATE ROLE: %w", err)
		}
	}
	if exists {
		if _, err := db.ExecContext(ctx, `ALTER ROLE `+pgQuote(name)+` `+options); err != nil {
			return fmt.Errorf("ALTER ROLE: %w", err)
		}
	}
	return nil
}

// pgCreateDatabase runs a CREATE DATABASE, which a concurrent call may have done already
// (42P04) and which a copy refuses while a session holds its template (55006: retried).
func pgCreateDatabase(ctx context.Context, db *sql.DB, create string) error {
	for attempt := 0; ; attempt++ {
		_, err := db.ExecContext(ctx, create)
		if err == nil || pgCode(err) == "42P04" {
			return nil
		}
		if pgCode(err) != "55006" || attempt >= 50 {
			return fmt.Errorf("CREATE DATABASE: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// inDatabase runs one admin statement connected to the database name (REASSIGN OWNED acts on
// the objects of the database it runs in).
func (p *postgres) inDatabase(ctx context.Context, name, statement string, args ...any) error {
	db, err := p.openDatabase(ctx, name)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, statement, args...)
	return err
}

// openDatabase is an admin connection to the database name.
func (p *postgres) openDatabase(ctx context.Context, name string) (*sql.DB, error) {
	u := *p.admin
	u.Path = "/" + name
	u.RawPath = ""
	sdb, err := sql.Open("pgx", u.String())
	if err != nil {
		return nil, err
	}
	return adminConnection(ctx, sdb)
}

// pgPlaceholder turns keyMatch's '?' into PostgreSQL's $1.
func pgPlaceholder(cond string) string { return strings.Replace(cond, "?", "$1", 1) }

// dropKeys deletes kine's rows of the keys without from database (a template being frozen)
// and checks that none is left.
func (p *postgres) dropKeys(ctx context.Context, database string, without []string) error {
	if len(without) == 0 {
		return nil
	}
	db, err := p.openDatabase(ctx, database)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, k := range without {
		cond, arg := keyMatch(k)
		if _, err := db.ExecContext(ctx, `DELETE FROM kine WHERE `+pgPlaceholder(cond), arg); err != nil {
			return fmt.Errorf("deleting the keys %s from the template: %w", k, err)
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM kine WHERE `+pgPlaceholder(cond), arg).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("the template still holds %d rows of the keys %s", n, k)
		}
	}
	return nil
}

func (p *postgres) keys(ctx context.Context, database, prefix string) ([]string, error) {
	if err := checkName(database); err != nil {
		return nil, err
	}
	db, err := p.openDatabase(ctx, database)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return scanKeys(ctx, db, `SELECT DISTINCT name FROM kine WHERE name LIKE $1 ORDER BY name`, prefix+"%")
}

// templateMark is the comment of a complete template database: written last by freeze.
const templateMark = "kobe golden template"

func (p *postgres) templateComplete(ctx context.Context, template string) (bool, error) {
	db, err := p.open(ctx)
	if err != nil {
		return false, err
	}
	defer db.Close()
	var ok bool
	err = db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database d WHERE d.datname = $1 AND shobj_description(d.oid, 'pg_database') = $2)`, template, templateMark).Scan(&ok)
	return ok, err
}

// freeze copies source's database into template with CREATE DATABASE … TEMPLATE. The copy's
// objects pass from the source's role (dropped with its instance) to the template's own role,
// NOLOGIN: nobody connects to a template but kobe's admin, and each member later takes the
// objects over from it. The database itself is the admin's, so that no member's REASSIGN
// ever takes it.
func (p *postgres) freeze(ctx context.Context, source, template string, without []string) error {
	if err := checkName(source); err != nil {
		return err
	}
	if err := checkName(template); err != nil {
		return err
	}
	if ok, err := p.templateComplete(ctx, template); err != nil || ok {
		return err
	}
	db, err := p.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	// A copy left half-made (no mark) by a crash is made again.
	if _, err := db.ExecContext(ctx, `DROP DATABASE IF EXISTS `+pgQuote(template)+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("DROP DATABASE (a half-made template): %w", err)
	}
	if err := pgEnsureRole(ctx, db, template, "NOLOGIN"); err != nil {
		return err
	}
	// The source instance is stopped; sessions that linger (a pool of connections closing)
	// would make the copy fail: they are ended, and the copy retried while any comes back.
	if _, err := db.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, source); err != nil {
		return fmt.Errorf("ending the sessions of %s: %w", source, err)
	}
	if err := pgCreateDatabase(ctx, db, `CREATE DATABASE `+pgQuote(template)+` TEMPLATE `+pgQuote(source)); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `REVOKE ALL ON DATABASE `+pgQuote(template)+` FROM PUBLIC`); err != nil {
		return fmt.Errorf("REVOKE: %w", err)
	}
	if err := p.inDatabase(ctx, template, `REASSIGN OWNED BY `+pgQuote(source)+` TO `+pgQuote(template)); err != nil {
		return fmt.Errorf("REASSIGN OWNED: %w", err)
	}
	// REASSIGN OWNED moves shared objects too: the source database went to the template's
	// role. It goes back to the admin (it is dropped with its instance).
	if _, err := db.ExecContext(ctx, `ALTER DATABASE `+pgQuote(source)+` OWNER TO CURRENT_USER`); err != nil {
		return fmt.Errorf("ALTER DATABASE OWNER: %w", err)
	}
	// Before the mark: a template is complete only without them.
	if err := p.dropKeys(ctx, template, without); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `COMMENT ON DATABASE `+pgQuote(template)+` IS '`+templateMark+`'`); err != nil {
		return fmt.Errorf("COMMENT ON DATABASE: %w", err)
	}
	return nil
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
