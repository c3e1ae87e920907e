package datastore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// mysqlServer provisions on MySQL and MariaDB. Users are created for any host ('name'@'%'):
// kine or a k3s server connects from wherever it runs.
type mysqlServer struct {
	admin *mysql.Config
}

// newMySQL accepts kine's form, mysql://user:pass@tcp(host:3306)/[db][?params], and the URL
// form mysql://user:pass@host:3306/.
func newMySQL(adminURL string) (*mysqlServer, error) {
	rest := strings.TrimPrefix(adminURL, "mysql://")
	cfg, err := mysql.ParseDSN(rest)
	if err != nil || cfg.Net == "" {
		u, uerr := url.Parse(adminURL)
		if uerr != nil || u.Host == "" {
			return nil, errors.New("not a MySQL DSN: use mysql://user:password@tcp(host:3306)/ (kine's form) or mysql://user:password@host:3306/")
		}
		cfg = mysql.NewConfig()
		cfg.Net, cfg.Addr = "tcp", u.Host
		if u.Port() == "" {
			cfg.Addr = u.Host + ":3306"
		}
		if u.User != nil {
			cfg.User = u.User.Username()
			cfg.Passwd, _ = u.User.Password()
		}
	}
	if cfg.User == "" {
		return nil, errors.New("missing user (mysql://user:password@tcp(host:3306)/)")
	}
	if cfg.Net != "tcp" {
		return nil, fmt.Errorf("network %q: only tcp(host:port) is supported (an instance's kine must reach the server over the network)", cfg.Net)
	}
	return &mysqlServer{admin: cfg}, nil
}

func (m *mysqlServer) nameLimit() int { return mysqlNameLimit }

func (m *mysqlServer) open(ctx context.Context) (*sql.DB, error) {
	cfg := m.admin.Clone()
	cfg.DBName = ""
	cfg.Timeout = 10 * time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return adminConnection(ctx, sql.OpenDB(conn))
}

func (m *mysqlServer) ping(ctx context.Context) error { return pingWith(ctx, m.open) }

// In GRANT … ON `db`.*, '_' and '%' are wildcards: kobe_a_1 would also grant kobeXaX1. The
// database name is escaped there, and only there.
func grantPattern(name string) string { return strings.ReplaceAll(name, "_", `\_`) }

func (m *mysqlServer) provision(ctx context.Context, name, password string) (DSN, error) {
	if err := checkName(name); err != nil {
		return DSN{}, err
	}
	db, err := m.open(ctx)
	if err != nil {
		return DSN{}, err
	}
	defer db.Close()
	user := "'" + name + "'@'%'"
	// Names are [a-z0-9_] and passwords hex (checked/generated here): no quoting can break.
	for _, st := range []struct{ what, sql string }{
		{"CREATE DATABASE", "CREATE DATABASE IF NOT EXISTS `" + name + "`"},
		{"CREATE USER", "CREATE USER IF NOT EXISTS " + user + " IDENTIFIED BY '" + password + "'"},
		{"ALTER USER", "ALTER USER " + user + " IDENTIFIED BY '" + password + "'"},
		{"GRANT", "GRANT ALL PRIVILEGES ON `" + grantPattern(name) + "`.* TO " + user},
	} {
		if _, err := db.ExecContext(ctx, st.sql); err != nil {
			return DSN{}, fmt.Errorf("%s: %w", st.what, err)
		}
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = name, password
	cfg.Net, cfg.Addr = m.admin.Net, m.admin.Addr
	cfg.DBName = name
	cfg.TLSConfig = m.admin.TLSConfig
	return NewDSN("mysql://" + cfg.FormatDSN()), nil
}

func (m *mysqlServer) drop(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	db, err := m.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	// Dropping the user first keeps it from logging in again; its open sessions are ended
	// (a dropped user's sessions would otherwise live on, and hold the database's tables).
	if _, err := db.ExecContext(ctx, "DROP USER IF EXISTS '"+name+"'@'%'"); err != nil {
		return fmt.Errorf("DROP USER: %w", err)
	}
	rows, err := db.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ? OR DB = ?", name, name)
	if err != nil {
		return fmt.Errorf("listing the sessions of %s: %w", name, err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		_, _ = db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)) // gone already is fine
	}
	if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
		return fmt.Errorf("DROP DATABASE: %w", err)
	}
	return nil
}

func (m *mysqlServer) objects(ctx context.Context, prefix string) ([]string, error) {
	return namedObjects(ctx, m.open, prefix, []objectQuery{
		{"database", "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA ORDER BY SCHEMA_NAME"},
		{"user", "SELECT DISTINCT User FROM mysql.user ORDER BY User"},
	})
}

// mysqlTemplateMark is a table that only a complete template holds: written last by freeze,
// never copied into a member.
const mysqlTemplateMark = "kobe_golden_template"

// tableName is what a copied table may be called (kine's is "kine"): anything else is refused
// rather than quoted into a statement.
var tableName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

func (m *mysqlServer) templateComplete(ctx context.Context, template string) (bool, error) {
	db, err := m.open(ctx)
	if err != nil {
		return false, err
	}
	defer db.Close()
	var n int
	err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", template, mysqlTemplateMark).Scan(&n)
	return n > 0, err
}

// copyTables copies every table of from into to (which exists), replacing any of the same name.
func copyTables(ctx context.Context, db *sql.DB, from, to string) error {
	rows, err := db.QueryContext(ctx, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' AND TABLE_NAME <> ?", from, mysqlTemplateMark)
	if err != nil {
		return err
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return err
		}
		tables = append(tables, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, t := range tables {
		if !tableName.MatchString(t) {
			return fmt.Errorf("refusing to copy table %q of %s (unexpected name)", t, from)
		}
		for _, st := range []string{
			"DROP TABLE IF EXISTS `" + to + "`.`" + t + "`",
			"CREATE TABLE `" + to + "`.`" + t + "` LIKE `" + from + "`.`" + t + "`",
			"INSERT INTO `" + to + "`.`" + t + "` SELECT * FROM `" + from + "`.`" + t + "`",
		} {
			if _, err := db.ExecContext(ctx, st); err != nil {
				return fmt.Errorf("copying table %s of %s: %w", t, from, err)
			}
		}
	}
	return nil
}

// freeze copies the source's tables into the template database (MySQL has no database copy).
// The template has no user: nothing but kobe's admin ever reads it.
func (m *mysqlServer) freeze(ctx context.Context, source, template string, without []string) error {
	if err := checkName(source); err != nil {
		return err
	}
	if err := checkName(template); err != nil {
		return err
	}
	if ok, err := m.templateComplete(ctx, template); err != nil || ok {
		return err
	}
	db, err := m.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, st := range []string{
		"DROP DATABASE IF EXISTS `" + template + "`", // a copy left half-made by a crash
		"CREATE DATABASE `" + template + "`",
	} {
		if _, err := db.ExecContext(ctx, st); err != nil {
			return err
		}
	}
	if err := copyTables(ctx, db, source, template); err != nil {
		return err
	}
	// Before the mark: a template is complete only without them.
	for _, k := range without {
		cond, arg := keyMatch(k)
		if _, err := db.ExecContext(ctx, "DELETE FROM `"+template+"`.`kine` WHERE "+cond, arg); err != nil {
			return fmt.Errorf("deleting the keys %s from the template: %w", k, err)
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+template+"`.`kine` WHERE "+cond, arg).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("the template still holds %d rows of the keys %s", n, k)
		}
	}
	_, err = db.ExecContext(ctx, "CREATE TABLE `"+template+"`.`"+mysqlTemplateMark+"` (id INT)")
	return err
}

// provisionFrom is provision, then the template's tables copied into the new database.
func (m *mysqlServer) provisionFrom(ctx context.Context, name, password, template string) (DSN, error) {
	if err := checkName(template); err != nil {
		return DSN{}, err
	}
	dsn, err := m.provision(ctx, name, password)
	if err != nil {
		return DSN{}, err
	}
	db, err := m.open(ctx)
	if err != nil {
		return DSN{}, err
	}
	defer db.Close()
	if err := copyTables(ctx, db, template, name); err != nil {
		return DSN{}, err
	}
	return dsn, nil
}

func (m *mysqlServer) keys(ctx context.Context, database, prefix string) ([]string, error) {
	if err := checkName(database); err != nil {
		return nil, err
	}
	db, err := m.open(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return scanKeys(ctx, db, "SELECT DISTINCT name FROM `"+database+"`.`kine` WHERE name LIKE ? ORDER BY name", prefix+"%")
}
