// Package migrate implements `kobe migrate`: the schema of kobe's store, read (status), upgraded
// (up), and the version this kobe expects (version).
package migrate

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/internal/buildinfo"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/output"
	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// NewCmdMigrate returns `kobe migrate` and its subcommands.
func NewCmdMigrate(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate <command>",
		Short: "Upgrade the schema of kobe's store: status, up, version",
		Long: `kobe server and kobe worker run only on a store whose schema is the one they were built
for, and never change it: an operator upgrades it first with "kobe migrate up", then the
workers, then the API servers (docs/production.md, "Upgrades"). kobe dev migrates its own store
when it starts.

The store is --store, else KOBE_STORE: postgres://user@host:5432/kobe or sqlite:///path/kobe.db.`,
		Example: `  kobe migrate status --store postgres://kobe@db:5432/kobe
  KOBE_STORE=postgres://kobe@db/kobe kobe migrate up
  kobe migrate version`,
	}
	cmd.AddCommand(NewCmdStatus(f, nil), NewCmdUp(f, nil), NewCmdVersion(f, nil))
	return cmd
}

// addStoreFlag registers --store; storeDSN reads it, or KOBE_STORE when it was not given.
func addStoreFlag(cmd *cobra.Command, dsn *string) {
	cmd.Flags().StringVar(dsn, "store", "", "the store's DSN: postgres://user@host/db or sqlite:///path/kobe.db (env "+config.EnvName("store")+")")
}

func storeDSN(cmd *cobra.Command, dsn string) (string, error) {
	if !cmd.Flags().Changed("store") {
		dsn = os.Getenv(config.EnvName("store"))
	}
	if dsn == "" {
		return "", fmt.Errorf("%s: --store is required (postgres://user@host:5432/kobe or sqlite:///path/kobe.db; env %s)",
			cmd.CommandPath(), config.EnvName("store"))
	}
	if _, err := store.ParseDSN(dsn); err != nil {
		return "", err
	}
	return dsn, nil
}

// timeout bounds a migration run: a migration waits for another process migrating the same
// PostgreSQL store (an advisory lock) for up to 5 minutes.
const timeout = 10 * time.Minute

// StatusOptions of `kobe migrate status`.
type StatusOptions struct {
	Factory *factory.Factory
	Store   string
	Output  *output.Format
}

// StatusView is what `kobe migrate status -o json` prints.
type StatusView struct {
	Store string `json:"store"`
	store.SchemaStatus
	UpToDate bool `json:"upToDate"`
}

// NewCmdStatus builds `kobe migrate status`; runF replaces the behaviour in tests.
func NewCmdStatus(f *factory.Factory, runF func(*StatusOptions) error) *cobra.Command {
	opts := &StatusOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the store's schema version, what is applied and what is pending",
		Long: `Show the schema version of the store and every migration: applied (and when), pending (this
kobe carries it and "kobe migrate up" would apply it), or unknown (applied by a newer kobe).
It changes nothing in the store.`,
		Example: `  kobe migrate status --store postgres://kobe@db:5432/kobe
  kobe migrate status --store sqlite:///var/lib/kobe/kobe.db -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dsn, err := storeDSN(cmd, opts.Store)
			if err != nil {
				return err
			}
			opts.Store = dsn
			if runF != nil {
				return runF(opts)
			}
			return statusRun(cmd.Context(), opts)
		},
	}
	addStoreFlag(cmd, &opts.Store)
	opts.Output = output.AddFlag(cmd)
	return cmd
}

func statusRun(ctx context.Context, opts *StatusOptions) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m, err := store.OpenMigrator(ctx, opts.Store)
	if err != nil {
		return err
	}
	defer m.Close()
	st, err := m.Status(ctx)
	if err != nil {
		return err
	}
	ios := opts.Factory.IOStreams
	view := StatusView{Store: m.Store(), SchemaStatus: st, UpToDate: st.UpToDate()}
	return opts.Output.Print(ios.Out, view, func(w io.Writer) error {
		tty := ios.IsStdoutTTY()
		if tty {
			fmt.Fprintf(w, "Store    %s (%s)\nSchema   %s\n\n", view.Store, st.Driver, summary(st))
		}
		return printMigrations(w, st, tty)
	})
}

// summary says in one line where the schema stands and what to do about it.
func summary(st store.SchemaStatus) string {
	switch {
	case len(st.Unknown) > 0:
		return fmt.Sprintf("version %d, newer than this kobe knows (up to %d): run the kobe that migrated it, or a newer one", st.Current, st.Expected)
	case st.Current == 0:
		return fmt.Sprintf("none yet; this kobe expects version %d: kobe migrate up", st.Expected)
	case len(st.Pending) > 0:
		return fmt.Sprintf("version %d; this kobe expects %d: %d pending, kobe migrate up", st.Current, st.Expected, len(st.Pending))
	}
	return fmt.Sprintf("version %d, up to date", st.Current)
}

// printMigrations lists every migration, applied, pending or unknown, by version.
func printMigrations(w io.Writer, st store.SchemaStatus, tty bool) error {
	type row struct {
		version     int
		name, state string
	}
	var rows []row
	for _, a := range st.Applied {
		state := "applied " + a.AppliedAt.UTC().Format(time.RFC3339)
		for _, u := range st.Unknown {
			if u.Version == a.Version {
				state = "unknown (applied " + a.AppliedAt.UTC().Format(time.RFC3339) + " by a newer kobe)"
			}
		}
		rows = append(rows, row{a.Version, a.Name, state})
	}
	for _, p := range st.Pending {
		rows = append(rows, row{p.Version, p.Name, "pending"})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].version < rows[j].version })
	// Aligned on a terminal; one tab between fields for a script.
	var tw io.Writer = w
	var aligned *tabwriter.Writer
	if tty {
		aligned = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		tw = aligned
	}
	fmt.Fprintln(tw, "VERSION\tMIGRATION\tSTATE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\n", r.version, r.name, r.state)
	}
	if aligned != nil {
		return aligned.Flush()
	}
	return nil
}

// UpOptions of `kobe migrate up`.
type UpOptions struct {
	Factory *factory.Factory
	Store   string
	Output  *output.Format
}

// UpView is what `kobe migrate up -o json` prints.
type UpView struct {
	Store   string            `json:"store"`
	Applied []store.Migration `json:"applied"`
	Version int               `json:"version"`
}

// NewCmdUp builds `kobe migrate up`; runF replaces the behaviour in tests.
func NewCmdUp(f *factory.Factory, runF func(*UpOptions) error) *cobra.Command {
	opts := &UpOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration to the store",
		Long: `Apply every migration this kobe carries that the store has not applied, in order, each in
its own transaction; a store with no schema gets all of them (a SQLite file is created). It is
safe to run again (nothing pending: nothing done) and from several places at once (they take
turns). A store whose schema is newer than this kobe knows is refused and left as it is.

Run it before upgrading the workers and the API servers, and take a backup first: a migration
is never undone (docs/production.md, "Upgrades" and "Backup and restore").`,
		Example: `  kobe migrate up --store postgres://kobe@db:5432/kobe
  KOBE_STORE=sqlite:///var/lib/kobe/kobe.db kobe migrate up -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dsn, err := storeDSN(cmd, opts.Store)
			if err != nil {
				return err
			}
			opts.Store = dsn
			if runF != nil {
				return runF(opts)
			}
			return upRun(cmd.Context(), opts)
		},
	}
	addStoreFlag(cmd, &opts.Store)
	opts.Output = output.AddFlag(cmd, "text", output.JSON, output.YAML)
	return cmd
}

func upRun(ctx context.Context, opts *UpOptions) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m, err := store.OpenMigrator(ctx, opts.Store)
	if err != nil {
		return err
	}
	defer m.Close()
	applied, err := m.Up(ctx)
	if err != nil {
		return err
	}
	st, err := m.Status(ctx)
	if err != nil {
		return err
	}
	ios := opts.Factory.IOStreams
	view := UpView{Store: m.Store(), Applied: applied, Version: st.Current}
	return opts.Output.Print(ios.Out, view, func(w io.Writer) error {
		if !ios.IsStdoutTTY() {
			// One line per migration applied, nothing when there was nothing to do.
			for _, a := range applied {
				fmt.Fprintln(w, a.Name)
			}
			return nil
		}
		for _, a := range applied {
			fmt.Fprintf(w, "applied %s\n", a.Name)
		}
		if len(applied) == 0 {
			fmt.Fprintf(w, "store %s: schema version %d, up to date: nothing to apply\n", view.Store, view.Version)
			return nil
		}
		_, err := fmt.Fprintf(w, "store %s: schema version %d\n", view.Store, view.Version)
		return err
	})
}

// VersionOptions of `kobe migrate version`.
type VersionOptions struct {
	Factory *factory.Factory
	Output  *output.Format
}

// VersionView is what `kobe migrate version -o json` prints.
type VersionView struct {
	Release       string `json:"release"`
	SchemaVersion int    `json:"schemaVersion"`
	// Migrations are the migrations of each driver, in order.
	Migrations map[string][]store.Migration `json:"migrations"`
}

// NewCmdVersion builds `kobe migrate version`; runF replaces the behaviour in tests.
func NewCmdVersion(f *factory.Factory, runF func(*VersionOptions) error) *cobra.Command {
	opts := &VersionOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the schema version this kobe expects (and its migrations)",
		Long: `Print the schema version this kobe expects: kobe server and kobe worker start only on a store
at exactly this version. It reads no store. Piped, it prints the number alone.`,
		Example: `  kobe migrate version
  kobe migrate version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return versionRun(opts)
		},
	}
	opts.Output = output.AddFlag(cmd, "text", output.JSON, output.YAML)
	return cmd
}

func versionRun(opts *VersionOptions) error {
	view := VersionView{Release: buildinfo.Get().Version, SchemaVersion: store.ExpectedSchemaVersion(),
		Migrations: map[string][]store.Migration{}}
	for _, driver := range []string{"postgres", "sqlite"} {
		ms, err := store.Migrations(driver)
		if err != nil {
			return err
		}
		view.Migrations[driver] = ms
	}
	ios := opts.Factory.IOStreams
	return opts.Output.Print(ios.Out, view, func(w io.Writer) error {
		if !ios.IsStdoutTTY() {
			_, err := fmt.Fprintln(w, view.SchemaVersion)
			return err
		}
		ms := view.Migrations["postgres"]
		_, err := fmt.Fprintf(w, "kobe %s expects schema version %d (%d migrations, the last %s)\n",
			view.Release, view.SchemaVersion, len(ms), ms[len(ms)-1].Name)
		return err
	})
}
