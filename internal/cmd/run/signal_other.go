//go:build !unix

package run

import (
	"os"

	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
)

func deliveredByTerminal(os.Signal, *iostreams.IOStreams) bool { return false }
