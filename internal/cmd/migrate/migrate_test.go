package migrate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/internal/cmd/cmdtest"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite/dbtest"
)

func testFactory() *factory.Factory {
	ios, _, _, _ := iostreams.Test()
	return &factory.Factory{IOStreams: ios}
}

func TestFlags(t *testing.T) {
	t.Setenv("KOBE_STORE", "")
	var status *StatusOptions
	f := testFactory()
	require.NoError(t, cmdtest.Run(NewCmdStatus(f, func(o *StatusOptions) error { status = o; return nil }),
		"--store", "sqlite:///tmp/kobe.db", "-o", "json"))
	assert.Equal(t, "sqlite:///tmp/kobe.db", status.Store)
	assert.Equal(t, "json", status.Output.String())

	t.Setenv("KOBE_STORE", "postgres://kobe:pw@db/kobe")
	var up *UpOptions
	require.NoError(t, cmdtest.Run(NewCmdUp(f, func(o *UpOptions) error { up = o; return nil })))
	assert.Equal(t, "postgres://kobe:pw@db/kobe", up.Store, "KOBE_STORE when --store is not given")
	require.NoError(t, cmdtest.Run(NewCmdUp(f, func(o *UpOptions) error { up = o; return nil }), "--store", "sqlite:///x.db"))
	assert.Equal(t, "sqlite:///x.db", up.Store, "the flag wins")

	t.Setenv("KOBE_STORE", "")
	for _, tc := range []struct {
		cmd  func(*bool) *cobra.Command
		args []string
		want string
	}{
		{func(ran *bool) *cobra.Command {
			return NewCmdUp(f, func(*UpOptions) error { *ran = true; return nil })
		}, nil, "up: --store is required (postgres://user@host:5432/kobe or sqlite:///path/kobe.db; env KOBE_STORE)"},
		{func(ran *bool) *cobra.Command {
			return NewCmdStatus(f, func(*StatusOptions) error { *ran = true; return nil })
		}, []string{"--store", "mysql://db/kobe"}, "unsupported scheme"},
		{func(ran *bool) *cobra.Command {
			return NewCmdStatus(f, func(*StatusOptions) error { *ran = true; return nil })
		}, []string{"--store", "sqlite:///x.db", "extra"}, "unknown command"},
		{func(ran *bool) *cobra.Command {
			return NewCmdUp(f, func(*UpOptions) error { *ran = true; return nil })
		}, []string{"--store", "sqlite:///x.db", "-o", "table"}, `-o "table": must be text, json or yaml`},
	} {
		ran := false
		err := cmdtest.Run(tc.cmd(&ran), tc.args...)
		require.Error(t, err, tc.args)
		assert.Contains(t, err.Error(), tc.want)
		assert.False(t, ran, "nothing runs on bad input: %v", tc.args)
	}
}

// kobe migrate version reads no store: the number alone when piped, a sentence on a terminal,
// every migration of both drivers in JSON.
func TestVersion(t *testing.T) {
	ios, _, out, _ := iostreams.Test()
	f := &factory.Factory{IOStreams: ios}
	require.NoError(t, cmdtest.Run(NewCmdVersion(f, nil)))
	assert.Equal(t, fmt.Sprintf("%d\n", store.ExpectedSchemaVersion()), out.String())

	out.Reset()
	ios.SetStdoutTTY(true)
	require.NoError(t, cmdtest.Run(NewCmdVersion(f, nil)))
	assert.Equal(t, "kobe v0.1.0 expects schema version 12 (11 migrations, the last 0012_sealing_key.sql)\n", out.String())

	out.Reset()
	require.NoError(t, cmdtest.Run(NewCmdVersion(f, nil), "-o", "json"))
	var v VersionView
	require.NoError(t, json.Unmarshal(out.Bytes(), &v))
	assert.Equal(t, 12, v.SchemaVersion)
	assert.Len(t, v.Migrations["postgres"], 11)
	assert.Equal(t, v.Migrations["postgres"], v.Migrations["sqlite"])
}

// status, up, status again and up again through the commands, on a real store of each driver,
// as a terminal and as a pipe shows them.
func TestStatusAndUpOnRealStores(t *testing.T) {
	for name, newDSN := range dbtest.StoreDSNs() {
		t.Run(name, func(t *testing.T) {
			dsn := newDSN(t)
			shown := store.RedactDSN(dsn)
			ios, _, out, _ := iostreams.Test()
			f := &factory.Factory{IOStreams: ios}

			ios.SetStdoutTTY(true)
			require.NoError(t, cmdtest.Run(NewCmdStatus(f, nil), "--store", dsn))
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			assert.Equal(t, "Store    "+shown+" ("+name+")", lines[0])
			assert.Equal(t, "Schema   none yet; this kobe expects version 12: kobe migrate up", lines[1])
			assert.Regexp(t, `^VERSION +MIGRATION +STATE$`, lines[3])
			assert.Regexp(t, `^1 +0001_init.sql +pending$`, lines[4])
			assert.Len(t, lines, 4+11)

			out.Reset()
			require.NoError(t, cmdtest.Run(NewCmdUp(f, nil), "--store", dsn))
			lines = strings.Split(strings.TrimSpace(out.String()), "\n")
			require.Len(t, lines, 12)
			assert.Equal(t, "applied 0001_init.sql", lines[0])
			assert.Equal(t, "applied 0011_pool_managed_by.sql", lines[9])
			assert.Equal(t, "applied 0012_sealing_key.sql", lines[10])
			assert.Equal(t, "store "+shown+": schema version 12", lines[11])

			out.Reset()
			require.NoError(t, cmdtest.Run(NewCmdUp(f, nil), "--store", dsn))
			assert.Equal(t, "store "+shown+": schema version 12, up to date: nothing to apply\n", out.String())

			out.Reset()
			require.NoError(t, cmdtest.Run(NewCmdStatus(f, nil), "--store", dsn))
			assert.Contains(t, out.String(), "Schema   version 12, up to date\n")
			assert.Regexp(t, `\n12 +0012_sealing_key.sql +applied 20\d\d-`, out.String())

			// Piped: the table alone, tab-separated; up prints only what it applied (nothing).
			ios.SetStdoutTTY(false)
			out.Reset()
			require.NoError(t, cmdtest.Run(NewCmdStatus(f, nil), "--store", dsn))
			lines = strings.Split(strings.TrimSpace(out.String()), "\n")
			assert.Equal(t, "VERSION\tMIGRATION\tSTATE", lines[0])
			assert.Regexp(t, "^1\t0001_init.sql\tapplied ", lines[1])
			out.Reset()
			require.NoError(t, cmdtest.Run(NewCmdUp(f, nil), "--store", dsn))
			assert.Empty(t, out.String())

			out.Reset()
			require.NoError(t, cmdtest.Run(NewCmdStatus(f, nil), "--store", dsn, "-o", "json"))
			var st StatusView
			require.NoError(t, json.Unmarshal(out.Bytes(), &st))
			assert.True(t, st.UpToDate)
			assert.Equal(t, 12, st.Current)
			assert.Equal(t, shown, st.Store)
			assert.Len(t, st.Applied, 11)
			assert.Empty(t, st.Pending)
		})
	}
}

// A store a newer kobe migrated: status says so, up refuses and names what to do.
func TestUpRefusesANewerSchema(t *testing.T) {
	dsn := "sqlite://" + t.TempDir() + "/kobe.db"
	ios, _, out, _ := iostreams.Test()
	f := &factory.Factory{IOStreams: ios}
	require.NoError(t, cmdtest.Run(NewCmdUp(f, nil), "--store", dsn))
	_, err := dbtest.RawStoreSQL(t, dsn).Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (13, '0013_next.sql', '2027-01-01T00:00:00Z')`)
	require.NoError(t, err)

	err = cmdtest.Run(NewCmdUp(f, nil), "--store", dsn)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "its schema is at version 13, newer than this kobe knows (up to 12; 0013_next.sql applied by a newer kobe)")

	ios.SetStdoutTTY(true)
	out.Reset()
	require.NoError(t, cmdtest.Run(NewCmdStatus(f, nil), "--store", dsn))
	assert.Contains(t, out.String(), "Schema   version 13, newer than this kobe knows (up to 12): run the kobe that migrated it, or a newer one\n")
	assert.Regexp(t, `\n13 +0013_next.sql +unknown \(applied 2027-01-01T00:00:00Z by a newer kobe\)\n`, out.String())
}
