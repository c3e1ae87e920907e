package lease

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/output"
)

// ListOptions of `kobe lease list`.
type ListOptions struct {
	Factory *factory.Factory
	Name    string
	Output  *output.Format
}

// NewCmdList builds `kobe lease list`; runF replaces the behaviour in tests.
func NewCmdList(f *factory.Factory, runF func(*ListOptions) error) *cobra.Command {
	opts := &ListOptions{Factory: f}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List your active leases",
		Example: `  kobe lease list
  kobe lease list --name my-e2e
  kobe lease list -o json | jq -r '.[].id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "only the lease with this name (alias)")
	opts.Output = output.AddFlag(cmd)
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	ios := opts.Factory.IOStreams
	c, err := opts.Factory.APIClient()
	if err != nil {
		return err
	}
	leases, err := c.ListLeases(ctx, opts.Name)
	if err != nil {
		return err
	}
	if leases == nil {
		leases = []api.Lease{}
	}
	return opts.Output.Print(ios.Out, leases, func(w io.Writer) error {
		if len(leases) == 0 {
			if ios.IsStdoutTTY() {
				fmt.Fprintln(ios.ErrOut, "no active leases (kobe lease create POOL)")
			}
			return nil
		}
		return printTable(w, leases, ios.IsStdoutTTY(), time.Now())
	})
}
