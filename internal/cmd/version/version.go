// Package version implements `kobe version`.
package version

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/internal/buildinfo"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/output"
)

// Options of `kobe version`.
type Options struct {
	Factory *factory.Factory
	Output  *output.Format
}

// NewCmdVersion builds the command; runF replaces the behaviour in tests.
func NewCmdVersion(f *factory.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this kobe binary",
		Example: `  kobe version
  kobe version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return versionRun(opts)
		},
	}
	opts.Output = output.AddFlag(cmd, "text", output.JSON, output.YAML)
	return cmd
}

func versionRun(opts *Options) error {
	bi := buildinfo.Get()
	out := opts.Factory.IOStreams.Out
	if !opts.Output.Is("text") {
		return opts.Output.Print(out, bi, nil)
	}
	commit := bi.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit == "" {
		commit = "unknown"
	}
	_, err := fmt.Fprintf(out, "kobe %s (commit %s, %s, %s)\n", bi.Version, commit, bi.GoVersion, bi.Platform)
	return err
}
