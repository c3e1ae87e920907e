package server

// SSO login of people: the authorization-code grant with PKCE against the policy's login
// issuer (access.Login), a server-side session in the store named by an HttpOnly cookie, CSRF
// protection of every mutation made with that cookie, and logout.
//
// Why sessions live in the store rather than in a sealed cookie: logout must end a session at
// once and everywhere (a stolen cookie is useless after it), which a sealed cookie can only do
// with a revocation record looked up on every request anyway; a row per session looked up by
// the hash of the cookie's secret is that lookup with nothing sealed to rotate. The claims of
// the login's ID token are kept, so every request maps them through the identity template and
// rules in force (a rule removed from the policy ends what it granted).

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"go.uber.org/zap"
	"golang.org/x/oauth2"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/identity"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// Cookie and header names of the portal.
const (
	SessionCookie = "kobe_session"
	loginCookie   = "kobe_login"
	// CSRFHeader carries the session's CSRF token on a cookie-authenticated API mutation; a
	// form sends it as the field csrf.
	CSRFHeader    = "X-CSRF-Token"
	csrfField     = "csrf"
	sessionPrefix = "kobes_"
	loginAttempt  = 10 * time.Minute // how long a login may take at the provider
)

// sso is the login client, discovered at the first login (a provider that is down does not
// stop kobe).
type sso struct {
	mu     sync.Mutex
	config *oauth2.Config
	box    *secretbox.Box // seals the login cookie
}

// oauthConfig discovers the login issuer's endpoints once.
func (s *Server) oauthConfig(ctx context.Context) (*oauth2.Config, error) {
	l := s.Policy.OIDC.Login
	s.login.mu.Lock()
	defer s.login.mu.Unlock()
	if s.login.config != nil {
		return s.login.config, nil
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, l.Issuer)
	if err != nil {
		return nil, fmt.Errorf("%w: discovery of %s: %v", access.ErrIdentityUnavailable, l.Issuer, err)
	}
	s.login.config = &oauth2.Config{ClientID: l.ClientID, ClientSecret: l.ClientSecret, RedirectURL: l.RedirectURL,
		Endpoint: p.Endpoint(), Scopes: l.ScopesOrDefault()}
	return s.login.config, nil
}

func (s *Server) loginBox() *secretbox.Box {
	s.login.mu.Lock()
	defer s.login.mu.Unlock()
	if s.login.box == nil {
		// The workers' key when there is one (every replica opens every other's cookie);
		// a process-local key otherwise (a login then must come back to the same process).
		s.login.box = s.Secrets
		if s.login.box == nil {
			s.login.box = secretbox.Random()
		}
	}
	return s.login.box
}

func (s *Server) loginConfigured() bool {
	return s.Policy.OIDC != nil && s.Policy.OIDC.Login != nil
}

// pendingLogin is what the login cookie holds between /ui/login and /ui/callback, sealed.
type pendingLogin struct {
	State    string    `json:"state"`
	Nonce    string    `json:"nonce"`
	Verifier string    `json:"verifier"`
	Next     string    `json:"next"`
	Expires  time.Time `json:"expires"`
}

var loginAAD = []byte("kobe-login-v1")

// secureCookies: Secure when the request came over TLS (directly or, as the redirect URL
// says, behind a proxy that terminates it).
func (s *Server) secureCookies(r *http.Request) bool {
	return r.TLS != nil || (s.loginConfigured() && strings.HasPrefix(s.Policy.OIDC.Login.RedirectURL, "https://"))
}

// handleLogin starts a login: a fresh state, nonce and PKCE verifier, sealed into a short-lived
// cookie, and a redirect to the provider.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	if !s.loginConfigured() {
		s.portalError(w, r, http.StatusNotFound, "SSO login is not configured: the access policy has no oidc.login")
		return
	}
	cfg, err := s.oauthConfig(r.Context())
	if err != nil {
		s.portalError(w, r, http.StatusServiceUnavailable, err.Error())
		return
	}
	pl := pendingLogin{State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier(),
		Next: safeNext(r.URL.Query().Get("next")), Expires: time.Now().Add(loginAttempt)}
	raw, _ := json.Marshal(pl)
	sealed, err := s.loginBox().Seal(raw, loginAAD)
	if err != nil {
		s.portalError(w, r, http.StatusInternalServerError, "sealing the login state failed")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: base64.RawURLEncoding.EncodeToString(sealed), Path: "/ui/callback",
		MaxAge: int(loginAttempt.Seconds()), HttpOnly: true, Secure: s.secureCookies(r), SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, cfg.AuthCodeURL(pl.State, oidc.Nonce(pl.Nonce), oauth2.S256ChallengeOption(pl.Verifier)), http.StatusFound)
}

// safeNext keeps a post-login destination inside the portal (no open redirect).
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/"
	}
	return next
}

// handleCallback completes a login: the state must be the cookie's, the code is exchanged
// with the PKCE verifier, the ID token is verified like a bearer token of the issuer and must
// carry the cookie's nonce; then a session is recorded with its login event.
func (s *Server) handleCallback(w http.ResponseWriter, r *http.Request) {
	if !s.loginConfigured() {
		s.portalError(w, r, http.StatusNotFound, "SSO login is not configured: the access policy has no oidc.login")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Path: "/ui/callback", MaxAge: -1, HttpOnly: true,
		Secure: s.secureCookies(r), SameSite: http.SameSiteLaxMode})
	if n := len(r.URL.RawQuery); n > callbackQueryMax {
		s.loginFailed(w, r, http.StatusBadRequest, "", fmt.Sprintf("the callback's query is %d bytes, more than the %d a provider sends", n, callbackQueryMax))
		return
	}
	pl, err := s.openPendingLogin(r)
	if err != nil {
		s.loginFailed(w, r, http.StatusBadRequest, "", err.Error())
		return
	}
	q := r.URL.Query()
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(pl.State)) != 1 {
		s.loginFailed(w, r, http.StatusForbidden, "", "the state does not match the login this browser started")
		return
	}
	if e := q.Get("error"); e != "" {
		s.loginFailed(w, r, http.StatusForbidden, "", "the provider refused the login: "+e+" "+q.Get("error_description"))
		return
	}
	cfg, err := s.oauthConfig(r.Context())
	if err != nil {
		s.portalError(w, r, http.StatusServiceUnavailable, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(pl.Verifier))
	if err != nil {
		s.loginFailed(w, r, http.StatusForbidden, "", "the provider refused the code: "+err.Error())
		return
	}
	rawID, _ := tok.Extra("id_token").(string)
	if rawID == "" {
		s.loginFailed(w, r, http.StatusForbidden, "", "the provider answered without an ID token")
		return
	}
	p, claims, err := s.verifyIDToken(ctx, rawID)
	if err != nil {
		status := http.StatusForbidden
		if errors.Is(err, access.ErrIdentityUnavailable) {
			status = http.StatusServiceUnavailable
		}
		s.loginFailed(w, r, status, p.Name, err.Error())
		return
	}
	if nonce, _ := claims["nonce"].(string); subtle.ConstantTimeCompare([]byte(nonce), []byte(pl.Nonce)) != 1 {
		s.loginFailed(w, r, http.StatusForbidden, p.Name, "the ID token's nonce is not the one of this login")
		return
	}
	if !audienceHas(claims["aud"], s.Policy.OIDC.Login.ClientID) {
		s.loginFailed(w, r, http.StatusForbidden, p.Name, "the ID token was not issued to kobe's client "+s.Policy.OIDC.Login.ClientID)
		return
	}
	secret, err := s.startSession(r, p, claims)
	if err != nil {
		s.auditFailed(w, r, "recording the session", err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: secret, Path: "/", MaxAge: int(s.Policy.OIDC.Login.SessionTTLOrDefault().Seconds()),
		HttpOnly: true, Secure: s.secureCookies(r), SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, pl.Next, http.StatusFound)
}

func audienceHas(aud any, id string) bool {
	switch a := aud.(type) {
	case string:
		return a == id
	case []any:
		return slices.ContainsFunc(a, func(v any) bool { s, _ := v.(string); return s == id })
	}
	return false
}

func (s *Server) verifyIDToken(ctx context.Context, raw string) (access.Principal, map[string]any, error) {
	v, ok := s.Auth.OIDC.(*identity.Verifier)
	if !ok {
		return access.Principal{}, nil, errors.New("no OIDC verifier")
	}
	return v.VerifyClaims(ctx, raw)
}

func (s *Server) openPendingLogin(r *http.Request) (pendingLogin, error) {
	c, err := r.Cookie(loginCookie)
	if err != nil {
		return pendingLogin{}, errors.New("no login in progress in this browser (start at /ui/login)")
	}
	sealed, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return pendingLogin{}, errors.New("the login cookie is damaged")
	}
	raw, err := s.loginBox().Open(sealed, loginAAD)
	if err != nil {
		return pendingLogin{}, errors.New("the login cookie was not made by this kobe")
	}
	var pl pendingLogin
	if err := json.Unmarshal(raw, &pl); err != nil || time.Now().After(pl.Expires) {
		return pendingLogin{}, errors.New("the login took too long; start again at /ui/login")
	}
	return pl, nil
}

// startSession records a session and its login event together.
func (s *Server) startSession(r *http.Request, p access.Principal, claims map[string]any) (string, error) {
	secret := sessionPrefix + randomString() + randomString()
	id := newID("sess-")
	rawClaims, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	exp := time.Now().Add(s.Policy.OIDC.Login.SessionTTLOrDefault())
	ctx := context.WithValue(r.Context(), principalKey{}, p)
	err = s.Store.InTx(ctx, func(tx store.Store) error {
		if _, err := tx.CreateSession(ctx, store.Session{ID: id, Hash: access.HashToken(secret), Principal: p.Name,
			Issuer: p.Issuer, Claims: rawClaims, ExpiresAt: exp}); err != nil {
			return err
		}
		_, err := tx.AppendEvent(ctx, s.auditEvent(r.WithContext(ctx), "login", id, "", "ok",
			map[string]any{"method": api.AuthSession, "issuer": p.Issuer, "role": p.Role}))
		return err
	})
	return secret, err
}

// loginFailed audits a refused login (anyone can make one: through the throttle, with its
// texts clipped, abuse.go) and shows why.
func (s *Server) loginFailed(w http.ResponseWriter, r *http.Request, status int, who, reason string) {
	reason = clip(reason)
	s.auditRefusal(r, who, map[string]any{"reason": reason})
	if s.Logger != nil {
		s.Logger.Info("login refused", zap.String("reason", reason), zap.String("requestId", requestID(r)))
	}
	s.portalError(w, r, status, "Login refused: "+reason)
}

// handleLogout ends the cookie's session (a form post carrying the CSRF token).
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	se, p, err := s.sessionOf(r)
	if err != nil {
		http.Redirect(w, r, "/ui/login", http.StatusFound)
		return
	}
	if !s.csrfValid(r, se) {
		writeError(w, http.StatusForbidden, api.ReasonForbidden, "Forbidden", "missing or wrong CSRF token")
		return
	}
	ctx := context.WithValue(r.Context(), principalKey{}, p)
	err = s.Store.InTx(ctx, func(tx store.Store) error {
		if err := tx.RevokeSession(ctx, se.ID); err != nil {
			return err
		}
		_, err := tx.AppendEvent(ctx, s.auditEvent(r.WithContext(ctx), "logout", se.ID, "", "ok", nil))
		return err
	})
	if err != nil {
		s.auditFailed(w, r, "ending the session", err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.secureCookies(r), SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, "/ui/login?next=/ui/", http.StatusSeeOther)
}

// activeSession is a session found by its cookie.
type activeSession struct {
	store.Session
	secret string
}

// sessionOf authenticates the session cookie: an unknown, revoked or expired session is
// ErrUnauthenticated; its claims are mapped through the policy as it is now.
func (s *Server) sessionOf(r *http.Request) (activeSession, access.Principal, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || !strings.HasPrefix(c.Value, sessionPrefix) || !s.loginConfigured() {
		return activeSession{}, access.Principal{}, access.ErrUnauthenticated
	}
	se, err := s.Store.GetSessionByHash(r.Context(), access.HashToken(c.Value))
	if errors.Is(err, store.ErrNotFound) {
		return activeSession{}, access.Principal{}, access.ErrUnauthenticated
	}
	if err != nil {
		return activeSession{}, access.Principal{}, err
	}
	if !se.RevokedAt.IsZero() || time.Now().After(se.ExpiresAt) {
		return activeSession{}, access.Principal{}, fmt.Errorf("%w: the session ended; log in again at /ui/login", access.ErrUnauthenticated)
	}
	v, ok := s.Auth.OIDC.(*identity.Verifier)
	if !ok {
		return activeSession{}, access.Principal{}, access.ErrUnauthenticated
	}
	var claims map[string]any
	if err := json.Unmarshal(se.Claims, &claims); err != nil {
		return activeSession{}, access.Principal{}, err
	}
	p, err := v.Admit(se.Issuer, claims)
	if err != nil {
		return activeSession{}, p, err // a 403 names the identity in its audit
	}
	p.SessionID, p.ExpiresAt = se.ID, se.ExpiresAt
	return activeSession{Session: se, secret: c.Value}, p, nil
}

// csrfToken is the session's synchronizer token: derived from the cookie's secret, so it needs
// no storage, and a page of another site, which can make the browser send the cookie but not
// read it, cannot know it.
func csrfToken(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("kobe-csrf-v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// csrfValid checks the CSRF token of a cookie-authenticated mutation: the X-CSRF-Token header,
// or the csrf field of a form.
func (s *Server) csrfValid(r *http.Request, se activeSession) bool {
	got := r.Header.Get(CSRFHeader)
	if got == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		got = r.PostFormValue(csrfField)
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(csrfToken(se.secret))) == 1
}

// safeMethod: a request that changes nothing (no CSRF token needed).
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// authenticate finds a request's principal: the bearer token when one is sent, else the
// session cookie, whose mutations must carry the CSRF token (errCSRF otherwise).
func (s *Server) authenticate(r *http.Request) (access.Principal, error) {
	if h := r.Header.Get("Authorization"); h != "" || !hasSessionCookie(r) {
		return s.Auth.Authenticate(r.Context(), h)
	}
	se, p, err := s.sessionOf(r)
	if err != nil {
		return p, err
	}
	if !safeMethod(r.Method) && !s.csrfValid(r, se) {
		return access.Principal{}, errCSRF
	}
	return p, nil
}

var errCSRF = errors.New("a request authenticated by the session cookie that changes something must send the session's CSRF token (X-CSRF-Token)")

func hasSessionCookie(r *http.Request) bool {
	_, err := r.Cookie(SessionCookie)
	return err == nil
}

func randomString() string {
	return newID("") + newID("")
}
