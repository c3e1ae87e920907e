// Package factory gives every command what it needs from outside (streams, API client) so that
// commands can be tested with fakes of those, as in the gh CLI.
package factory

import (
	"fmt"
	"os"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/cliconfig"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
)

// DefaultServer is the API the CLI talks to when neither a flag, the environment nor a context
// names one.
const DefaultServer = cliconfig.DefaultServer

// Factory is shared by all commands.
type Factory struct {
	IOStreams *iostreams.IOStreams
	// Server, Token and Context are the persistent flags --server, --token and --context as
	// given on the command line ("" when not given); Target resolves them.
	Server  string
	Token   string
	Context string
	// CertificateAuthority and InsecureSkipTLSVerify are --certificate-authority and
	// --insecure-skip-tls-verify: how the server's certificate is checked.
	CertificateAuthority  string
	InsecureSkipTLSVerify bool
	// Target resolves the server and token: flags > KOBE_SERVER/KOBE_TOKEN > context > default.
	Target func() (cliconfig.Target, error)
	// APIClient builds a client for the resolved target.
	APIClient func() (*api.Client, error)
}

// New returns the factory used by the real binary.
func New() *Factory {
	f := &Factory{IOStreams: iostreams.System()}
	f.Target = func() (cliconfig.Target, error) {
		path, err := cliconfig.Path()
		if err != nil && (f.Server == "" || f.Token == "") {
			return cliconfig.Target{}, err
		}
		return cliconfig.Resolve(cliconfig.Overrides{Server: f.Server, Token: f.Token, Context: f.Context,
			TLS: api.TLSOptions{CAFile: f.CertificateAuthority, InsecureSkipVerify: f.InsecureSkipTLSVerify}}, os.LookupEnv, path)
	}
	f.APIClient = func() (*api.Client, error) {
		t, err := f.Target()
		if err != nil {
			return nil, err
		}
		c, err := NewClient(t)
		if err != nil {
			return nil, err
		}
		c.Token = t.Token
		return c, nil
	}
	return f
}

// NewClient is a client of the target's server, checking its certificate as the target says,
// without the target's token (kobe login reads /v1/status without it).
func NewClient(t cliconfig.Target) (*api.Client, error) {
	if _, err := api.NewClient(t.Server); err != nil {
		if t.ServerFrom != "--server" {
			return nil, fmt.Errorf("server %q (from %s): want a URL such as %s", t.Server, t.ServerFrom, DefaultServer)
		}
		return nil, err
	}
	return api.NewClientTLS(t.Server, t.TLS)
}
