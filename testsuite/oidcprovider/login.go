package oidcprovider

// The provider's side of people: users who log in on a login page, and login clients (kobe's
// portal, a confidential web client; the kobe CLI, a public native client) that use the
// authorization-code grant with PKCE and the refresh-token grant.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// User is a person who logs in on the provider's login page.
type User struct {
	Subject, Username, Password, Email string
	// Claims are put into the user's ID tokens besides sub and email (groups, ...).
	Claims map[string]any
}

// LoginClient is a client of the authorization-code grant.
type LoginClient struct {
	ID string
	// Secret is empty for a public client (a CLI): it authenticates with PKCE only.
	Secret string
	// RedirectURIs it may use. A public client's loopback URI matches any port (RFC 8252).
	RedirectURIs []string
	// IDTokenLifetime; 0 = 5 minutes.
	IDTokenLifetime time.Duration
}

// AddUser registers a person.
func (p *Provider) AddUser(u User) {
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	p.storage.users[u.Username] = u
}

// AddLoginClient registers a client of the authorization-code grant.
func (p *Provider) AddLoginClient(c LoginClient) {
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	p.storage.logins[c.ID] = c
}

// LogIn plays a person's browser on the provider: it follows authorizeURL to the login page,
// submits the username and password, and returns the URL the provider then redirects to (the
// client's redirect URI with code and state, not followed). jar keeps the browser's cookies.
func (p *Provider) LogIn(t testing.TB, browser *http.Client, authorizeURL, username, password string) *url.URL {
	t.Helper()
	noFollow := *browser
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	next := authorizeURL
	for range 10 {
		resp, err := noFollow.Get(next)
		if err != nil {
			t.Fatalf("oidcprovider: %s: %v", next, err)
		}
		resp.Body.Close()
		loc, err := resp.Location()
		if err != nil {
			t.Fatalf("oidcprovider: %s answered %s without a redirect", next, resp.Status)
		}
		if strings.HasPrefix(loc.String(), p.Issuer+loginPath) {
			id := loc.Query().Get("id")
			form := url.Values{"id": {id}, "username": {username}, "password": {password}}
			resp, err := noFollow.PostForm(p.Issuer+loginPath, form)
			if err != nil {
				t.Fatalf("oidcprovider: login: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusFound {
				t.Fatalf("oidcprovider: login of %s answered %s", username, resp.Status)
			}
			next = resp.Header.Get("Location")
			continue
		}
		if !strings.HasPrefix(loc.String(), p.Issuer) {
			return loc
		}
		next = loc.String()
	}
	t.Fatalf("oidcprovider: too many redirects from %s", authorizeURL)
	return nil
}

const loginPath = "/login"

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html><head><title>Test provider: log in</title></head><body>
<h1>Log in</h1>
{{if .Error}}<p id="error">{{.Error}}</p>{{end}}
<form method="post" action="/login">
<input type="hidden" name="id" value="{{.ID}}">
<label>Username <input id="username" name="username" autocomplete="username"></label>
<label>Password <input id="password" name="password" type="password"></label>
<button id="submit" type="submit">Log in</button>
</form></body></html>`))

// handleLogin is the login step of an authorization request: GET shows the form, POST checks
// the password, marks the request done and sends the browser back to the provider's callback,
// which redirects it to the client with a code.
func (s *storage) handleLogin(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		_ = loginPage.Execute(w, map[string]string{"ID": r.URL.Query().Get("id")})
	case http.MethodPost:
		id := r.FormValue("id")
		if err := s.checkPassword(id, r.FormValue("username"), r.FormValue("password")); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			_ = loginPage.Execute(w, map[string]string{"ID": id, "Error": err.Error()})
			return
		}
		http.Redirect(w, r, s.callback(op.ContextWithIssuer(r.Context(), s.issuer), id), http.StatusFound)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func (s *storage) checkPassword(id, username, password string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	req, ok := s.authRequests[id]
	if !ok {
		return errors.New("no such login request")
	}
	u, ok := s.users[username]
	if !ok || u.Password != password {
		return errors.New("wrong username or password")
	}
	req.subject, req.done, req.authTime = u.Subject, true, time.Now()
	return nil
}

func newStorage() *storage {
	return &storage{jobs: map[string]Job{}, users: map[string]User{}, logins: map[string]LoginClient{},
		authRequests: map[string]*authRequest{}, codes: map[string]string{}, refreshTokens: map[string]*refreshToken{}}
}

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// authRequest is an authorization request between the authorize endpoint and the token
// exchange.
type authRequest struct {
	id, clientID, redirectURI, state, nonce string
	scopes                                  []string
	challenge                               *oidc.CodeChallenge
	responseType                            oidc.ResponseType
	responseMode                            oidc.ResponseMode
	subject                                 string
	done                                    bool
	authTime                                time.Time
}

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAMR() []string                      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string                 { return []string{a.clientID} }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.clientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.challenge }
func (a *authRequest) GetNonce() string                      { return a.nonce }
func (a *authRequest) GetRedirectURI() string                { return a.redirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.responseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.responseMode }
func (a *authRequest) GetScopes() []string                   { return a.scopes }
func (a *authRequest) GetState() string                      { return a.state }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.done }

// refreshToken is a refresh token the provider issued; it is rotated on each use.
type refreshToken struct {
	token, clientID, subject string
	scopes                   []string
	authTime                 time.Time
}

func (r *refreshToken) GetAMR() []string              { return []string{"pwd"} }
func (r *refreshToken) GetAudience() []string         { return []string{r.clientID} }
func (r *refreshToken) GetAuthTime() time.Time        { return r.authTime }
func (r *refreshToken) GetClientID() string           { return r.clientID }
func (r *refreshToken) GetScopes() []string           { return r.scopes }
func (r *refreshToken) GetSubject() string            { return r.subject }
func (r *refreshToken) SetCurrentScopes(sc []string)  { r.scopes = sc }
func (r *refreshToken) GetID() string                 { return r.token }
func (r *refreshToken) GetRefreshTokenID() string     { return r.token }
func (r *refreshToken) GetTokenExpiration() time.Time { return time.Now().Add(time.Hour) }

func (s *storage) CreateAuthRequest(_ context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	a := &authRequest{id: randomID(), clientID: req.ClientID, redirectURI: req.RedirectURI, state: req.State,
		nonce: req.Nonce, scopes: req.Scopes, responseType: req.ResponseType, responseMode: req.ResponseMode}
	if req.CodeChallenge != "" {
		a.challenge = &oidc.CodeChallenge{Challenge: req.CodeChallenge, Method: req.CodeChallengeMethod}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authRequests[a.id] = a
	return a, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.authRequests[id]
	if !ok {
		return nil, errors.New("oidcprovider: no such authorization request")
	}
	return a, nil
}

func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, errors.New("oidcprovider: the code is unknown or was used")
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.authRequests, id)
	for code, rid := range s.codes {
		if rid == id {
			delete(s.codes, code)
		}
	}
	return nil
}

// CreateAccessAndRefreshTokens issues a refresh token with the access token (code grant with
// offline_access), or rotates the one presented (refresh grant).
func (s *storage) CreateAccessAndRefreshTokens(_ context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt := &refreshToken{token: "rt-" + randomID(), subject: req.GetSubject(), scopes: req.GetScopes()}
	switch r := req.(type) {
	case *authRequest:
		rt.clientID, rt.authTime = r.clientID, r.authTime
	case *refreshToken:
		if _, ok := s.refreshTokens[current]; !ok {
			return "", "", time.Time{}, op.ErrInvalidRefreshToken
		}
		delete(s.refreshTokens, current)
		rt.clientID, rt.authTime = r.clientID, r.authTime
	default:
		return "", "", time.Time{}, fmt.Errorf("oidcprovider: unexpected token request %T", req)
	}
	s.refreshTokens[rt.token] = rt
	return "at-" + randomID(), rt.token, time.Now().Add(5 * time.Minute), nil
}

func (s *storage) TokenRequestByRefreshToken(_ context.Context, token string) (op.RefreshTokenRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt, ok := s.refreshTokens[token]
	if !ok {
		return nil, op.ErrInvalidRefreshToken
	}
	return rt, nil
}

func (s *storage) TerminateSession(_ context.Context, subject, clientID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, rt := range s.refreshTokens {
		if rt.subject == subject && rt.clientID == clientID {
			delete(s.refreshTokens, k)
		}
	}
	return nil
}

func (s *storage) RevokeToken(_ context.Context, token, _, clientID string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rt, ok := s.refreshTokens[token]; ok && rt.clientID == clientID {
		delete(s.refreshTokens, token)
	}
	return nil
}

func (s *storage) GetRefreshTokenInfo(_ context.Context, _, token string) (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt, ok := s.refreshTokens[token]
	if !ok {
		return "", "", op.ErrInvalidRefreshToken
	}
	return rt.subject, rt.token, nil
}

// SetUserinfoFromScopes puts a user's email and claims into their ID token (and userinfo).
func (s *storage) SetUserinfoFromScopes(_ context.Context, info *oidc.UserInfo, subject, _ string, _ []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.users {
		if u.Subject != subject {
			continue
		}
		info.Subject, info.Email, info.EmailVerified = u.Subject, u.Email, true
		for k, v := range u.Claims {
			info.AppendClaims(k, v)
		}
		return nil
	}
	return nil // a CI job's subject
}

func (s *storage) loginClient(id string) (LoginClient, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.logins[id]
	return c, ok
}

func (s *storage) GetClientByClientID(_ context.Context, clientID string) (op.Client, error) {
	if c, ok := s.loginClient(clientID); ok {
		return webClient{c}, nil
	}
	if _, err := s.job(clientID); err != nil {
		return nil, err
	}
	return client{id: clientID}, nil
}

func (s *storage) AuthorizeClientIDSecret(ctx context.Context, clientID, secret string) error {
	if c, ok := s.loginClient(clientID); ok {
		if c.Secret == "" || c.Secret != secret {
			return errors.New("oidcprovider: wrong client secret")
		}
		return nil
	}
	_, err := s.ClientCredentials(ctx, clientID, secret)
	return err
}

// webClient is a login client as the op package sees it.
type webClient struct{ c LoginClient }

func (w webClient) GetID() string                    { return w.c.ID }
func (w webClient) RedirectURIs() []string           { return w.c.RedirectURIs }
func (w webClient) PostLogoutRedirectURIs() []string { return nil }
func (w webClient) ApplicationType() op.ApplicationType {
	if w.c.Secret == "" {
		return op.ApplicationTypeNative
	}
	return op.ApplicationTypeWeb
}
func (w webClient) AuthMethod() oidc.AuthMethod {
	if w.c.Secret == "" {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}
func (w webClient) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (w webClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}
func (w webClient) LoginURL(id string) string            { return loginPath + "?id=" + url.QueryEscape(id) }
func (w webClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (w webClient) DevMode() bool                        { return true } // http redirect URIs on loopback
func (w webClient) IsScopeAllowed(sc string) bool        { return slices.Contains(supportedScopes, sc) }
func (w webClient) IDTokenUserinfoClaimsAssertion() bool { return true }
func (w webClient) ClockSkew() time.Duration             { return 0 }
func (w webClient) IDTokenLifetime() time.Duration {
	if w.c.IDTokenLifetime > 0 {
		return w.c.IDTokenLifetime
	}
	return 5 * time.Minute
}
func (w webClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (w webClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

var supportedScopes = []string{oidc.ScopeOpenID, oidc.ScopeEmail, oidc.ScopeProfile, oidc.ScopeOfflineAccess}
