// Package root assembles the kobe command tree.
package root

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/internal/cmd/backendscmd"
	"github.com/kunobi-ninja/kobe/internal/cmd/doctor"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/serve"
	"github.com/kunobi-ninja/kobe/internal/cmd/status"
	"github.com/kunobi-ninja/kobe/internal/cmd/version"
)

// NewCmdRoot returns the `kobe` command with every subcommand.
func NewCmdRoot(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kobe",
		Short: "A fleet control-point for ephemeral Kubernetes clusters",
		Long: `kobe keeps pools of Kubernetes clusters warm and leases them to CI jobs and developers in
well under a second. Every long-running operation is a durable Temporal workflow.

Start everything locally with "kobe dev"; talk to a running kobe with the other commands
(--server or KOBE_SERVER, default ` + factory.DefaultServer + `).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			// --server beats KOBE_SERVER, which beats the default (already applied by the factory).
			if fl := cmd.Flags().Lookup("server"); fl != nil && !fl.Changed {
				if v, ok := os.LookupEnv("KOBE_SERVER"); ok && v != "" {
					f.Server = v
				}
			}
			return nil
		},
	}
	cmd.PersistentFlags().StringVar(&f.Server, "server", f.Server, "kobe API URL (env KOBE_SERVER)")
	cmd.AddCommand(
		serve.NewCmdDev(f, nil),
		serve.NewCmdServer(f, nil),
		serve.NewCmdWorker(f, nil),
		status.NewCmdStatus(f, nil),
		doctor.NewCmdDoctor(f, nil),
		version.NewCmdVersion(f, nil),
		backendscmd.NewCmdBackends(f, nil),
	)
	return cmd
}
