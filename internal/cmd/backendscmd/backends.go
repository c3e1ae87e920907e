// Package backendscmd implements `kobe backends` (the package name avoids clashing with the
// backends package it lists).
package backendscmd

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/output"
)

// Options of `kobe backends`.
type Options struct {
	Factory *factory.Factory
	Output  *output.Format
	// Matrix returns the capability matrix (the compiled-in registry by default).
	Matrix func() []backends.Capabilities
}

// NewCmdBackends builds the command; runF replaces the behaviour in tests.
func NewCmdBackends(f *factory.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Factory: f, Matrix: backends.Matrix}
	cmd := &cobra.Command{
		Use:   "backends",
		Short: "List the runtime backends compiled into kobe and what each can do",
		Long: `List the runtime backends compiled into this binary, the contract version each
implements, and its optional capabilities: sleep/resume, golden snapshots, certificate
rotation, migration between hosts, whether its instances are bound to one kobe host, and
whether it observes the use of lease kubeconfigs (ACTIVITY): a pool's spec.sleep.afterInactivity
counts a lease's requests to its cluster only on such a backend, elsewhere only its requests
through kobe; and whether it prepares a member's lease credential before any lease claims it
(WARM-BIND), so that a lease bound to a warm member is answered without calling the member.`,
		Example: `  kobe backends
  kobe backends -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return backendsRun(opts)
		},
	}
	opts.Output = output.AddFlag(cmd)
	return cmd
}

func backendsRun(opts *Options) error {
	m := opts.Matrix()
	out := opts.Factory.IOStreams.Out
	if !opts.Output.Is(output.Table) {
		if m == nil {
			m = []backends.Capabilities{}
		}
		return opts.Output.Print(out, m, nil)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tCONTRACT\tSLEEP\tFREEZE\tCERT-ROTATION\tHOST-BOUND\tACTIVITY\tWARM-BIND\tDESCRIPTION")
	for _, c := range m {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Backend, c.Contract, sleepCell(c), yes(c.Freeze),
			yes(c.CertRotate), yes(c.HostBound), yes(c.Activity), yes(c.WarmBind), c.Description)
	}
	return tw.Flush()
}

// sleepCell is the SLEEP column: whether the backend sleeps, and what a pool needs for it.
func sleepCell(c backends.Capabilities) string {
	if c.Sleep && c.SleepRequires != "" {
		return "with " + c.SleepRequires
	}
	return yes(c.Sleep)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "-"
}
