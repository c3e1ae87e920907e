// Package cliconfig is the kobe CLI's own configuration: named contexts, each a server and the
// token to use with it, and the current one. The file is $KOBE_CONFIG, else
// $XDG_CONFIG_HOME/kobe/config.yaml, else ~/.config/kobe/config.yaml:
//
//	current-context: dev
//	contexts:
//	  dev:
//	    server: http://127.0.0.1:8080
//	    token-file: /home/me/.local/state/kobe/admin-token
//	  prod:
//	    server: https://kobe.example.com
//	    token: kobe_…
//	    certificate-authority: /home/me/.config/kobe/prod-ca.pem
//
// It is written with mode 0600, atomically (a reader never sees half a file).
package cliconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kunobi-ninja/kobe/api"
)

// DefaultServer is the API used when nothing names one.
const DefaultServer = "http://127.0.0.1:8080"

// Config is the file's content.
type Config struct {
	CurrentContext string             `json:"current-context,omitempty"`
	Contexts       map[string]Context `json:"contexts,omitempty"`
}

// Context is a server and how to authenticate to it: Token inline, or TokenFile, a file holding
// it (kept out of the config so that kobe dev can rotate it).
type Context struct {
	Server    string `json:"server,omitempty"`
	TokenFile string `json:"token-file,omitempty"`
	Token     string `json:"token,omitempty"`
	// Login is the SSO credential `kobe login` stored (oidc.go); its ID token is the bearer.
	Login *Login `json:"login,omitempty"`
	// CertificateAuthority is a PEM bundle the server's certificate must chain to (in place of
	// the system's authorities); InsecureSkipTLSVerify accepts any certificate. As kubectl's.
	CertificateAuthority  string `json:"certificate-authority,omitempty"`
	InsecureSkipTLSVerify bool   `json:"insecure-skip-tls-verify,omitempty"`
}

// Path returns the config file's path.
func Path() (string, error) {
	if p := os.Getenv("KOBE_CONFIG"); p != "" {
		return p, nil
	}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cannot find the kobe CLI config (set KOBE_CONFIG): %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "kobe", "config.yaml"), nil
}

// Load reads the config at path; a missing file is an empty config.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Config{}, nil
	}
	if err != nil {
		return nil, err
	}
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	for name, ctx := range c.Contexts {
		if ctx.Token != "" && ctx.TokenFile != "" {
			return nil, fmt.Errorf("%s: contexts.%s: give token or token-file, not both", path, name)
		}
		if ctx.CertificateAuthority != "" && ctx.InsecureSkipTLSVerify {
			return nil, fmt.Errorf("%s: contexts.%s: give certificate-authority or insecure-skip-tls-verify, not both", path, name)
		}
	}
	return &c, nil
}

// Save writes the config to path with mode 0600, atomically: a temporary file in the same
// directory, synced, then renamed over the old one. The directory is created 0700 if needed.
func (c *Config) Save(path string) error {
	data, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, data)
}

// WriteFileAtomic writes data to path with mode 0600 through a temporary file and a rename.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing left to remove
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Names returns the context names, sorted.
func (c *Config) Names() []string {
	names := make([]string, 0, len(c.Contexts))
	for n := range c.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ValidateName checks a context name.
func ValidateName(name string) error {
	if name == "" || strings.ContainsAny(name, " \t\n/") {
		return fmt.Errorf("context name %q: must be non-empty, without spaces or slashes", name)
	}
	return nil
}

// WriteContext records a context (server and token file) in the CLI config, replacing any
// context of that name (keeping its certificate authority if the server is the same), and makes it the current context when makeCurrent is set. `kobe dev`
// calls it so that the CLI finds the dev server and its admin token without flags.
func WriteContext(name, server, tokenFile string, makeCurrent bool) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	path, err := Path()
	if err != nil {
		return err
	}
	c, err := Load(path)
	if err != nil {
		return err
	}
	if tokenFile != "" {
		if tokenFile, err = filepath.Abs(tokenFile); err != nil {
			return err
		}
	}
	if c.Contexts == nil {
		c.Contexts = map[string]Context{}
	}
	next := Context{Server: server, TokenFile: tokenFile}
	if old, ok := c.Contexts[name]; ok && SameServer(old.Server, server) {
		// The trust a user gave this server (kobe context set --certificate-authority) stays.
		next.CertificateAuthority, next.InsecureSkipTLSVerify = old.CertificateAuthority, old.InsecureSkipTLSVerify
	}
	c.Contexts[name] = next
	if makeCurrent {
		c.CurrentContext = name
	}
	return c.Save(path)
}

// Target is where the CLI sends requests and with which token.
type Target struct {
	Server string
	Token  string
	// Context is the name of the context that supplied the server or token ("" if none did).
	Context string
	// ServerFrom and TokenFrom say where each came from: "--server", "KOBE_SERVER", "context dev",
	// "default" (and "" for no token).
	ServerFrom, TokenFrom string
	// TLS is how the server's certificate is checked: from the flags, else the environment
	// (KOBE_CERTIFICATE_AUTHORITY, KOBE_INSECURE_SKIP_TLS_VERIFY), else the context whose
	// server this is.
	TLS api.TLSOptions
}

// Overrides are the command line's --server, --token, --context, --certificate-authority and
// --insecure-skip-tls-verify (zero = not given).
type Overrides struct {
	Server, Token, Context string
	TLS                    api.TLSOptions
}

// Resolve works out the target. Precedence, for the server and the token separately:
// flags (--server, --token) > environment (KOBE_SERVER, KOBE_TOKEN) > the context named by
// --context, else the current context > the default server (no token). A context's token is
// bound to its server: it is used only when the server resolved is that context's, so that a
// --server or KOBE_SERVER pointing elsewhere never receives it. The config file is read only
// when a context is needed; --context naming a context that does not exist is an error.
func Resolve(o Overrides, lookupEnv func(string) (string, bool), configPath string) (Target, error) {
	var t Target
	env := func(k string) string {
		if lookupEnv == nil {
			return ""
		}
		v, _ := lookupEnv(k)
		return strings.TrimSpace(v)
	}
	switch {
	case o.Server != "":
		t.Server, t.ServerFrom = o.Server, "--server"
	case env("KOBE_SERVER") != "":
		t.Server, t.ServerFrom = env("KOBE_SERVER"), "KOBE_SERVER"
	}
	switch {
	case o.Token != "":
		t.Token, t.TokenFrom = o.Token, "--token"
	case env("KOBE_TOKEN") != "":
		t.Token, t.TokenFrom = env("KOBE_TOKEN"), "KOBE_TOKEN"
	}
	switch {
	case o.TLS != api.TLSOptions{}:
		t.TLS = o.TLS
	case env("KOBE_CERTIFICATE_AUTHORITY") != "" || env("KOBE_INSECURE_SKIP_TLS_VERIFY") != "":
		t.TLS.CAFile = env("KOBE_CERTIFICATE_AUTHORITY")
		if v := env("KOBE_INSECURE_SKIP_TLS_VERIFY"); v != "" {
			skip, err := strconv.ParseBool(v)
			if err != nil {
				return t, fmt.Errorf("KOBE_INSECURE_SKIP_TLS_VERIFY=%q: want true or false", v)
			}
			t.TLS.InsecureSkipVerify = skip
		}
	}
	tlsGiven := t.TLS != api.TLSOptions{}
	if t.Server == "" || t.Token == "" || o.Context != "" {
		c, err := Load(configPath)
		if err != nil {
			return t, err
		}
		name := o.Context
		if name == "" {
			name = c.CurrentContext
		}
		if name != "" {
			ctx, ok := c.Contexts[name]
			if !ok {
				if o.Context != "" {
					return t, fmt.Errorf("--context %q: no such context in %s (known: %s)", name, configPath, known(c))
				}
				return t, fmt.Errorf("current context %q does not exist in %s: pick one with `kobe context use NAME` (known: %s)", name, configPath, known(c))
			}
			from := "context " + name
			if t.Server == "" && ctx.Server != "" {
				t.Server, t.ServerFrom, t.Context = ctx.Server, from, name
			}
			// Like the token, the context's trust goes only to the context's server.
			if !tlsGiven && (t.Server == "" || SameServer(t.Server, ctx.Server)) {
				t.TLS = api.TLSOptions{CAFile: ctx.CertificateAuthority, InsecureSkipVerify: ctx.InsecureSkipTLSVerify}
			}
			if t.Token == "" && (t.Server == "" || SameServer(t.Server, ctx.Server)) && ctx.Login != nil {
				tok, err := ctx.Login.Fresh(name, c, configPath)
				if err != nil {
					return t, fmt.Errorf("context %s: %w", name, err)
				}
				t.Token, t.TokenFrom, t.Context = tok, from+" (kobe login)", name
			}
			if t.Token == "" && (t.Server == "" || SameServer(t.Server, ctx.Server)) {
				tok, err := ctx.ReadToken()
				if err != nil {
					return t, fmt.Errorf("context %s: %w", name, err)
				}
				if tok != "" {
					t.Token, t.TokenFrom, t.Context = tok, from, name
				}
			}
		}
	}
	if t.Server == "" {
		t.Server, t.ServerFrom = DefaultServer, "default"
	}
	return t, nil
}

// SameServer reports whether two API URLs name the same server (ignoring a trailing slash
// and letter case).
func SameServer(a, b string) bool {
	return strings.EqualFold(strings.TrimRight(a, "/"), strings.TrimRight(b, "/"))
}

// ReadToken returns the context's token, reading its token file if it has one.
func (c Context) ReadToken() (string, error) {
	if c.Token != "" {
		return strings.TrimSpace(c.Token), nil
	}
	if c.TokenFile == "" {
		return "", nil
	}
	data, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return "", fmt.Errorf("token-file: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

func known(c *Config) string {
	if len(c.Contexts) == 0 {
		return "none"
	}
	return strings.Join(c.Names(), ", ")
}
