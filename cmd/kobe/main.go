// Command kobe is the single kobe binary: dev mode, server, worker and the CLI.
package main

import (
	"os"

	// Backends compiled into this binary register themselves.
	_ "github.com/kunobi-ninja/kobe/backends/capi"
	_ "github.com/kunobi-ninja/kobe/backends/k0s"
	_ "github.com/kunobi-ninja/kobe/backends/k3s"
	_ "github.com/kunobi-ninja/kobe/backends/local"
	_ "github.com/kunobi-ninja/kobe/backends/vcluster"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdutil"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/root"
)

func main() {
	f := factory.New()
	if err := root.NewCmdRoot(f).Execute(); err != nil {
		// One line that names the problem (and a hint line when there is something to do about
		// it), and a non-zero exit: scripts and people both rely on it. `kobe run` exits with its
		// command's code.
		os.Exit(cmdutil.Report(os.Stderr, err))
	}
}
