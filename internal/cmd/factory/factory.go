// Package factory gives every command what it needs from outside (streams, API client) so that
// commands can be tested with fakes of those, as in the gh CLI.
package factory

import (
	"os"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/iostreams"
)

// DefaultServer is the API the CLI talks to when neither --server nor KOBE_SERVER is set.
const DefaultServer = "http://127.0.0.1:8080"

// Factory is shared by all commands.
type Factory struct {
	IOStreams *iostreams.IOStreams
	// Server is the API base URL, set from --server / KOBE_SERVER by the root command.
	Server string
	// APIClient builds a client for Server.
	APIClient func() (*api.Client, error)
}

// New returns the factory used by the real binary.
func New() *Factory {
	f := &Factory{IOStreams: iostreams.System(), Server: DefaultServer}
	if v := os.Getenv("KOBE_SERVER"); v != "" {
		f.Server = v
	}
	f.APIClient = func() (*api.Client, error) {
		c, err := api.NewClient(f.Server)
		if err != nil {
			return nil, err
		}
		c.Token = os.Getenv("KOBE_TOKEN")
		return c, nil
	}
	return f
}
