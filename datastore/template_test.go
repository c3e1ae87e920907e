package datastore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/datastore"
)

// TestGoldenTemplateOnRealServers: on PostgreSQL and MariaDB, a builder's table (as kine's)
// frozen into a template is in each member's copy; each member writes its own copy, owns it,
// and cannot open the template or another member's database; dropping the members, the
// template and the builder leaves nothing.
func TestGoldenTemplateOnRealServers(t *testing.T) {
	ctx := context.Background()
	for _, driver := range []datastore.Driver{datastore.Postgres, datastore.MySQL} {
		t.Run(string(driver), func(t *testing.T) {
			s := sqlServer(t, driver)
			require.True(t, s.SupportsTemplates())
			prefix := testPrefix()
			builder, tpl, idA, idB := prefix+"build", prefix+"golden", prefix+"a", prefix+"b"
			t.Cleanup(func() {
				for _, id := range []string{idA, idB, tpl, builder} {
					_ = s.Drop(ctx, id)
				}
			})
			src, err := s.Provision(ctx, builder)
			require.NoError(t, err)
			sdb := openInstance(t, src)
			_, err = sdb.ExecContext(ctx, "CREATE TABLE kine (id INTEGER PRIMARY KEY, name VARCHAR(100))")
			require.NoError(t, err)
			_, err = sdb.ExecContext(ctx, "INSERT INTO kine VALUES (1, '/registry/namespaces/golden')")
			require.NoError(t, err)
			require.NoError(t, sdb.Close(), "the builder is stopped before it is frozen")

			ready, err := s.TemplateReady(ctx, tpl)
			require.NoError(t, err)
			assert.False(t, ready)
			_, err = s.ProvisionFrom(ctx, idA, tpl)
			require.Error(t, err, "no member from a template that is not frozen")
			require.NoError(t, s.FreezeTemplate(ctx, builder, tpl))
			require.NoError(t, s.FreezeTemplate(ctx, builder, tpl), "twice is fine")
			ready, err = s.TemplateReady(ctx, tpl)
			require.NoError(t, err)
			assert.True(t, ready)
			require.NoError(t, s.Drop(ctx, builder), "the builder goes; its template stays")

			a, err := s.ProvisionFrom(ctx, idA, tpl)
			require.NoError(t, err)
			b, err := s.ProvisionFrom(ctx, idB, tpl)
			require.NoError(t, err)
			for _, m := range []datastore.Instance{a, b} {
				db := openInstance(t, m)
				var name string
				require.NoError(t, db.QueryRowContext(ctx, "SELECT name FROM kine WHERE id = 1").Scan(&name))
				assert.Equal(t, "/registry/namespaces/golden", name, "the golden row is in %s", m.Name)
				_, err = db.ExecContext(ctx, "INSERT INTO kine VALUES (2, '"+m.Name+"')")
				require.NoError(t, err, "%s writes its own copy", m.Name)
				_, err = db.ExecContext(ctx, "ALTER TABLE kine ADD COLUMN extra INTEGER")
				require.NoError(t, err, "%s owns its copy", m.Name)
			}
			var n int
			require.NoError(t, openInstance(t, a).QueryRowContext(ctx, "SELECT COUNT(*) FROM kine").Scan(&n))
			assert.Equal(t, 2, n, "A sees its own rows, not B's")

			// A's credentials against B's database and against the template: refused.
			for _, other := range []string{b.Name, strings.Replace(a.Name, "_a", "_golden", 1)} {
				crossed := a
				raw := a.DSN.Reveal()
				i := strings.LastIndex(raw, "/"+a.Name)
				crossed.DSN = datastore.NewDSN(raw[:i] + "/" + other + raw[i+len(a.Name)+1:])
				require.Error(t, openInstance(t, crossed).PingContext(ctx), "A's DSN cannot open %s", other)
			}

			for _, id := range []string{idA, idB, tpl} {
				require.NoError(t, s.Drop(ctx, id))
			}
			left, err := s.Leftovers(ctx, prefix)
			require.NoError(t, err)
			assert.Empty(t, left)
		})
	}
}

// TestNATSRefusesGoldenTemplates: NATS cannot copy a bucket with kine's revisions.
func TestNATSRefusesGoldenTemplates(t *testing.T) {
	s, err := datastore.Parse("nats://127.0.0.1:4222")
	require.NoError(t, err)
	assert.False(t, s.SupportsTemplates())
	err = s.FreezeTemplate(context.Background(), "a", "b")
	assert.True(t, errors.Is(err, datastore.ErrTemplatesUnsupported), "%v", err)
}

// TestFreezeTemplateWithoutKeys: on PostgreSQL and MariaDB, keys left out of a template (a
// prefix ending in '/', and an exact key) are in neither the template nor a member made from
// it, while every other key is, and the builder keeps them all; a key that is not a plain kine
// key is refused before anything is made.
func TestFreezeTemplateWithoutKeys(t *testing.T) {
	ctx := context.Background()
	for _, driver := range []datastore.Driver{datastore.Postgres, datastore.MySQL} {
		t.Run(string(driver), func(t *testing.T) {
			s := sqlServer(t, driver)
			prefix := testPrefix()
			builder, tpl, member := prefix+"build", prefix+"golden", prefix+"m"
			t.Cleanup(func() {
				for _, id := range []string{member, tpl, builder} {
					_ = s.Drop(ctx, id)
				}
			})
			src, err := s.Provision(ctx, builder)
			require.NoError(t, err)
			sdb := openInstance(t, src)
			_, err = sdb.ExecContext(ctx, "CREATE TABLE kine (id INTEGER PRIMARY KEY, name VARCHAR(100))")
			require.NoError(t, err)
			all := []string{"/bootstrap/0123456789ab", "/bootstrap/ba9876543210", "/registry/namespaces/golden",
				"/registry/secrets/kube-system/k3s-serving", "/registry/secrets/kube-system/k3s-serving2"}
			for i, k := range all {
				_, err = sdb.ExecContext(ctx, fmt.Sprintf("INSERT INTO kine VALUES (%d, '%s')", i+1, k))
				require.NoError(t, err)
			}
			// A second revision of a key: every row of it goes.
			_, err = sdb.ExecContext(ctx, "INSERT INTO kine VALUES (10, '/bootstrap/0123456789ab')")
			require.NoError(t, err)
			require.NoError(t, sdb.Close())

			err = s.FreezeTemplate(ctx, builder, tpl, "/bootstrap/%")
			require.Error(t, err, "a LIKE wildcard is not a key")
			ready, err := s.TemplateReady(ctx, tpl)
			require.NoError(t, err)
			assert.False(t, ready, "nothing frozen by a refused call")

			without := []string{"/bootstrap/", "/registry/secrets/kube-system/k3s-serving"}
			require.NoError(t, s.FreezeTemplate(ctx, builder, tpl, without...))
			kept := []string{"/registry/namespaces/golden", "/registry/secrets/kube-system/k3s-serving2"}
			got, err := s.TemplateKeys(ctx, tpl, "/")
			require.NoError(t, err)
			assert.Equal(t, kept, got, "the template")
			// TemplateLeavesOut, the rule in Go, agrees with the SQL on every key.
			var keptByRule []string
			for _, k := range all {
				if !datastore.TemplateLeavesOut(k, without...) {
					keptByRule = append(keptByRule, k)
				}
			}
			assert.Equal(t, got, keptByRule, "TemplateLeavesOut says what the SQL keeps")
			got, err = s.TemplateKeys(ctx, builder, "/")
			require.NoError(t, err)
			assert.Equal(t, all, got, "the builder keeps its keys")
			_, err = s.ProvisionFrom(ctx, member, tpl)
			require.NoError(t, err)
			got, err = s.TemplateKeys(ctx, member, "/")
			require.NoError(t, err)
			assert.Equal(t, kept, got, "a member made from the template")
		})
	}
}
