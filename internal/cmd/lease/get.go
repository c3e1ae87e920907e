package lease

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/internal/cmd/cmdutil"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/output"
)

// GetOptions of `kobe lease get`.
type GetOptions struct {
	Factory     *factory.Factory
	ID          string
	Wait        bool
	WaitTimeout time.Duration
	Output      *output.Format
	Poll        time.Duration
	// PollInterval is the least time between two GETs (default 1s; tests shorten it).
	PollInterval time.Duration
}

// NewCmdGet builds `kobe lease get`; runF replaces the behaviour in tests.
func NewCmdGet(f *factory.Factory, runF func(*GetOptions) error) *cobra.Command {
	opts := &GetOptions{Factory: f, Poll: 30 * time.Second}
	cmd := &cobra.Command{
		Use:   "get ID|NAME",
		Short: "Show a lease (by id or name); with --wait, once it is Bound",
		Example: `  kobe lease get lease-1a2b3c
  kobe lease get my-e2e --wait
  kobe lease get my-e2e -o json`,
		Args: cmdutil.ExactArgs(1, "give the lease id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if err := cmdutil.CheckPositive("--wait-timeout", opts.WaitTimeout, true); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return getRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "wait until the lease is Bound (or ends)")
	cmd.Flags().DurationVar(&opts.WaitTimeout, "wait-timeout", 10*time.Minute, "give up waiting after this long")
	opts.Output = output.AddFlag(cmd)
	return cmd
}

func getRun(ctx context.Context, opts *GetOptions) error {
	ios := opts.Factory.IOStreams
	c, err := opts.Factory.APIClient()
	if err != nil {
		return err
	}
	l, err := c.GetLease(ctx, opts.ID, 0)
	if err != nil {
		return err
	}
	if opts.Wait {
		if l, err = cmdutil.WaitForLease(ctx, c, l, cmdutil.WaitOptions{Timeout: opts.WaitTimeout, Poll: opts.Poll, MinInterval: opts.PollInterval, IO: ios, Started: l.CreatedAt}); err != nil {
			return err
		}
	}
	tty := ios.IsStdoutTTY()
	return opts.Output.Print(ios.Out, l, func(w io.Writer) error {
		return describe(w, l, tty, time.Now(), "")
	})
}
