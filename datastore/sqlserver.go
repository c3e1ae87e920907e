package datastore

import (
	"context"
	"database/sql"
	"strings"
	"time"
)

// What the SQL servers (PostgreSQL, MySQL/MariaDB) share: kobe's admin connection to them.

// adminConnection makes db the admin connection of one operation (a single connection: the
// statements run in order on one session) and checks that the server answers within 10 s;
// db is closed when it does not.
func adminConnection(ctx context.Context, db *sql.DB) (*sql.DB, error) {
	db.SetMaxOpenConns(1)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// pingWith opens an admin connection with open and closes it: the server answers and takes
// kobe's admin credentials.
func pingWith(ctx context.Context, open func(context.Context) (*sql.DB, error)) error {
	db, err := open(ctx)
	if err != nil {
		return err
	}
	return db.Close()
}

// objectQuery lists the names of one kind of server object (databases, roles or users).
type objectQuery struct{ kind, sql string }

// namedObjects lists what exists on the server whose name starts with prefix, as "<kind> <name>".
func namedObjects(ctx context.Context, open func(context.Context) (*sql.DB, error), prefix string, queries []objectQuery) ([]string, error) {
	db, err := open(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var out []string
	for _, q := range queries {
		rows, err := db.QueryContext(ctx, q.sql)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				rows.Close()
				return nil, err
			}
			if strings.HasPrefix(n, prefix) {
				out = append(out, q.kind+" "+n)
			}
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// scanKeys runs a query of one string column (kine key names) and returns its rows.
func scanKeys(ctx context.Context, db *sql.DB, query string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}
