package lease

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdutil"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
)

// KubeconfigOptions of `kobe lease kubeconfig`.
type KubeconfigOptions struct {
	Factory *factory.Factory
	ID      string
	File    string
}

// NewCmdKubeconfig builds `kobe lease kubeconfig`; runF replaces the behaviour in tests.
func NewCmdKubeconfig(f *factory.Factory, runF func(*KubeconfigOptions) error) *cobra.Command {
	opts := &KubeconfigOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "kubeconfig ID|NAME",
		Short: "Print a Bound lease's kubeconfig, or write it to a file",
		Example: `  kobe lease kubeconfig lease-1a2b3c > kubeconfig
  kobe lease kubeconfig my-e2e --file ~/.kube/kobe-e2e && KUBECONFIG=~/.kube/kobe-e2e kubectl get nodes`,
		Args: cmdutil.ExactArgs(1, "give the lease id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return kubeconfigRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.File, "file", "", "write it to this file (mode 0600) instead of stdout")
	return cmd
}

func kubeconfigRun(ctx context.Context, opts *KubeconfigOptions) error {
	ios := opts.Factory.IOStreams
	c, err := opts.Factory.APIClient()
	if err != nil {
		return err
	}
	l, err := c.GetLease(ctx, opts.ID, 0)
	if err != nil {
		return err
	}
	if l.Phase != api.LeaseBound || l.Kubeconfig == "" {
		if l.Phase == api.LeasePending {
			return fmt.Errorf("lease %s is Pending (%s): no kubeconfig yet; wait for it with `kobe lease get %s --wait`", l.ID, cmdutil.Waiting(l), l.ID)
		}
		return fmt.Errorf("lease %s is %s: it has no kubeconfig", l.ID, l.Phase)
	}
	if l.Sleeping {
		// As the API's kubeconfig read (409 sleeping): its requests would be refused until then.
		return fmt.Errorf("lease %s is asleep: its kubeconfig works once it wakes; wake it with `kobe lease wake %s`", l.ID, l.ID)
	}
	if opts.File == "" {
		_, err := fmt.Fprint(ios.Out, l.Kubeconfig)
		return err
	}
	if err := cmdutil.WritePrivateFile(opts.File, []byte(l.Kubeconfig)); err != nil {
		return fmt.Errorf("--file: %w", err)
	}
	if ios.IsStderrTTY() {
		fmt.Fprintf(ios.ErrOut, "kubeconfig of %s written to %s\n", l.ID, opts.File)
	}
	return nil
}
