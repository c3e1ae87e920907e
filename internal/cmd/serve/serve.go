// Package serve implements the long-running commands: `kobe dev`, `kobe server` and `kobe worker`.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/internal/buildinfo"
	"github.com/kunobi-ninja/kobe/internal/cmd/cliconfig"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/internal/devserver"
	"github.com/kunobi-ninja/kobe/internal/logging"
	"github.com/kunobi-ninja/kobe/internal/service"
)

// Options of the serve commands.
type Options struct {
	Factory *factory.Factory
	Mode    config.Mode
	Config  config.Config
	// Down (kobe dev --down) deletes every cluster of --state-dir and exits.
	Down bool
}

// downTimeout bounds `kobe dev --down`: a teardown retries for minutes before giving up.
const downTimeout = 15 * time.Minute

// NewCmdDev builds `kobe dev`.
func NewCmdDev(f *factory.Factory, runF func(*Options) error) *cobra.Command {
	return newCmd(f, config.ModeDev, runF, &cobra.Command{
		Use:   "dev",
		Short: "Run everything in one process: embedded Temporal + Web UI, worker, API and store",
		Long: `Run kobe on this machine with nothing else installed.

One process serves, on loopback:
  - a real Temporal server (SQLite in --state-dir, namespace "default") on --temporal-port,
  - the Temporal Web UI on --ui-port,
  - the kobe worker and the kobe API on --api-address,
  - kobe's store (SQLite in --state-dir, or --store).

Starting again on the same --state-dir resumes every workflow that was in flight.
Ctrl-C stops kobe but not the local clusters it holds: they keep running and are
re-adopted at the next start.

With --down, kobe dev starts on --state-dir (no default pool, no Web UI, free loopback
ports), deletes every cluster it holds there, and exits: every lease still Pending or
Bound is released first (whoever holds it loses the cluster), then every pool is deleted
and drained the way "kobe pool delete" does — each cluster is torn down by its teardown
workflow, verified gone and its store row removed — and kobe waits until every pool
workflow has ended. It prints its progress and a summary; the exit code is 1, naming the
clusters, if any could not be deleted. The pools are deleted too: the next "kobe dev"
starts the default pool afresh.

With --no-worker the process runs no worker: a separate "kobe worker" against
--temporal-port and the same store file (and the dev sealing key) does the work, so that
either process can be stopped or killed apart from the other.

Every flag can also be set with a KOBE_* environment variable (--api-address → KOBE_API_ADDRESS).`,
		Example: `  kobe dev
  kobe dev --state-dir /tmp/kobe --api-address 127.0.0.1:9080
  kobe dev --ephemeral --log-format json
  kobe dev --down                       # delete every cluster of the default state dir
  kobe dev --state-dir /tmp/kobe --down
  kobe dev --state-dir /tmp/kobe --no-worker &
  kobe worker --temporal-address 127.0.0.1:7233 --store sqlite:///tmp/kobe/kobe.db \
    --state-dir /tmp/kobe --secret-key-file /tmp/kobe/secret.key`,
	})
}

// NewCmdServer builds `kobe server`.
func NewCmdServer(f *factory.Factory, runF func(*Options) error) *cobra.Command {
	return newCmd(f, config.ModeServer, runF, &cobra.Command{
		Use:   "server",
		Short: "Run the kobe API server against an external Temporal and store",
		Long: `Run only the kobe API server. It starts workflows on, and reads from, an external
Temporal service (--temporal-address) and store (--store). Run one or more "kobe worker"
processes beside it. Every flag can also be set with a KOBE_* environment variable.`,
		Example: `  kobe server --temporal-address temporal:7233 --store postgres://kobe@db:5432/kobe
  KOBE_STORE=postgres://kobe@db/kobe KOBE_TEMPORAL_ADDRESS=temporal:7233 kobe server`,
	})
}

// NewCmdWorker builds `kobe worker`.
func NewCmdWorker(f *factory.Factory, runF func(*Options) error) *cobra.Command {
	return newCmd(f, config.ModeWorker, runF, &cobra.Command{
		Use:   "worker",
		Short: "Run a kobe worker (workflows and activities) against an external Temporal and store",
		Long: `Run only the kobe worker: it polls kobe's Temporal task queue and runs the workflows and
activities that provision, lease and tear down clusters. It serves /healthz and /metrics on
--metrics-address. Every flag can also be set with a KOBE_* environment variable.`,
		Example: `  kobe worker --temporal-address temporal:7233 --store postgres://kobe@db:5432/kobe
  kobe worker --temporal-address temporal.example:7233 --temporal-tls-cert c.pem --temporal-tls-key k.pem --temporal-tls-ca ca.pem`,
	})
}

func newCmd(f *factory.Factory, mode config.Mode, runF func(*Options) error, cmd *cobra.Command) *cobra.Command {
	opts := &Options{Factory: f, Mode: mode, Config: config.Default()}
	cmd.Args = cobra.NoArgs
	opts.Config.AddFlags(cmd.Flags(), mode)
	if mode == config.ModeDev {
		cmd.Flags().BoolVar(&opts.Down, "down", false, "delete every cluster and pool of --state-dir (releasing its leases), then exit")
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := config.ApplyEnv(cmd.Flags(), os.LookupEnv); err != nil {
			return err
		}
		if err := opts.Config.Validate(mode); err != nil {
			return err
		}
		if opts.Down {
			switch {
			case opts.Config.Ephemeral:
				return errors.New("--down: an --ephemeral kobe keeps no clusters after it stops; nothing to delete")
			case opts.Config.NoWorker:
				return errors.New("--down tears clusters down with its own worker: drop --no-worker (and stop the separate kobe worker)")
			}
		}
		if runF != nil {
			return runF(opts)
		}
		return serveRun(opts)
	}
	return cmd
}

func serveRun(opts *Options) error {
	logger, err := logging.New(opts.Config.LogFormat, opts.Config.LogLevel)
	if err != nil {
		return err
	}
	defer func() { _ = logger.Sync() }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if opts.Down {
		return downRun(ctx, opts, logger)
	}
	p, err := service.Start(ctx, opts.Config, opts.Mode, logger)
	if err != nil {
		return err
	}
	// `kobe dev` writes a CLI context for itself, so that `kobe …` in another shell reaches it
	// with its admin token and no flags. A failure is not fatal: kobe runs, the CLI needs flags.
	contextNote := ""
	if opts.Mode == config.ModeDev && p.AdminTokenFile != "" {
		if err := cliconfig.WriteContext("dev", p.APIURL, p.AdminTokenFile, true); err != nil {
			logger.Warn("could not write the CLI context", zap.Error(err))
		} else if path, err := cliconfig.Path(); err == nil {
			contextNote = fmt.Sprintf("CLI context \"dev\" (current) in %s; admin token in %s", path, p.AdminTokenFile)
		}
	}
	printBanner(opts.Factory.IOStreams.Out, opts, p)
	if contextNote != "" {
		fmt.Fprintf(opts.Factory.IOStreams.Out, "  %s\n", contextNote)
	}
	logger.Info("kobe started", zap.String("mode", string(opts.Mode)), zap.Duration("startup", p.StartupTime))

	select {
	case <-ctx.Done():
	case err = <-p.HTTPDone():
		logger.Error("HTTP server stopped", zap.Error(err))
	}
	stop() // a second Ctrl-C now kills the process the default way
	logger.Info("shutting down")
	t0 := time.Now()
	// Counted while the store is open: what outlives this process, and how to delete it.
	kctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	keeps := p.KeepsRunning(kctx)
	cancel()
	p.Stop()
	logger.Info("stopped", zap.Duration("took", time.Since(t0)))
	if keeps != "" {
		fmt.Fprintf(opts.Factory.IOStreams.Out, "kobe stopped; %s\n", keeps)
	}
	return err
}

// downRun is `kobe dev --down`: start on the state dir without the default pool, the Web UI or
// the usual ports (another kobe may use them), delete everything, stop.
func downRun(ctx context.Context, opts *Options, logger *zap.Logger) error {
	cfg := opts.Config
	cfg.NoDefaultPool, cfg.UIPort = true, 0
	cfg.APIAddress = "127.0.0.1:0"
	port, err := devserver.FreePort("127.0.0.1")
	if err != nil {
		return err
	}
	cfg.TemporalPort = port
	out := opts.Factory.IOStreams.Out
	p, err := service.Start(ctx, cfg, config.ModeDev, logger)
	if err != nil {
		return err
	}
	defer p.Stop()
	fmt.Fprintf(out, "kobe dev --down: deleting every cluster of %s\n", p.StateDir)
	dctx, cancel := context.WithTimeout(ctx, downTimeout)
	defer cancel()
	t0 := time.Now()
	err = p.Down(dctx, out)
	if err != nil {
		return fmt.Errorf("--down: %w", err)
	}
	fmt.Fprintf(out, "done in %s: nothing of %s keeps running\n", time.Since(t0).Round(time.Second), p.StateDir)
	return nil
}

func printBanner(w io.Writer, opts *Options, p *service.Process) {
	bi := buildinfo.Get()
	fmt.Fprintf(w, "kobe %s — %s mode, started in %s\n", bi.Version, opts.Mode, p.StartupTime.Round(time.Millisecond))
	if p.APIURL != "" {
		fmt.Fprintf(w, "  API        %s\n", p.APIURL)
	}
	if p.MetricsURL != "" {
		fmt.Fprintf(w, "  Metrics    %s/metrics\n", p.MetricsURL)
	}
	fmt.Fprintf(w, "  Temporal   %s\n", p.TemporalAddress)
	if p.UIURL != "" {
		fmt.Fprintf(w, "  Web UI     %s\n", p.UIURL)
	}
	fmt.Fprintf(w, "  Store      %s\n", p.StoreDSN)
	switch {
	case opts.Mode == config.ModeDev && opts.Config.Ephemeral:
		fmt.Fprintf(w, "  State      in memory (--ephemeral): nothing is kept\n")
	case p.StateDir != "":
		fmt.Fprintf(w, "  State      %s\n", p.StateDir)
	}
	if opts.Mode == config.ModeDev && opts.Config.NoWorker {
		fmt.Fprintf(w, "  Worker     none (--no-worker); start one with:\n")
		fmt.Fprintf(w, "             kobe worker --temporal-address %s --store %s --state-dir %s --secret-key-file %s\n",
			p.TemporalAddress, p.StoreDSN, opts.Config.StateDir, filepath.Join(opts.Config.StateDir, "secret.key"))
	}
	if opts.Mode != config.ModeWorker {
		fmt.Fprintf(w, "Try: kobe status   kobe lease create dev --wait   kobe run dev -- kubectl get ns   (Ctrl-C stops)\n")
	}
}
