// Package login implements `kobe login` and `kobe logout`: SSO for the CLI. kobe login uses
// the authorization-code grant with PKCE and a loopback redirect (RFC 8252): it works with any
// standard OpenID provider (the device flow is an optional extension many providers lack),
// needs nothing but a browser on the person's machine, and the code can only be redeemed by
// this process (it holds the PKCE verifier). The ID token is the bearer token; the refresh
// token, stored in the CLI context, gets the next one when it expires.
package login

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/spf13/cobra"
	"golang.org/x/oauth2"

	"github.com/kunobi-ninja/kobe/internal/cmd/cliconfig"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
)

// Options of `kobe login`.
type Options struct {
	Factory *factory.Factory
	// ContextName is the CLI context the credential is saved in; "" = the current one, else
	// "default".
	ContextName string
	// Open shows the login page to the person; nil = the system's browser opener (the URL is
	// printed too).
	Open func(url string) error
	// Timeout for the whole login.
	Timeout time.Duration
}

// NewCmdLogin builds `kobe login`; runF replaces the behaviour in tests.
func NewCmdLogin(f *factory.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Factory: f, Timeout: 5 * time.Minute}
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Log in to kobe with SSO (your browser) and keep the credential in the CLI context",
		Long: `Log in with the OpenID provider the server's access policy names (oidc.login with a
cliClientId): kobe opens the provider's login page in your browser and listens on a loopback
port for the answer (authorization code with PKCE). The ID token is then sent as the bearer
token, and refreshed with the refresh token when it expires. kobe logout forgets it.`,
		Example: `  kobe login --server https://kobe.example.com
  kobe login --save-as prod`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.ContextName, "save-as", "", "CLI context to save the credential in (default: the current context, else default)")
	return cmd
}

// Run logs in (what `kobe login` does).
func Run(ctx context.Context, o *Options) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	t, err := o.Factory.Target()
	if err != nil {
		return err
	}
	c, err := factory.NewClient(t)
	if err != nil {
		return err
	}
	st, err := c.Status(ctx)
	if err != nil {
		return fmt.Errorf("reading %s/v1/status: %w", t.Server, err)
	}
	if st.Auth.Login == nil {
		return fmt.Errorf("%s has no SSO login for the CLI (its access policy needs oidc.login.cliClientId); use a token (kobe context set --token-file)", t.Server)
	}
	prov, err := oidc.NewProvider(ctx, st.Auth.Login.Issuer)
	if err != nil {
		return fmt.Errorf("discovery of %s: %w", st.Auth.Login.Issuer, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	cfg := &oauth2.Config{ClientID: st.Auth.Login.ClientID, Endpoint: prov.Endpoint(), Scopes: st.Auth.Login.Scopes,
		RedirectURL: fmt.Sprintf("http://%s/callback", ln.Addr())}
	cfg.Endpoint.AuthStyle = oauth2.AuthStyleInParams // a public client: no secret
	state, verifier := oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
	codes := make(chan string, 1)
	fails := make(chan error, 1)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch {
		case r.URL.Path != "/callback":
			http.NotFound(w, r)
			return
		case subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1:
			http.Error(w, "kobe login: the state does not match this login", http.StatusForbidden)
			return // not ours: keep waiting
		case q.Get("error") != "":
			http.Error(w, "kobe login: the provider refused: "+q.Get("error"), http.StatusForbidden)
			fails <- fmt.Errorf("the provider refused the login: %s %s", q.Get("error"), q.Get("error_description"))
			return
		}
		_, _ = fmt.Fprintln(w, "Logged in to kobe. You may close this tab.")
		select {
		case codes <- q.Get("code"):
		default:
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	authURL := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))
	fmt.Fprintf(o.Factory.IOStreams.ErrOut, "Log in in your browser; if it does not open, visit:\n  %s\n", authURL)
	open := o.Open
	if open == nil {
		open = openBrowser
	}
	_ = open(authURL) // the printed URL is the fallback
	var code string
	select {
	case code = <-codes:
	case err := <-fails:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no login within %s", o.Timeout)
	}
	tok, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return fmt.Errorf("exchanging the code at %s: %w", st.Auth.Login.Issuer, err)
	}
	cred := &cliconfig.Login{Issuer: st.Auth.Login.Issuer, ClientID: cfg.ClientID, TokenURL: cfg.Endpoint.TokenURL}
	if err := cred.Update(tok); err != nil {
		return err
	}
	c.Token = cred.IDToken
	who, err := c.Status(ctx)
	if err != nil {
		return fmt.Errorf("the server refused the new login: %w", err)
	}
	name, err := save(o.ContextName, t.Server, cred)
	if err != nil {
		return err
	}
	principal := "?"
	if len(who.Auth.Sessions) > 0 {
		principal = who.Auth.Sessions[0].Principal + " (role " + who.Auth.Sessions[0].Role + ")"
	}
	fmt.Fprintf(o.Factory.IOStreams.Out, "Logged in to %s as %s; saved in context %s\n", t.Server, principal, name)
	return nil
}

// save records the credential in a context of the CLI config (created for the server if
// needed) and makes it current when none is.
func save(name, server string, cred *cliconfig.Login) (string, error) {
	path, err := cliconfig.Path()
	if err != nil {
		return "", err
	}
	c, err := cliconfig.Load(path)
	if err != nil {
		return "", err
	}
	if name == "" {
		name = c.CurrentContext
	}
	if name == "" {
		name = "default"
	}
	if err := cliconfig.ValidateName(name); err != nil {
		return "", err
	}
	if c.Contexts == nil {
		c.Contexts = map[string]cliconfig.Context{}
	}
	ctx := c.Contexts[name]
	if ctx.Server != "" && !cliconfig.SameServer(ctx.Server, server) {
		return "", fmt.Errorf("context %s is for %s, not %s: choose another with --save-as", name, ctx.Server, server)
	}
	ctx.Server, ctx.Login = server, cred
	c.Contexts[name] = ctx
	if c.CurrentContext == "" {
		c.CurrentContext = name
	}
	return name, c.Save(path)
}

func openBrowser(url string) error {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	cmd := exec.Command(name, url)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

// LogoutOptions of `kobe logout`.
type LogoutOptions struct {
	Factory     *factory.Factory
	ContextName string
}

// NewCmdLogout builds `kobe logout`; runF replaces the behaviour in tests.
func NewCmdLogout(f *factory.Factory, runF func(*LogoutOptions) error) *cobra.Command {
	opts := &LogoutOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "logout",
		Short: "Forget the SSO credential of a CLI context (kobe login)",
		Long: `Forget the credential kobe login saved in a CLI context, and ask the provider to revoke its
refresh token.`,
		Example: `  kobe logout
  kobe logout --context-name prod`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return logoutRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.ContextName, "context-name", "", "CLI context to log out of (default: the current context)")
	return cmd
}

func logoutRun(o *LogoutOptions) error {
	path, err := cliconfig.Path()
	if err != nil {
		return err
	}
	c, err := cliconfig.Load(path)
	if err != nil {
		return err
	}
	name := o.ContextName
	if name == "" {
		name = c.CurrentContext
	}
	ctx, ok := c.Contexts[name]
	if !ok || ctx.Login == nil {
		return errors.New("not logged in with kobe login in context " + name)
	}
	revoked := revoke(ctx.Login)
	ctx.Login = nil
	c.Contexts[name] = ctx
	if err := c.Save(path); err != nil {
		return err
	}
	fmt.Fprintf(o.Factory.IOStreams.Out, "Logged out of %s (context %s)\n", ctx.Server, name)
	if revoked != nil {
		fmt.Fprintf(o.Factory.IOStreams.ErrOut, "warning: the provider did not revoke the refresh token: %v\n", revoked)
	}
	return nil
}

// revoke asks the provider to revoke the refresh token (RFC 7009), when its discovery document
// names a revocation endpoint; the credential is forgotten either way.
func revoke(l *cliconfig.Login) error {
	if l.RefreshToken == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prov, err := oidc.NewProvider(ctx, l.Issuer)
	if err != nil {
		return err
	}
	var doc struct {
		Revocation string `json:"revocation_endpoint"`
	}
	if err := prov.Claims(&doc); err != nil || doc.Revocation == "" {
		return nil
	}
	form := url.Values{"token": {l.RefreshToken}, "token_type_hint": {"refresh_token"}, "client_id": {l.ClientID}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, doc.Revocation, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", doc.Revocation, resp.Status)
	}
	return nil
}
