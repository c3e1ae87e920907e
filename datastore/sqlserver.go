package datastore

import (
	"context"
	"database/sql"
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
