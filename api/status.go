package api

import "time"

// Status is the body of GET /v1/status. Field names are camelCase, as upstream.
type Status struct {
	Version   string          `json:"version"`
	Commit    string          `json:"commit,omitempty"`
	GoVersion string          `json:"goVersion"`
	Backends  []string        `json:"backends"`
	Temporal  TemporalHealth  `json:"temporal"`
	Store     StoreHealth     `json:"store"`
	Auth      AuthInfo        `json:"auth"`
	Pools     []PoolSummary   `json:"pools"`
	Workers   []WorkerSummary `json:"workers"`
}

// TemporalHealth says whether the API reaches Temporal.
type TemporalHealth struct {
	Address   string  `json:"address"`
	Namespace string  `json:"namespace"`
	TaskQueue string  `json:"taskQueue"`
	Healthy   bool    `json:"healthy"`
	LatencyMs float64 `json:"latencyMs"`
	Error     string  `json:"error,omitempty"`
}

// StoreHealth says whether the store accepts writes.
type StoreHealth struct {
	Driver        string  `json:"driver"`
	SchemaVersion int     `json:"schemaVersion"`
	Healthy       bool    `json:"healthy"`
	LatencyMs     float64 `json:"latencyMs"`
	Error         string  `json:"error,omitempty"`
}

// AuthInfo describes the authentication in force and the caller's session. Methods is
// ["bearer"] (tokens are required), or ["none"] under --insecure-no-auth. Sessions is empty
// without a token, else the one session of the token sent.
type AuthInfo struct {
	// Methods in force: bearer (kobe tokens), oidc (the issuers' JWTs), or none.
	Methods []string `json:"methods"`
	// Issuers trusted for oidc bearer tokens.
	Issuers  []string  `json:"issuers,omitempty"`
	Sessions []Session `json:"sessions"`
	// Login is how `kobe login` logs in (the policy's oidc.login with a cliClientId).
	Login *LoginInfo `json:"login,omitempty"`
}

// LoginInfo names the provider and the public client of `kobe login` (authorization code with
// PKCE and a loopback redirect).
type LoginInfo struct {
	Issuer   string   `json:"issuer"`
	ClientID string   `json:"clientId"`
	Scopes   []string `json:"scopes"`
}

// Session is who a request acts as: never the token's secret.
type Session struct {
	Principal string `json:"principal"`
	Role      string `json:"role"`
	// Method is how the request authenticated: bearer (a kobe token), oidc (a JWT) or session
	// (the portal's cookie).
	Method string `json:"method,omitempty"`
	// Issuer of an oidc token.
	Issuer    string     `json:"issuer,omitempty"`
	TokenName string     `json:"tokenName,omitempty"`
	TokenID   string     `json:"tokenId,omitempty"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// Authentication methods reported in /v1/status.
const (
	AuthBearer = "bearer"
	AuthNone   = "none"
	AuthOIDC   = "oidc"
	// AuthSession is a portal session: a person logged in with SSO (cookie).
	AuthSession = "session"
)

// PoolSummary is one pool in /v1/status: a pool the caller may use, with what it may do there.
type PoolSummary struct {
	Name         string   `json:"name"`
	ResourceKind string   `json:"resourceKind"`
	Backend      string   `json:"backend"`
	Capabilities []string `json:"capabilities"`
}

// WorkerSummary is one worker polling kobe's task queue.
type WorkerSummary struct {
	Identity       string    `json:"identity"`
	LastAccessTime time.Time `json:"lastAccessTime"`
}
