package access

import (
	"fmt"
	"net/url"
	"slices"
	"time"
)

// Login is the SSO login of people: the authorization-code grant with PKCE against one of the
// trusted issuers. The ID token a login yields is checked like a bearer token of that issuer
// (its audiences, algorithms, identity template and rules), so a person who logs in gets the
// same principal and grant as with that ID token as a bearer token.
type Login struct {
	// Issuer is one of oidc.issuers; its audiences must contain ClientID (an ID token's aud is
	// the client it was issued to).
	Issuer string `json:"issuer"`
	// ClientID and ClientSecret are kobe's client at the provider. Without a secret kobe is a
	// public client (PKCE only).
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret,omitempty"`
	// RedirectURL is the portal's callback as registered at the provider:
	// https://<kobe>/ui/callback.
	RedirectURL string `json:"redirectUrl"`
	// Scopes asked for besides openid; default [email, profile].
	Scopes []string `json:"scopes,omitempty"`
	// CLIClientID is the public client `kobe login` uses (a loopback redirect); empty = the
	// CLI cannot log in with SSO. Its ID tokens' aud is this id: the issuer's audiences must
	// contain it too.
	CLIClientID string `json:"cliClientId,omitempty"`
	// SessionTTL is how long a portal session lasts; default 8h, at most 7 days.
	SessionTTL string `json:"sessionTtl,omitempty"`

	sessionTTL time.Duration
}

// DefaultSessionTTL is a portal session's life when the policy sets none.
const DefaultSessionTTL = 8 * time.Hour

func (l *Login) validate(o *OIDC) error {
	i := slices.IndexFunc(o.Issuers, func(is Issuer) bool { return is.Issuer == l.Issuer })
	if i < 0 {
		return fmt.Errorf("oidc.login.issuer: %q is not one of oidc.issuers", l.Issuer)
	}
	if l.ClientID == "" {
		return fmt.Errorf("oidc.login.clientId: required (kobe's client id at %s)", l.Issuer)
	}
	for _, id := range []string{l.ClientID, l.CLIClientID} {
		if id != "" && !slices.Contains(o.Issuers[i].Audiences, id) {
			return fmt.Errorf("oidc.login: the audiences of issuer %s must contain the client id %q (an ID token's aud)", l.Issuer, id)
		}
	}
	if u, err := url.Parse(l.RedirectURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path != "/ui/callback" {
		return fmt.Errorf("oidc.login.redirectUrl: %q is not an http(s) URL ending in /ui/callback", l.RedirectURL)
	}
	l.sessionTTL = DefaultSessionTTL
	if l.SessionTTL != "" {
		d, err := time.ParseDuration(l.SessionTTL)
		if err != nil || d <= 0 || d > 7*24*time.Hour {
			return fmt.Errorf("oidc.login.sessionTtl: %q is not a duration between 1s and 168h", l.SessionTTL)
		}
		l.sessionTTL = d
	}
	return nil
}

// SessionTTLOrDefault is a portal session's life.
func (l *Login) SessionTTLOrDefault() time.Duration {
	if l.sessionTTL == 0 {
		return DefaultSessionTTL
	}
	return l.sessionTTL
}

// ScopesOrDefault are the scopes a login asks for, openid first.
func (l *Login) ScopesOrDefault() []string {
	sc := l.Scopes
	if len(sc) == 0 {
		sc = []string{"email", "profile"}
	}
	out := []string{"openid"}
	for _, s := range sc {
		if s != "openid" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
