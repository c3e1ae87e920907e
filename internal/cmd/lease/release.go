package lease

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/internal/cmd/cmdutil"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
)

// ReleaseOptions of `kobe lease release`.
type ReleaseOptions struct {
	Factory *factory.Factory
	IDs     []string
}

// NewCmdRelease builds `kobe lease release`; runF replaces the behaviour in tests.
func NewCmdRelease(f *factory.Factory, runF func(*ReleaseOptions) error) *cobra.Command {
	opts := &ReleaseOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "release ID...",
		Short: "Give leases back (their clusters are torn down)",
		Long: `Release leases: their credentials are revoked and their clusters torn down (a cluster is
never reused). Releasing a lease twice is not an error.`,
		Example: `  kobe lease release lease-1a2b3c
  kobe lease list -o json | jq -r '.items[].id' | xargs kobe lease release`,
		Args: cmdutil.MinimumArgs(1, "give the id of the lease to release"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.IDs = args
			if runF != nil {
				return runF(opts)
			}
			return releaseRun(cmd.Context(), opts)
		},
	}
	return cmd
}

func releaseRun(ctx context.Context, opts *ReleaseOptions) error {
	ios := opts.Factory.IOStreams
	c, err := opts.Factory.APIClient()
	if err != nil {
		return err
	}
	for _, id := range opts.IDs {
		if err := c.ReleaseLease(ctx, id); err != nil {
			return fmt.Errorf("release lease %s: %w", id, err)
		}
		if ios.IsStdoutTTY() {
			fmt.Fprintf(ios.Out, "released %s\n", id)
		}
	}
	return nil
}
