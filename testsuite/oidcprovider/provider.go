// Package oidcprovider runs a real OpenID provider for tests: the OpenID-certified provider of
// github.com/zitadel/oidc/v3 (its op package: discovery, JWKS, the token endpoint), with a small
// in-memory storage written here. It issues GitHub-Actions-shaped tokens: each CI job is a client
// of the client_credentials grant whose JWT access token carries the job's subject
// (repo:<owner>/<repo>:ref:<ref>), audience and claims (repository, ref, ...), signed RS256 with
// the provider's current key. Keys can be rotated.
package oidcprovider

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Job is a client of the provider that gets tokens: a CI job.
type Job struct {
	ClientID, Secret string
	Subject          string
	Audience         []string
	Claims           map[string]any // repository, ref, ...
	// Lifetime of its tokens; negative = already expired when issued. 0 = 5 minutes.
	Lifetime time.Duration
}

// GitHubJob is a job shaped like a GitHub Actions workflow run of owner/repo at ref, whose token
// is asked for the audience kobe-system.
func GitHubJob(repository, ref string) Job {
	return Job{
		ClientID: "gha-" + repository + "@" + ref, Secret: "secret-" + repository,
		Subject:  "repo:" + repository + ":ref:" + ref,
		Audience: []string{"kobe-system"},
		Claims: map[string]any{
			"repository": repository, "ref": ref, "repository_owner": repositoryOwner(repository),
			"event_name": "push", "workflow": "ci", "runner_environment": "github-hosted",
		},
	}
}

func repositoryOwner(repo string) string {
	for i := range repo {
		if repo[i] == '/' {
			return repo[:i]
		}
	}
	return repo
}

// Provider is a running OpenID provider.
type Provider struct {
	// Issuer is its URL (http on a loopback port).
	Issuer string

	server  *httptest.Server
	storage *storage
}

// Start runs a provider until the test ends.
func Start(t testing.TB) *Provider {
	t.Helper()
	st := newStorage()
	if err := st.rotate(); err != nil {
		t.Fatal(err)
	}
	var handler http.Handler
	var ready sync.WaitGroup
	ready.Add(1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ready.Wait()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	var cryptoKey [32]byte
	_, _ = rand.Read(cryptoKey[:])
	p, err := op.NewProvider(&op.Config{CryptoKey: cryptoKey, CodeMethodS256: true, AuthMethodPost: true,
		GrantTypeRefreshToken: true,
		SupportedScopes:       supportedScopes}, st,
		op.StaticIssuer(srv.URL), op.WithAllowInsecure())
	if err != nil {
		t.Fatalf("oidcprovider: %v", err)
	}
	st.issuer, st.callback = srv.URL, op.AuthCallbackURL(p)
	mux := http.NewServeMux()
	mux.Handle(loginPath, http.HandlerFunc(st.handleLogin))
	mux.Handle("/", p)
	handler = mux
	ready.Done()
	return &Provider{Issuer: srv.URL, server: srv, storage: st}
}

// Close stops the provider before the test ends (an issuer that went away).
func (p *Provider) Close() { p.server.Close() }

// AddJob registers a job (a client) of the provider.
func (p *Provider) AddJob(j Job) {
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	p.storage.jobs[j.ClientID] = j
}

// Token asks the provider's token endpoint for a fresh token of the job (client_credentials,
// client secret in the Authorization header). The answer is read by hand rather than with
// x/oauth2, which cannot parse the negative expires_in of an already expired token.
func (p *Provider) Token(t testing.TB, j Job) string {
	t.Helper()
	p.AddJob(j)
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {"openid"}}
	req, err := http.NewRequest(http.MethodPost, p.tokenURL(t), strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(j.ClientID), url.QueryEscape(j.Secret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("oidcprovider: token of %s: %v", j.ClientID, err)
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.AccessToken == "" {
		t.Fatalf("oidcprovider: token of %s: %s %v %s %s", j.ClientID, resp.Status, err, body.Error, body.Description)
	}
	return body.AccessToken
}

func (p *Provider) tokenURL(t testing.TB) string {
	resp, err := http.Get(p.Issuer + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatalf("oidcprovider: discovery: %v", err)
	}
	defer resp.Body.Close()
	var doc struct {
		TokenEndpoint string `json:"token_endpoint"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || doc.TokenEndpoint == "" {
		t.Fatalf("oidcprovider: discovery document without token_endpoint: %v", err)
	}
	return doc.TokenEndpoint
}

// RotateKey makes a new signing key current; the JWKS then serves only the new key.
func (p *Provider) RotateKey(t testing.TB) {
	t.Helper()
	if err := p.storage.rotate(); err != nil {
		t.Fatal(err)
	}
}

// PublicKey is the current signing key's public half and its key id (for forging tests).
func (p *Provider) PublicKey() (*rsa.PublicKey, string) {
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	return &p.storage.key.PublicKey, p.storage.keyID
}

// storage is the provider's state: the jobs (clients) and the signing key. Only what the
// client_credentials grant, discovery and the JWKS need is supported; the rest answers errors.
type storage struct {
	mu    sync.Mutex
	jobs  map[string]Job
	key   *rsa.PrivateKey
	keyID string

	// People (login.go).
	issuer        string
	callback      func(context.Context, string) string // the provider's callback after the login step
	users         map[string]User
	logins        map[string]LoginClient
	authRequests  map[string]*authRequest
	codes         map[string]string // code → auth request id
	refreshTokens map[string]*refreshToken
}

var errUnsupported = errors.New("oidcprovider: not supported by the test provider")

func (s *storage) rotate() error {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key, s.keyID = k, "key-"+hex.EncodeToString(id)
	return nil
}

func (s *storage) job(clientID string) (Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[clientID]
	if !ok {
		return Job{}, fmt.Errorf("oidcprovider: no client %q", clientID)
	}
	return j, nil
}

// The client_credentials grant.

func (s *storage) ClientCredentials(_ context.Context, clientID, secret string) (op.Client, error) {
	j, err := s.job(clientID)
	if err != nil {
		return nil, err
	}
	if j.Secret != secret {
		return nil, errors.New("oidcprovider: wrong client secret")
	}
	return client{id: clientID}, nil
}

func (s *storage) ClientCredentialsTokenRequest(_ context.Context, clientID string, scopes []string) (op.TokenRequest, error) {
	j, err := s.job(clientID)
	if err != nil {
		return nil, err
	}
	return tokenRequest{job: j, scopes: scopes}, nil
}

type tokenRequest struct {
	job    Job
	scopes []string
}

func (r tokenRequest) GetSubject() string    { return r.job.Subject }
func (r tokenRequest) GetAudience() []string { return r.job.Audience }
func (r tokenRequest) GetScopes() []string   { return r.scopes }

func (s *storage) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	life := 5 * time.Minute
	if tr, ok := req.(tokenRequest); ok && tr.job.Lifetime != 0 {
		life = tr.job.Lifetime
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	return hex.EncodeToString(id), time.Now().Add(life), nil
}

func (s *storage) GetPrivateClaimsFromScopes(_ context.Context, _, clientID string, _ []string) (map[string]any, error) {
	if _, ok := s.loginClient(clientID); ok {
		return nil, nil // a person's ID token gets its claims from SetUserinfoFromScopes
	}
	j, err := s.job(clientID)
	if err != nil {
		return nil, err
	}
	return j.Claims, nil
}

// Keys.

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.key }
func (k signingKey) ID() string                                  { return k.id }

type publicKey struct {
	id  string
	key *rsa.PublicKey
}

func (k publicKey) ID() string                         { return k.id }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return k.key }

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return signingKey{id: s.keyID, key: s.key}, nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []op.Key{publicKey{id: s.keyID, key: &s.key.PublicKey}}, nil
}

func (s *storage) Health(context.Context) error { return nil }

// The client of a job: client_credentials only, JWT access tokens.
type client struct{ id string }

func (c client) GetID() string                       { return c.id }
func (c client) RedirectURIs() []string              { return nil }
func (c client) PostLogoutRedirectURIs() []string    { return nil }
func (c client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c client) ResponseTypes() []oidc.ResponseType  { return nil }
func (c client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}
func (c client) LoginURL(string) string              { return "" }
func (c client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (c client) IDTokenLifetime() time.Duration      { return 5 * time.Minute }
func (c client) DevMode() bool                       { return false }
func (c client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c client) IsScopeAllowed(string) bool           { return true }
func (c client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c client) ClockSkew() time.Duration             { return 0 }

// What the client_credentials grant does not use. The authorization-code and refresh-token
// grants of people are in login.go.

func (s *storage) SetUserinfoFromToken(context.Context, *oidc.UserInfo, string, string, string) error {
	return errUnsupported
}
func (s *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errUnsupported
}
func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errUnsupported
}
func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errUnsupported
}
