// Package contextcmd implements `kobe context` (named servers and tokens in the CLI config; the
// package name avoids clashing with the standard library's context).
package contextcmd

import (
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/cliconfig"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdutil"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/output"
)

// NewCmdContext returns `kobe context` and its subcommands.
func NewCmdContext(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "context <command>",
		Aliases: []string{"ctx"},
		Short:   "Manage named kobe servers and their tokens: list, use, set, delete",
		Long: `A context is a kobe server and the token to use with it, saved by name in the CLI config
($KOBE_CONFIG, else $XDG_CONFIG_HOME/kobe/config.yaml, else ~/.config/kobe/config.yaml; mode 0600).
Commands use the current context unless told otherwise. Precedence, for the server and the
token each: --server/--token, then KOBE_SERVER/KOBE_TOKEN, then --context or the current
context, then ` + cliconfig.DefaultServer + ` without a token.

kobe dev writes a "dev" context (its API and admin token file) and makes it current.`,
		Example: `  kobe context list
  kobe context set prod --server https://kobe.example.com --token-file ~/.config/kobe/prod-token
  kobe context use prod
  kobe pool list --context dev
  kobe context delete old`,
	}
	cmd.AddCommand(NewCmdList(f, nil), NewCmdUse(f, nil), NewCmdSet(f, nil), NewCmdDelete(f, nil))
	return cmd
}

func load() (*cliconfig.Config, string, error) {
	path, err := cliconfig.Path()
	if err != nil {
		return nil, "", err
	}
	c, err := cliconfig.Load(path)
	return c, path, err
}

// Entry is a context as `kobe context list -o json|yaml` prints it (never the token itself).
type Entry struct {
	Name      string `json:"name"`
	Current   bool   `json:"current"`
	Server    string `json:"server,omitempty"`
	TokenFile string `json:"tokenFile,omitempty"`
	// Token says how the token is given: "inline", "file" or "none".
	Token string `json:"token"`
}

// ListOptions of `kobe context list`.
type ListOptions struct {
	Factory *factory.Factory
	Output  *output.Format
}

// NewCmdList builds `kobe context list`; runF replaces the behaviour in tests.
func NewCmdList(f *factory.Factory, runF func(*ListOptions) error) *cobra.Command {
	opts := &ListOptions{Factory: f}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List contexts (the current one marked *)",
		Example: `  kobe context list
  kobe context list -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return listRun(opts)
		},
	}
	opts.Output = output.AddFlag(cmd)
	return cmd
}

func listRun(opts *ListOptions) error {
	ios := opts.Factory.IOStreams
	c, path, err := load()
	if err != nil {
		return err
	}
	entries := []Entry{}
	for _, name := range c.Names() {
		ctx := c.Contexts[name]
		e := Entry{Name: name, Current: name == c.CurrentContext, Server: ctx.Server, TokenFile: ctx.TokenFile, Token: "none"}
		switch {
		case ctx.Token != "":
			e.Token = "inline"
		case ctx.TokenFile != "":
			e.Token = "file"
		}
		entries = append(entries, e)
	}
	return opts.Output.Print(ios.Out, map[string]any{"current": c.CurrentContext, "items": entries}, func(w io.Writer) error {
		if len(entries) == 0 {
			fmt.Fprintf(ios.ErrOut, "no contexts in %s (kobe context set NAME --server URL, or run kobe dev)\n", path)
			return nil
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CURRENT\tNAME\tSERVER\tTOKEN")
		for _, e := range entries {
			cur := ""
			if e.Current {
				cur = "*"
			}
			tok := e.Token
			if e.TokenFile != "" {
				tok = e.TokenFile
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cur, e.Name, e.Server, tok)
		}
		return tw.Flush()
	})
}

// UseOptions of `kobe context use`.
type UseOptions struct {
	Factory *factory.Factory
	Name    string
}

// NewCmdUse builds `kobe context use`; runF replaces the behaviour in tests.
func NewCmdUse(f *factory.Factory, runF func(*UseOptions) error) *cobra.Command {
	opts := &UseOptions{Factory: f}
	cmd := &cobra.Command{
		Use:     "use NAME",
		Short:   "Make a context the current one",
		Example: `  kobe context use prod`,
		Args:    cmdutil.ExactArgs(1, "give the context name (kobe context list shows them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			return useRun(opts)
		},
		ValidArgsFunction: completeContexts,
	}
	return cmd
}

func useRun(opts *UseOptions) error {
	c, path, err := load()
	if err != nil {
		return err
	}
	if _, ok := c.Contexts[opts.Name]; !ok {
		return fmt.Errorf("no context %q in %s (known: %v)", opts.Name, path, c.Names())
	}
	c.CurrentContext = opts.Name
	if err := c.Save(path); err != nil {
		return err
	}
	if opts.Factory.IOStreams.IsStdoutTTY() {
		fmt.Fprintf(opts.Factory.IOStreams.Out, "current context: %s\n", opts.Name)
	}
	return nil
}

// SetOptions of `kobe context set`.
type SetOptions struct {
	Factory   *factory.Factory
	Name      string
	Server    string
	TokenFile string
	Token     string
	// CertificateAuthority and InsecureSkipTLSVerify: how the context's server is checked.
	CertificateAuthority  string
	InsecureSkipTLSVerify bool
	Use                   bool
	// Changed records which of --server, --token-file, --token, --certificate-authority and
	// --insecure-skip-tls-verify were given.
	Changed map[string]bool
}

// NewCmdSet builds `kobe context set`; runF replaces the behaviour in tests.
func NewCmdSet(f *factory.Factory, runF func(*SetOptions) error) *cobra.Command {
	opts := &SetOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "set NAME [--server URL] [--token-file FILE | --token TOKEN] [--certificate-authority FILE | --insecure-skip-tls-verify]",
		Short: "Create or change a context",
		Long: `Create a context, or change the given fields of an existing one. Prefer --token-file to
--token: the token then stays out of the config file and of your shell history. The first
context created (or any, with --use) becomes the current one.`,
		Example: `  kobe context set prod --server https://kobe.example.com --token-file ~/.config/kobe/prod-token \
    --certificate-authority ~/.config/kobe/prod-ca.pem
  kobe context set staging --server https://kobe.staging.example.com --use`,
		Args: cmdutil.ExactArgs(1, "give the context name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if err := cliconfig.ValidateName(opts.Name); err != nil {
				return err
			}
			opts.Changed = map[string]bool{}
			for _, n := range []string{"server", "token-file", "token", "certificate-authority", "insecure-skip-tls-verify"} {
				opts.Changed[n] = cmd.Flags().Changed(n)
			}
			if opts.Changed["token-file"] && opts.Changed["token"] {
				return fmt.Errorf("%s: give --token-file or --token, not both", cmd.CommandPath())
			}
			if opts.CertificateAuthority != "" && opts.InsecureSkipTLSVerify {
				return fmt.Errorf("%s: give --certificate-authority or --insecure-skip-tls-verify, not both", cmd.CommandPath())
			}
			if opts.Changed["server"] {
				if _, err := api.NewClient(opts.Server); err != nil {
					return err
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return setRun(opts)
		},
		ValidArgsFunction: completeContexts,
	}
	// These shadow the root's persistent --server and --token: here they are what to save.
	cmd.Flags().StringVar(&opts.Server, "server", "", "the kobe API URL")
	cmd.Flags().StringVar(&opts.TokenFile, "token-file", "", "a file holding the token (made absolute)")
	cmd.Flags().StringVar(&opts.Token, "token", "", "the token itself (kept in the config file)")
	cmd.Flags().StringVar(&opts.CertificateAuthority, "certificate-authority", "", "PEM bundle of the certificate authorities the server's certificate must chain to (made absolute; empty: the system's)")
	cmd.Flags().BoolVar(&opts.InsecureSkipTLSVerify, "insecure-skip-tls-verify", false, "accept any server certificate (the server is not authenticated)")
	cmd.Flags().BoolVar(&opts.Use, "use", false, "make it the current context")
	return cmd
}

func setRun(opts *SetOptions) error {
	c, path, err := load()
	if err != nil {
		return err
	}
	if c.Contexts == nil {
		c.Contexts = map[string]cliconfig.Context{}
	}
	ctx, existed := c.Contexts[opts.Name]
	if !existed && !opts.Changed["server"] {
		return fmt.Errorf("context %s is new: give its --server", opts.Name)
	}
	if opts.Changed["server"] {
		ctx.Server = opts.Server
	}
	if opts.Changed["token-file"] {
		ctx.TokenFile, ctx.Token = "", ""
		if opts.TokenFile != "" {
			if ctx.TokenFile, err = filepath.Abs(opts.TokenFile); err != nil {
				return err
			}
		}
	}
	if opts.Changed["token"] {
		ctx.Token, ctx.TokenFile = opts.Token, ""
	}
	// One way of checking the server replaces the other.
	if opts.Changed["certificate-authority"] {
		ctx.CertificateAuthority, ctx.InsecureSkipTLSVerify = "", false
		if opts.CertificateAuthority != "" {
			if ctx.CertificateAuthority, err = filepath.Abs(opts.CertificateAuthority); err != nil {
				return err
			}
		}
	}
	if opts.Changed["insecure-skip-tls-verify"] {
		ctx.InsecureSkipTLSVerify = opts.InsecureSkipTLSVerify
		if ctx.InsecureSkipTLSVerify {
			ctx.CertificateAuthority = ""
		}
	}
	c.Contexts[opts.Name] = ctx
	if opts.Use || c.CurrentContext == "" {
		c.CurrentContext = opts.Name
	}
	if err := c.Save(path); err != nil {
		return err
	}
	if opts.Factory.IOStreams.IsStdoutTTY() {
		verb := "updated"
		if !existed {
			verb = "created"
		}
		fmt.Fprintf(opts.Factory.IOStreams.Out, "context %s %s in %s\n", opts.Name, verb, path)
	}
	return nil
}

// DeleteOptions of `kobe context delete`.
type DeleteOptions struct {
	Factory *factory.Factory
	Name    string
}

// NewCmdDelete builds `kobe context delete`; runF replaces the behaviour in tests.
func NewCmdDelete(f *factory.Factory, runF func(*DeleteOptions) error) *cobra.Command {
	opts := &DeleteOptions{Factory: f}
	cmd := &cobra.Command{
		Use:     "delete NAME",
		Short:   "Delete a context (its token file is left alone)",
		Example: `  kobe context delete old`,
		Args:    cmdutil.ExactArgs(1, "give the context name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			return deleteRun(opts)
		},
		ValidArgsFunction: completeContexts,
	}
	return cmd
}

func deleteRun(opts *DeleteOptions) error {
	c, path, err := load()
	if err != nil {
		return err
	}
	if _, ok := c.Contexts[opts.Name]; !ok {
		return fmt.Errorf("no context %q in %s", opts.Name, path)
	}
	delete(c.Contexts, opts.Name)
	if c.CurrentContext == opts.Name {
		c.CurrentContext = ""
	}
	if err := c.Save(path); err != nil {
		return err
	}
	if opts.Factory.IOStreams.IsStdoutTTY() {
		fmt.Fprintf(opts.Factory.IOStreams.Out, "deleted context %s\n", opts.Name)
	}
	return nil
}

func completeContexts(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return Names(), cobra.ShellCompDirectiveNoFileComp
}

// Names returns the context names of the CLI config (for completion; none on any error).
func Names() []string {
	c, _, err := load()
	if err != nil {
		return nil
	}
	return c.Names()
}
