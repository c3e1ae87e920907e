package testsuite

import (
	"testing"

	"github.com/kunobi-ninja/kobe/testsuite/dbtest"
)

// DefaultPostgresAdminDSN: see dbtest.DefaultPostgresAdminDSN.
const DefaultPostgresAdminDSN = dbtest.DefaultPostgresAdminDSN

// PostgresDSN creates a fresh test database: see dbtest.PostgresDSN.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	return dbtest.PostgresDSN(t)
}
