//go:build unix

package run

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
)

// deliveredByTerminal reports whether CMD has already received sig from the terminal: a Ctrl-C
// goes to the terminal's whole foreground process group, CMD included, so passing it on would
// deliver it twice (and a second interrupt means "stop now" to many programs).
func deliveredByTerminal(sig os.Signal, ios *iostreams.IOStreams) bool {
	if sig != os.Interrupt {
		return false
	}
	for _, s := range []any{ios.In, ios.Out, ios.ErrOut} {
		f, ok := s.(*os.File)
		if !ok {
			continue
		}
		pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
		if err != nil {
			continue // not a terminal
		}
		return pgrp == unix.Getpgrp()
	}
	return false
}
