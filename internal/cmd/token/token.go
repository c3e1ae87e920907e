// Package token implements `kobe token`: create, list and revoke API tokens.
package token

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdutil"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/output"
)

// NewCmdToken returns `kobe token` and its subcommands.
func NewCmdToken(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token <command>",
		Short: "Manage API tokens: create, list, revoke",
		Long: `API tokens authenticate CI jobs and people to the kobe API (Authorization: Bearer). Each has a
role, which decides what it may do and its lease quota, and a principal, whose leases it sees.`,
		Example: `  kobe token create --role ci --name github-actions --ttl 720h
  kobe token list
  kobe token revoke tok-1a2b3c`,
	}
	cmd.AddCommand(NewCmdCreate(f, nil), NewCmdList(f, nil), NewCmdRevoke(f, nil))
	return cmd
}

// CreateOptions of `kobe token create`.
type CreateOptions struct {
	Factory   *factory.Factory
	Role      string
	Name      string
	Principal string
	TTL       time.Duration
	Output    *output.Format
	// Now gives the default name's timestamp (tests fix it).
	Now func() time.Time
}

// NewCmdCreate builds `kobe token create`; runF replaces the behaviour in tests.
func NewCmdCreate(f *factory.Factory, runF func(*CreateOptions) error) *cobra.Command {
	opts := &CreateOptions{Factory: f, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "create --role ROLE",
		Short: "Create an API token (its secret is shown once)",
		Long: `Create an API token. The secret is printed once, on stdout, and cannot be shown again:
store it at once (a CI secret, a file readable only by you). Without --name the token is named
after its role and the time; without --principal it acts as its name; without --ttl it does
not expire.`,
		Example: `  kobe token create --role ci --name github-actions --ttl 720h
  kobe token create --role dev --principal alice > ~/.config/kobe/alice-token
  kobe token create --role ci -o json | jq -r .token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Role == "" {
				return fmt.Errorf("%s: --role is required (e.g. --role ci)", cmd.CommandPath())
			}
			if err := cmdutil.CheckPositive("--ttl", opts.TTL, false); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return createRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Role, "role", "", "the token's role (required)")
	cmd.Flags().StringVar(&opts.Name, "name", "", "a name for the token (default: ROLE-YYYYMMDD-HHMMSS)")
	cmd.Flags().StringVar(&opts.Principal, "principal", "", "who the token acts as (default: its name)")
	cmd.Flags().DurationVar(&opts.TTL, "ttl", 0, "the token expires after this long, e.g. 720h (default: never)")
	opts.Output = output.AddFlag(cmd)
	return cmd
}

const onceHint = "this secret is shown once and cannot be shown again: store it now (a CI secret, or a file only you can read)"

func createRun(ctx context.Context, opts *CreateOptions) error {
	ios := opts.Factory.IOStreams
	c, err := opts.Factory.APIClient()
	if err != nil {
		return err
	}
	req := api.TokenRequest{Name: opts.Name, Role: opts.Role, Principal: opts.Principal}
	if req.Name == "" {
		req.Name = opts.Role + "-" + opts.Now().UTC().Format("20060102-150405")
	}
	if opts.TTL > 0 {
		req.TTL = opts.TTL.String()
	}
	tok, err := c.CreateToken(ctx, req)
	if err != nil {
		return fmt.Errorf("create token: %w", err)
	}
	if err := opts.Output.Print(ios.Out, tok, func(w io.Writer) error {
		if ios.IsStdoutTTY() {
			fmt.Fprintf(w, "Created token %s (name %s, role %s, principal %s, expires %s):\n\n  %s\n\n",
				tok.ID, tok.Name, tok.Role, tok.Principal, expires(tok.ExpiresAt, true), tok.Secret)
			return nil
		}
		_, err := fmt.Fprintln(w, tok.Secret)
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintln(ios.ErrOut, onceHint)
	return nil
}

func expires(t *time.Time, tty bool) string {
	if t == nil {
		return "never"
	}
	return cmdutil.FormatTime(t, tty, time.Now())
}

// ListOptions of `kobe token list`.
type ListOptions struct {
	Factory *factory.Factory
	Output  *output.Format
}

// NewCmdList builds `kobe token list`; runF replaces the behaviour in tests.
func NewCmdList(f *factory.Factory, runF func(*ListOptions) error) *cobra.Command {
	opts := &ListOptions{Factory: f}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List API tokens (never their secrets)",
		Example: `  kobe token list
  kobe token list -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
	opts.Output = output.AddFlag(cmd)
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	ios := opts.Factory.IOStreams
	c, err := opts.Factory.APIClient()
	if err != nil {
		return err
	}
	toks, err := c.ListTokens(ctx)
	if err != nil {
		return err
	}
	if toks == nil {
		toks = []api.Token{}
	}
	return opts.Output.Print(ios.Out, api.TokenList{Items: toks}, func(w io.Writer) error {
		tty, now := ios.IsStdoutTTY(), time.Now()
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tROLE\tPRINCIPAL\tSTATUS\tCREATED\tEXPIRES\tLAST USED")
		for _, t := range toks {
			created := t.CreatedAt
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Role, t.Principal, status(t, now),
				cmdutil.FormatTime(&created, tty, now), expires(t.ExpiresAt, tty), cmdutil.FormatTime(t.LastUsedAt, tty, now))
		}
		return tw.Flush()
	})
}

func status(t api.Token, now time.Time) string {
	switch {
	case t.RevokedAt != nil:
		return "revoked"
	case t.ExpiresAt != nil && !t.ExpiresAt.After(now):
		return "expired"
	}
	return "active"
}

// RevokeOptions of `kobe token revoke`.
type RevokeOptions struct {
	Factory *factory.Factory
	ID      string
}

// NewCmdRevoke builds `kobe token revoke`; runF replaces the behaviour in tests.
func NewCmdRevoke(f *factory.Factory, runF func(*RevokeOptions) error) *cobra.Command {
	opts := &RevokeOptions{Factory: f}
	cmd := &cobra.Command{
		Use:     "revoke ID",
		Short:   "Revoke an API token (requests with it fail from now on)",
		Example: `  kobe token revoke tok-1a2b3c`,
		Args:    cmdutil.ExactArgs(1, "give the token id (kobe token list shows them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return revokeRun(cmd.Context(), opts)
		},
	}
	return cmd
}

func revokeRun(ctx context.Context, opts *RevokeOptions) error {
	ios := opts.Factory.IOStreams
	c, err := opts.Factory.APIClient()
	if err != nil {
		return err
	}
	if err := c.RevokeToken(ctx, opts.ID); err != nil {
		return fmt.Errorf("revoke token %s: %w", opts.ID, err)
	}
	if ios.IsStdoutTTY() {
		fmt.Fprintf(ios.Out, "revoked token %s\n", opts.ID)
	}
	return nil
}
