// Package completion implements `kobe completion`: shell completion scripts (cobra's).
package completion

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
)

// NewCmdCompletion builds `kobe completion SHELL`.
func NewCmdCompletion(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print the shell completion script",
		Long: `Print a completion script for your shell: commands, flags, -o formats and context names
complete. Load it in the current shell, or install it as shown below.`,
		Example: `  # bash (current shell; for every shell put it in ~/.local/share/bash-completion/completions/kobe)
  source <(kobe completion bash)
  # zsh (a directory on $fpath, with compinit enabled)
  kobe completion zsh > "${fpath[1]}/_kobe"
  # fish
  kobe completion fish > ~/.config/fish/completions/kobe.fish`,
		ValidArgs:             []string{"bash", "zsh", "fish", "powershell"},
		Args:                  cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := f.IOStreams.Out
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			case "powershell":
				return root.GenPowerShellCompletionWithDesc(out)
			}
			return fmt.Errorf("unknown shell %q", args[0])
		},
	}
	return cmd
}
