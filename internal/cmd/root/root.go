// Package root assembles the kobe command tree.
package root

import (
	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/internal/cmd/audit"
	"github.com/kunobi-ninja/kobe/internal/cmd/backendscmd"
	"github.com/kunobi-ninja/kobe/internal/cmd/completion"
	"github.com/kunobi-ninja/kobe/internal/cmd/contextcmd"
	"github.com/kunobi-ninja/kobe/internal/cmd/doctor"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/instance"
	"github.com/kunobi-ninja/kobe/internal/cmd/lease"
	"github.com/kunobi-ninja/kobe/internal/cmd/login"
	"github.com/kunobi-ninja/kobe/internal/cmd/migrate"
	"github.com/kunobi-ninja/kobe/internal/cmd/pool"
	"github.com/kunobi-ninja/kobe/internal/cmd/run"
	"github.com/kunobi-ninja/kobe/internal/cmd/secrets"
	"github.com/kunobi-ninja/kobe/internal/cmd/serve"
	"github.com/kunobi-ninja/kobe/internal/cmd/status"
	"github.com/kunobi-ninja/kobe/internal/cmd/token"
	"github.com/kunobi-ninja/kobe/internal/cmd/version"
)

// NewCmdRoot returns the `kobe` command with every subcommand.
func NewCmdRoot(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kobe",
		Short: "A fleet control-point for ephemeral Kubernetes clusters",
		Long: `kobe keeps pools of Kubernetes clusters warm and leases them to CI jobs and developers in
well under a second. Every long-running operation is a durable Temporal workflow.

Start everything locally with "kobe dev"; talk to a running kobe with the other commands.
The server and token come from --server/--token, else KOBE_SERVER/KOBE_TOKEN, else the
context named by --context or the current one (kobe context), else ` + factory.DefaultServer + `.`,
		Example: `  kobe dev
  kobe lease create dev --wait --kubeconfig ./kubeconfig
  kobe run dev -- kubectl get nodes
  kobe pool list --context prod`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.CompletionOptions.DisableDefaultCmd = true // ours has examples
	cmd.PersistentFlags().StringVar(&f.Server, "server", f.Server, "kobe API URL (env KOBE_SERVER; default: the context's, else "+factory.DefaultServer+")")
	cmd.PersistentFlags().StringVar(&f.Token, "token", f.Token, "API token (env KOBE_TOKEN; default: the context's)")
	cmd.PersistentFlags().StringVar(&f.Context, "context", f.Context, "use this context of the CLI config instead of the current one")
	cmd.PersistentFlags().StringVar(&f.CertificateAuthority, "certificate-authority", f.CertificateAuthority, "PEM bundle of the certificate authorities the server's certificate must chain to, in place of the system's (env KOBE_CERTIFICATE_AUTHORITY; default: the context's)")
	cmd.PersistentFlags().BoolVar(&f.InsecureSkipTLSVerify, "insecure-skip-tls-verify", f.InsecureSkipTLSVerify, "accept any server certificate: encrypted, but the server is not authenticated (env KOBE_INSECURE_SKIP_TLS_VERIFY; default: the context's)")
	_ = cmd.RegisterFlagCompletionFunc("context", func(c *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		return contextcmd.Names(), cobra.ShellCompDirectiveNoFileComp
	})

	cmd.AddGroup(
		&cobra.Group{ID: "lease", Title: "Clusters:"},
		&cobra.Group{ID: "admin", Title: "Administration:"},
		&cobra.Group{ID: "run", Title: "Running kobe:"},
		&cobra.Group{ID: "cli", Title: "The CLI:"},
	)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			cmd.AddCommand(c)
		}
	}
	add("lease",
		lease.NewCmdLease(f),
		run.NewCmdRun(f, nil),
		pool.NewCmdPool(f),
	)
	add("admin",
		instance.NewCmdInstance(f),
		token.NewCmdToken(f),
		audit.NewCmdAudit(f, nil),
		status.NewCmdStatus(f, nil),
		doctor.NewCmdDoctor(f, nil),
		backendscmd.NewCmdBackends(f, nil),
	)
	add("run",
		serve.NewCmdDev(f, nil),
		serve.NewCmdServer(f, nil),
		serve.NewCmdWorker(f, nil),
		migrate.NewCmdMigrate(f),
		secrets.NewCmdSecrets(f),
	)
	add("cli",
		contextcmd.NewCmdContext(f),
		login.NewCmdLogin(f, nil),
		login.NewCmdLogout(f, nil),
		completion.NewCmdCompletion(f),
		version.NewCmdVersion(f, nil),
	)
	cmd.SetHelpCommandGroupID("cli")
	return cmd
}
