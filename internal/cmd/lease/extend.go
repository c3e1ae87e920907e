package lease

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/internal/cmd/cmdutil"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/output"
)

// ExtendOptions of `kobe lease extend`.
type ExtendOptions struct {
	Factory *factory.Factory
	ID      string
	TTL     time.Duration
	Output  *output.Format
}

// NewCmdExtend builds `kobe lease extend`; runF replaces the behaviour in tests.
func NewCmdExtend(f *factory.Factory, runF func(*ExtendOptions) error) *cobra.Command {
	opts := &ExtendOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "extend ID --ttl DURATION",
		Short: "Extend a Bound lease",
		Long: `Push a Bound lease's expiry further by --ttl. The pool bounds this: a number of extensions per
lease (extension_budget_exhausted once spent) and a ceiling of maxTtl from bind time
(max_ttl_ceiling). A sleeping lease is not extended (sleeping): wake it first
(kobe lease wake ID).`,
		Example: `  kobe lease extend lease-1a2b3c --ttl 30m
  kobe lease extend lease-1a2b3c --ttl 1h -o json`,
		Args: cmdutil.ExactArgs(1, "give the lease id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if err := cmdutil.CheckPositive("--ttl", opts.TTL, true); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return extendRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.TTL, "ttl", 0, "how much longer the lease lasts (required)")
	opts.Output = output.AddFlag(cmd)
	return cmd
}

func extendRun(ctx context.Context, opts *ExtendOptions) error {
	ios := opts.Factory.IOStreams
	c, err := opts.Factory.APIClient()
	if err != nil {
		return err
	}
	res, err := c.ExtendLease(ctx, opts.ID, opts.TTL)
	if err != nil {
		return fmt.Errorf("extend lease %s: %w", opts.ID, err)
	}
	return opts.Output.Print(ios.Out, res, func(w io.Writer) error {
		tty := ios.IsStdoutTTY()
		when := cmdutil.FormatTime(&res.ExpiresAt, tty, time.Now())
		if tty {
			when += " (" + res.ExpiresAt.Local().Format("15:04:05") + ")"
		}
		_, err := fmt.Fprintf(w, "lease %s now expires %s\n", opts.ID, when)
		return err
	})
}
