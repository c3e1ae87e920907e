// Package iostreams bundles a command's input and outputs and knows whether they are terminals,
// so that commands print tables for people and plain data for scripts.
package iostreams

import (
	"bytes"
	"io"
	"os"
)

// IOStreams are the streams a command reads and writes.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	stdoutTTY bool
	stderrTTY bool
}

// System returns the process's own streams.
func System() *IOStreams {
	return &IOStreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		stdoutTTY: isTerminal(os.Stdout), stderrTTY: isTerminal(os.Stderr),
	}
}

// Test returns streams backed by buffers, for tests.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errOut := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

// IsStdoutTTY reports whether stdout is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.stdoutTTY }

// IsStderrTTY reports whether stderr is a terminal (progress lines go there).
func (s *IOStreams) IsStderrTTY() bool { return s.stderrTTY }

// SetStdoutTTY overrides terminal detection (tests).
func (s *IOStreams) SetStdoutTTY(v bool) { s.stdoutTTY = v }

// SetStderrTTY overrides terminal detection of stderr (tests).
func (s *IOStreams) SetStderrTTY(v bool) { s.stderrTTY = v }

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
