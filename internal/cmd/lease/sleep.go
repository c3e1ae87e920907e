package lease

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdutil"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/output"
)

// SleepOptions of `kobe lease sleep` and `kobe lease wake`.
type SleepOptions struct {
	Factory *factory.Factory
	ID      string
	// Wake: wake the cluster instead of putting it to sleep.
	Wake   bool
	Output *output.Format
}

// NewCmdSleep builds `kobe lease sleep`; runF replaces the behaviour in tests.
func NewCmdSleep(f *factory.Factory, runF func(*SleepOptions) error) *cobra.Command {
	return newCmdSleepOrWake(f, runF, false, &cobra.Command{
		Use:   "sleep ID",
		Short: "Put a Bound lease's cluster to sleep (its state is kept)",
		Long: `Stop a Bound lease's cluster: its processes (or pods) stop and free their memory, its data
stays. The lease's TTL keeps running. While it sleeps, its kubeconfig's requests fail at once
(with the local backend: connection refused on the cluster's address); wake it with
` + "`kobe lease wake ID`" + `. Sleeping a sleeping lease does nothing.`,
		Example: `  kobe lease sleep lease-1a2b3c
  kobe lease sleep lease-1a2b3c -o json`,
	})
}

// NewCmdWake builds `kobe lease wake`; runF replaces the behaviour in tests.
func NewCmdWake(f *factory.Factory, runF func(*SleepOptions) error) *cobra.Command {
	return newCmdSleepOrWake(f, runF, true, &cobra.Command{
		Use:   "wake ID",
		Short: "Wake a sleeping lease's cluster and wait until it is ready",
		Long: `Start a sleeping lease's cluster again with its data, and return once it is ready, within its
pool's spec.scaling.resumeTimeout (default 5m). Past that the cluster is broken (wake_failed,
condition InstanceHealthy False): release the lease and take another. Waking an awake lease
does nothing.`,
		Example: `  kobe lease wake lease-1a2b3c`,
	})
}

func newCmdSleepOrWake(f *factory.Factory, runF func(*SleepOptions) error, wake bool, cmd *cobra.Command) *cobra.Command {
	opts := &SleepOptions{Factory: f, Wake: wake}
	cmd.Args = cmdutil.ExactArgs(1, "give the lease id")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		opts.ID = args[0]
		if runF != nil {
			return runF(opts)
		}
		return sleepRun(cmd.Context(), opts)
	}
	opts.Output = output.AddFlag(cmd)
	return cmd
}

func sleepRun(ctx context.Context, opts *SleepOptions) error {
	ios := opts.Factory.IOStreams
	c, err := opts.Factory.APIClient()
	if err != nil {
		return err
	}
	verb, call := "sleep", c.SleepLease
	if opts.Wake {
		verb, call = "wake", c.WakeLease
	}
	l, err := call(ctx, opts.ID)
	if err != nil {
		return fmt.Errorf("%s lease %s: %w", verb, opts.ID, err)
	}
	return opts.Output.Print(ios.Out, l, func(w io.Writer) error {
		state := "awake"
		if l.Sleeping {
			state = "asleep"
		}
		line := fmt.Sprintf("lease %s is %s", l.ID, state)
		if c := sleepingCondition(l); c != nil && c.Message != "" {
			line += ": " + c.Message
		}
		_, err := fmt.Fprintln(w, line)
		return err
	})
}

func sleepingCondition(l api.Lease) *api.LeaseCondition {
	for i := range l.Conditions {
		if l.Conditions[i].Type == "Sleeping" {
			return &l.Conditions[i]
		}
	}
	return nil
}
