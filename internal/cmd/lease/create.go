package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdutil"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/output"
)

// FormatKubeconfig is the extra -o of `kobe lease create`: print only the kubeconfig.
const FormatKubeconfig = "kubeconfig"

// CreateOptions of `kobe lease create`.
type CreateOptions struct {
	Factory        *factory.Factory
	Pool           string
	TTL            time.Duration
	Name           string
	MetadataPairs  []string
	Metadata       map[string]string
	Priority       int
	IdempotencyKey string
	Wait           bool
	WaitTimeout    time.Duration
	KubeconfigFile string
	Output         *output.Format
	// Poll is how long each GET asks the server to hold the request while waiting.
	Poll time.Duration
	// PollInterval is the least time between two GETs (default 1s; tests shorten it).
	PollInterval time.Duration
}

// NewCmdCreate builds `kobe lease create`; runF replaces the behaviour in tests.
func NewCmdCreate(f *factory.Factory, runF func(*CreateOptions) error) *cobra.Command {
	opts := &CreateOptions{Factory: f, Poll: 30 * time.Second}
	cmd := &cobra.Command{
		Use:   "create POOL",
		Short: "Lease a cluster from a pool",
		Long: `Ask a pool for a cluster. Without --wait the lease is printed as the API answers it (usually
Pending); with --wait kobe waits until it is Bound (a progress line shows the queue position on
a terminal), up to --wait-timeout. --kubeconfig FILE and -o kubeconfig imply --wait.

--ttl is clamped by the pool's policy; the lease shows the TTL granted. --idempotency-key makes
a retried create return the same lease instead of a second one.`,
		Example: `  kobe lease create ci
  kobe lease create ci --ttl 2h --name my-e2e --wait --kubeconfig ./kubeconfig
  kobe lease create ci --metadata job=1234 --metadata repo=web --idempotency-key job-1234 --wait
  export KUBECONFIG=$(mktemp) && kobe lease create ci -o kubeconfig > "$KUBECONFIG"`,
		Args: cmdutil.ExactArgs(1, "give the pool to lease from, e.g. kobe lease create ci"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Pool = args[0]
			if err := cmdutil.CheckPositive("--ttl", opts.TTL, false); err != nil {
				return err
			}
			if err := cmdutil.CheckPositive("--wait-timeout", opts.WaitTimeout, true); err != nil {
				return err
			}
			md, err := cmdutil.ParseMetadata(opts.MetadataPairs)
			if err != nil {
				return err
			}
			opts.Metadata = md
			if opts.KubeconfigFile != "" || opts.Output.Is(FormatKubeconfig) {
				opts.Wait = true
			}
			if runF != nil {
				return runF(opts)
			}
			return createRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.TTL, "ttl", 0, "how long the lease lasts once Bound (default: the pool's ttl)")
	cmd.Flags().StringVar(&opts.Name, "name", "", "a name (alias) for the lease, unique among your active leases")
	cmd.Flags().StringArrayVar(&opts.MetadataPairs, "metadata", nil, "key=value recorded with the lease (repeatable)")
	cmd.Flags().IntVar(&opts.Priority, "priority", 0, "queue priority: higher is served first when the pool is busy")
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "a retried create with the same key returns the same lease")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "wait until the lease is Bound")
	cmd.Flags().DurationVar(&opts.WaitTimeout, "wait-timeout", 10*time.Minute, "give up waiting after this long (the lease stays queued)")
	cmd.Flags().StringVar(&opts.KubeconfigFile, "kubeconfig", "", "write the kubeconfig to this file (mode 0600); implies --wait")
	opts.Output = output.AddFlag(cmd, output.Table, output.JSON, output.YAML, FormatKubeconfig)
	return cmd
}

func createRun(ctx context.Context, opts *CreateOptions) error {
	ios := opts.Factory.IOStreams
	c, err := opts.Factory.APIClient()
	if err != nil {
		return err
	}
	req := api.LeaseRequest{
		Pool: opts.Pool, Alias: opts.Name, Metadata: opts.Metadata,
		Priority: opts.Priority, IdempotencyKey: opts.IdempotencyKey,
	}
	if opts.TTL > 0 {
		req.TTL = opts.TTL.String()
	}
	started := time.Now()
	l, replayed, err := c.CreateLease(ctx, req)
	if err != nil {
		return fmt.Errorf("lease from pool %s: %w", opts.Pool, err)
	}
	if replayed && ios.IsStderrTTY() {
		fmt.Fprintf(ios.ErrOut, "idempotency key %q: this is lease %s, created earlier\n", opts.IdempotencyKey, l.ID)
	}

	if opts.Wait {
		waitCtx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		l, err = cmdutil.WaitForLease(waitCtx, c, l, cmdutil.WaitOptions{Timeout: opts.WaitTimeout, Poll: opts.Poll, MinInterval: opts.PollInterval, IO: ios, Started: started})
		interrupted := waitCtx.Err() != nil && ctx.Err() == nil
		stop()
		switch {
		case interrupted:
			return &cmdutil.ExitError{Code: 130, Err: fmt.Errorf("interrupted: lease %s is still %s; follow it with `kobe lease get %s --wait` or release it with `kobe lease release %s`", l.ID, l.Phase, l.ID, l.ID)}
		case err != nil:
			var timeout *cmdutil.WaitTimeoutError
			if errors.As(err, &timeout) {
				return fmt.Errorf("%w; follow it with `kobe lease get %s --wait` or release it with `kobe lease release %s`", err, l.ID, l.ID)
			}
			return err
		}
	}
	return printLease(opts.Factory, l, opts.KubeconfigFile, opts.Output)
}

// printLease writes the kubeconfig file if asked, then prints the lease in the chosen format.
func printLease(f *factory.Factory, l api.Lease, kubeconfigFile string, format *output.Format) error {
	ios := f.IOStreams
	if (kubeconfigFile != "" || format.Is(FormatKubeconfig)) && l.Kubeconfig == "" {
		return fmt.Errorf("lease %s is %s but the API sent no kubeconfig", l.ID, l.Phase)
	}
	note := ""
	if kubeconfigFile != "" {
		if err := cmdutil.WritePrivateFile(kubeconfigFile, []byte(l.Kubeconfig)); err != nil {
			return fmt.Errorf("--kubeconfig: %w", err)
		}
		note = fmt.Sprintf("%s (export KUBECONFIG=%s)", kubeconfigFile, kubeconfigFile)
	}
	if format.Is(FormatKubeconfig) {
		_, err := fmt.Fprint(ios.Out, l.Kubeconfig)
		return err
	}
	tty := ios.IsStdoutTTY()
	return format.Print(ios.Out, l, func(w io.Writer) error {
		return describe(w, l, tty, time.Now(), note)
	})
}
