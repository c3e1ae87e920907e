// Package instance implements `kobe instance`: list, get, retry and forget the clusters kobe
// records, Quarantined ones (whose teardown kept failing) in particular.
package instance

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdutil"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/output"
)

// NewCmdInstance returns `kobe instance` and its subcommands.
func NewCmdInstance(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "instance <command>",
		Aliases: []string{"instances"},
		Short:   "Inspect clusters and clean up Quarantined ones: list, get, retry, forget",
		Long: `An instance is one cluster of a pool. When its verified teardown keeps failing it becomes
Quarantined: it stays visible here until its teardown is retried (kobe instance retry) or, after
you cleaned it up by hand, kobe forgets it (kobe instance forget). Listing, reading and retrying
need the pool.admin permission; forgetting needs the admin role.`,
		Example: `  kobe instance list --phase Quarantined
  kobe instance get ci-3
  kobe instance retry ci-3
  kobe instance forget ci-3`,
	}
	cmd.AddCommand(NewCmdList(f, nil), NewCmdGet(f, nil), NewCmdRetry(f, nil), NewCmdForget(f, nil))
	return cmd
}

// ListOptions of `kobe instance list`.
type ListOptions struct {
	Factory *factory.Factory
	Pool    string
	Phase   string
	Host    string
	Output  *output.Format
}

// NewCmdList builds `kobe instance list`; runF replaces the behaviour in tests.
func NewCmdList(f *factory.Factory, runF func(*ListOptions) error) *cobra.Command {
	opts := &ListOptions{Factory: f}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List instances (--phase Quarantined: the ones that need you)",
		Example: `  kobe instance list
  kobe instance list --pool ci --phase Quarantined
  kobe instance list -o json | jq -r '.[].id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Pool, "pool", "", "only this pool's instances")
	cmd.Flags().StringVar(&opts.Phase, "phase", "", "only instances in this phase (Creating, Ready, Deleting, Quarantined)")
	cmd.Flags().StringVar(&opts.Host, "host", "", "only the instances of this kobe host")
	opts.Output = output.AddFlag(cmd)
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	ios := opts.Factory.IOStreams
	c, err := opts.Factory.APIClient()
	if err != nil {
		return err
	}
	is, err := c.ListInstances(ctx, api.InstanceFilter{Pool: opts.Pool, Phase: opts.Phase, Host: opts.Host})
	if err != nil {
		return err
	}
	return opts.Output.Print(ios.Out, is, func(w io.Writer) error {
		if len(is) == 0 {
			if ios.IsStdoutTTY() {
				fmt.Fprintln(ios.ErrOut, "no instances")
			}
			return nil
		}
		now := time.Now()
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPOOL\tBACKEND\tHOST\tPHASE\tUPDATED\tMESSAGE")
		for _, in := range is {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.ID, in.Pool, in.Backend, dash(in.Host), in.Phase,
				cmdutil.FormatTime(&in.UpdatedAt, ios.IsStdoutTTY(), now), truncate(in.Message, 60, ios.IsStdoutTTY()))
		}
		return tw.Flush()
	})
}

// GetOptions of `kobe instance get`.
type GetOptions struct {
	Factory *factory.Factory
	ID      string
	Output  *output.Format
}

// NewCmdGet builds `kobe instance get`; runF replaces the behaviour in tests.
func NewCmdGet(f *factory.Factory, runF func(*GetOptions) error) *cobra.Command {
	opts := &GetOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "Show an instance: pool, host, phase, endpoint, why it is Quarantined",
		Example: `  kobe instance get ci-3
  kobe instance get ci-3 -o yaml`,
		Args: cmdutil.ExactArgs(1, "give the instance id (kobe instance list shows them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return getRun(cmd.Context(), opts)
		},
	}
	opts.Output = output.AddFlag(cmd)
	return cmd
}

func getRun(ctx context.Context, opts *GetOptions) error {
	ios := opts.Factory.IOStreams
	c, err := opts.Factory.APIClient()
	if err != nil {
		return err
	}
	in, err := c.GetInstance(ctx, opts.ID)
	if err != nil {
		return fmt.Errorf("instance %s: %w", opts.ID, err)
	}
	return opts.Output.Print(ios.Out, in, func(w io.Writer) error {
		now, tty := time.Now(), ios.IsStdoutTTY()
		tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
		row := func(k, v string) {
			if v != "" {
				fmt.Fprintf(tw, "%s:\t%s\n", k, v)
			}
		}
		row("ID", in.ID)
		row("Pool", in.Pool)
		row("Backend", in.Backend)
		row("Host", in.Host)
		row("Phase", string(in.Phase))
		row("Endpoint", in.Endpoint)
		row("Message", in.Message)
		row("Created", cmdutil.FormatTime(&in.CreatedAt, tty, now))
		row("Updated", cmdutil.FormatTime(&in.UpdatedAt, tty, now))
		if in.Phase == api.InstanceQuarantined {
			row("Next", "kobe instance retry "+in.ID+", or clean it up by hand and kobe instance forget "+in.ID)
		}
		return tw.Flush()
	})
}

// RetryOptions of `kobe instance retry`.
type RetryOptions struct {
	Factory *factory.Factory
	ID      string
	Output  *output.Format
}

// NewCmdRetry builds `kobe instance retry`; runF replaces the behaviour in tests.
func NewCmdRetry(f *factory.Factory, runF func(*RetryOptions) error) *cobra.Command {
	opts := &RetryOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "retry ID",
		Short: "Retry a Quarantined instance's teardown",
		Long: `Ask kobe to tear a Quarantined instance down again: its pool does it, or, when the pool is
gone, a Teardown workflow on the instance's host. Once the instance is verified gone it disappears
from kobe instance list; if the teardown fails again it stays Quarantined with the new error.`,
		Example: `  kobe instance retry ci-3`,
		Args:    cmdutil.ExactArgs(1, "give the instance id (kobe instance list --phase Quarantined shows them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return retryRun(cmd.Context(), opts)
		},
	}
	opts.Output = output.AddFlag(cmd)
	return cmd
}

func retryRun(ctx context.Context, opts *RetryOptions) error {
	ios := opts.Factory.IOStreams
	c, err := opts.Factory.APIClient()
	if err != nil {
		return err
	}
	res, err := c.RetryTeardown(ctx, opts.ID)
	if err != nil {
		return fmt.Errorf("retry instance %s: %w", opts.ID, err)
	}
	return opts.Output.Print(ios.Out, res, func(w io.Writer) error {
		if !ios.IsStdoutTTY() {
			return nil
		}
		who := "its pool"
		if res.Via == "teardown" {
			who = "workflow " + res.WorkflowID + " (its pool is gone)"
		}
		_, err := fmt.Fprintf(w, "retrying the teardown of %s through %s; kobe instance get %s shows how it goes\n", res.ID, who, res.ID)
		return err
	})
}

// ForgetOptions of `kobe instance forget`.
type ForgetOptions struct {
	Factory *factory.Factory
	ID      string
	Force   bool
}

// NewCmdForget builds `kobe instance forget`; runF replaces the behaviour in tests.
func NewCmdForget(f *factory.Factory, runF func(*ForgetOptions) error) *cobra.Command {
	opts := &ForgetOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "forget ID",
		Short: "Forget a Quarantined instance you cleaned up by hand (admin role)",
		Long: `Drop kobe's record of a Quarantined instance after you removed what was left of it yourself.
kobe does not check that nothing remains: that is why only the admin role may, and why it is
audited. --force forgets an instance in another phase too.`,
		Example: `  kobe instance forget ci-3`,
		Args:    cmdutil.ExactArgs(1, "give the instance id (kobe instance list --phase Quarantined shows them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return forgetRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Force, "force", false, "forget it whatever its phase")
	return cmd
}

func forgetRun(ctx context.Context, opts *ForgetOptions) error {
	ios := opts.Factory.IOStreams
	c, err := opts.Factory.APIClient()
	if err != nil {
		return err
	}
	if err := c.ForgetInstance(ctx, opts.ID, opts.Force); err != nil {
		return fmt.Errorf("forget instance %s: %w", opts.ID, err)
	}
	if ios.IsStdoutTTY() {
		fmt.Fprintf(ios.Out, "forgot instance %s\n", opts.ID)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// truncate shortens a message for a terminal's table; scripts get it whole.
func truncate(s string, n int, tty bool) string {
	if s == "" {
		return "-"
	}
	if !tty || len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
