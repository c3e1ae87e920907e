package dbtest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Admin URLs of the shared datastore servers the datastore tests provision on, in the form an
// operator gives kobe (and kine accepts). KOBE_TEST_POSTGRES, KOBE_TEST_MYSQL and
// KOBE_TEST_NATS override them.
const (
	DefaultMySQLAdminURL = "mysql://root:@tcp(127.0.0.1:3306)/"
	DefaultNATSURL       = "nats://127.0.0.1:4222"
)

// PostgresAdminURL returns the admin URL of the test PostgreSQL server (as PostgresDSN finds
// it), after checking that it answers: skipped without one, failed under
// KOBE_TEST_REQUIRE_POSTGRES=1.
func PostgresAdminURL(t testing.TB) string {
	t.Helper()
	admin := os.Getenv("KOBE_TEST_POSTGRES")
	if admin == "" {
		admin = DefaultPostgresAdminDSN
	}
	db, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatalf("KOBE_TEST_POSTGRES: %v", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		unavailable(t, "KOBE_TEST_REQUIRE_POSTGRES", fmt.Sprintf("PostgreSQL is needed for this test but %s is not reachable (%v). "+
			"Start one (hack/postgres.sh ensure, as .ci/run does) or point KOBE_TEST_POSTGRES at an admin DSN.", redact(admin), err))
	}
	return admin
}

// MySQLAdminURL returns the admin URL of the test MySQL/MariaDB server after checking that it
// answers: skipped without one, failed under KOBE_TEST_REQUIRE_MARIADB=1 (set by CI).
func MySQLAdminURL(t testing.TB) string {
	t.Helper()
	admin := os.Getenv("KOBE_TEST_MYSQL")
	if admin == "" {
		admin = DefaultMySQLAdminURL
	}
	cfg, err := mysql.ParseDSN(strings.TrimPrefix(admin, "mysql://"))
	if err != nil {
		t.Fatalf("KOBE_TEST_MYSQL: %v", err)
	}
	cfg.Timeout = 5 * time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("KOBE_TEST_MYSQL: %v", err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		unavailable(t, "KOBE_TEST_REQUIRE_MARIADB", fmt.Sprintf("MariaDB/MySQL is needed for this test but %s is not reachable as root with an empty password (%v). "+
			"Start one (hack/datastores.sh ensure, as .ci/run does) or point KOBE_TEST_MYSQL at an admin URL (mysql://user:pass@tcp(host:3306)/).", cfg.Addr, err))
	}
	return admin
}

// NATSURL returns the URL of the test NATS server after checking that it accepts connections:
// skipped without one, failed under KOBE_TEST_REQUIRE_NATS=1 (set by CI). Whether JetStream is
// enabled is the datastore package's own check (its Ping), which the tests call.
func NATSURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("KOBE_TEST_NATS")
	if u == "" {
		u = DefaultNATSURL
	}
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatalf("KOBE_TEST_NATS: %v", err)
	}
	c, err := net.DialTimeout("tcp", parsed.Host, 5*time.Second)
	if err != nil {
		unavailable(t, "KOBE_TEST_REQUIRE_NATS", fmt.Sprintf("NATS with JetStream is needed for this test but %s is not reachable (%v). "+
			"Start one (hack/datastores.sh ensure, as .ci/run does: nats-server -js) or point KOBE_TEST_NATS at a nats:// URL.", parsed.Host, err))
	}
	c.Close()
	return u
}

// unavailable skips the test, or fails it when requireVar is "1" (CI, where the server must be there).
func unavailable(t testing.TB, requireVar, msg string) {
	t.Helper()
	if os.Getenv(requireVar) == "1" {
		t.Fatalf("%s (%s=1)", msg, requireVar)
	}
	t.Skip(msg)
}
