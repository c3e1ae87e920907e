package cmdtest

import (
	"io"

	"github.com/spf13/cobra"
)

// Run executes cmd with args as the binary would (errors returned, not printed).
func Run(cmd *cobra.Command, args ...string) error {
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	return cmd.Execute()
}
