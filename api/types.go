package api

import "time"

// Wire types of the /v1 lease, pool, token and audit API. Lease fields follow the upstream kobe
// API (snake_case where upstream uses it: effective_ttl, queue_position, expires_at,
// cluster_name) so that existing clients, such as the upstream GitHub Action, keep working.

// MinLeaseTTL is the shortest ttl a lease may ask for (POST /v1/leases; shorter is 400
// invalid_request). A lease must outlive its own bind: the API answering a warm bind writes
// the Bound row and the kubeconfig after the pool bound it, and a lease ending meanwhile would
// be refused that write (it stays ended) and answered without its cluster.
const MinLeaseTTL = 5 * time.Second

// LeaseRequest is the body of POST /v1/leases. Upstream clients send only {"profile", "ttl"};
// "pool" is kobe's name for the same thing (if both are given they must match).
type LeaseRequest struct {
	Pool           string            `json:"pool,omitempty"`
	Profile        string            `json:"profile,omitempty"`
	TTL            string            `json:"ttl,omitempty"`
	Alias          string            `json:"alias,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	IdempotencyKey string            `json:"idempotencyKey,omitempty"`
	Priority       int               `json:"priority,omitempty"`
	// IdleTimeout ends the lease early when no heartbeat (POST /v1/leases/{id}/heartbeat)
	// arrives for that long; empty = no idle timeout.
	IdleTimeout string `json:"idleTimeout,omitempty"`
}

// Lease is the lease object the API returns.
type Lease struct {
	ID           string     `json:"id"`
	ResourceKind string     `json:"resourceKind"` // always "Cluster"
	Phase        LeasePhase `json:"phase"`
	Profile      string     `json:"profile"` // the pool (upstream name)
	Pool         string     `json:"pool"`
	// EffectiveTTL is the TTL granted after policy clamping, as a Go duration string.
	EffectiveTTL  string            `json:"effective_ttl"`
	QueuePosition int               `json:"queue_position,omitempty"`
	Alias         string            `json:"alias,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	Owner         string            `json:"owner,omitempty"`
	// Reason is the reason code of a Failed lease (e.g. pool_exhausted) or of an early end.
	Reason      ReasonCode `json:"reason,omitempty"`
	ClusterName string     `json:"cluster_name,omitempty"`
	Endpoint    string     `json:"endpoint,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	BoundAt     *time.Time `json:"bound_at,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	Extensions  int        `json:"extensions"`
	// Sleeping says the lease's cluster is asleep (POST /v1/leases/{id}/sleep): its kubeconfig's
	// requests are refused until it wakes (condition Sleeping).
	Sleeping bool `json:"sleeping,omitempty"`
	// Capabilities are the operations open to the caller on this lease now (release while
	// Pending; kubeconfig, extend, release once Bound; none once it ended).
	Capabilities []string `json:"capabilities"`
	// Conditions are observations about the lease, such as its cluster failing health checks
	// (type InstanceHealthy, status False, reason health_failed); empty when there are none.
	Conditions []LeaseCondition `json:"conditions"`
	// Kubeconfig is present on GET /v1/leases/{id} once the lease is Bound.
	Kubeconfig string `json:"kubeconfig,omitempty"`
}

// LeaseCondition is one observation about a lease, in the shape of Kubernetes conditions.
type LeaseCondition struct {
	Type               string     `json:"type"`
	Status             string     `json:"status"` // True or False
	Reason             ReasonCode `json:"reason,omitempty"`
	Message            string     `json:"message,omitempty"`
	LastTransitionTime time.Time  `json:"lastTransitionTime"`
}

// PoolLease is one lease of GET /v1/pools/{name}/leases. Requester, alias and metadata are shown
// only for the caller's own leases, or to a role that manages pools (pool.admin).
type PoolLease struct {
	ID          string            `json:"id"`
	Phase       LeasePhase        `json:"phase"`
	Profile     string            `json:"profile"`
	ClusterName string            `json:"cluster_name,omitempty"`
	Requester   string            `json:"requester,omitempty"`
	ExpiresAt   *time.Time        `json:"expires_at,omitempty"`
	Alias       string            `json:"alias,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	CreatedAt   time.Time         `json:"created_at"`
}

// ExtendRequest is the body of PATCH /v1/leases/{id}; extend_ttl is accepted too.
type ExtendRequest struct {
	ExtendTTL      string `json:"extendTtl,omitempty"`
	ExtendTTLSnake string `json:"extend_ttl,omitempty"`
}

// ExtendResponse answers PATCH /v1/leases/{id}.
type ExtendResponse struct {
	ExpiresAt time.Time `json:"expires_at"`
}

// PoolPolicy is the part of a pool's policy shown to lease holders.
type PoolPolicy struct {
	Mode          string `json:"mode"` // fixed or autoscale
	TTL           string `json:"ttl"`
	MaxTTL        string `json:"maxTtl"`
	MaxExtensions int    `json:"maxExtensions"`
	WarmTarget    int    `json:"warmTarget"`
	MaxClusters   int    `json:"maxClusters"`
	QueueTimeout  string `json:"queueTimeout"`
	// UnusedSize is the manifest's spec.size when spec.scaling is set too: accepted, as
	// upstream does, and not used (the warm target is spec.scaling.minReady).
	UnusedSize *int `json:"unusedSize,omitempty"`
}

// PoolView is the pool object of GET /v1/pools[/{name}].
type PoolView struct {
	Name         string `json:"name"`
	ResourceKind string `json:"resourceKind"` // always "Cluster", as upstream: what the pool leases
	Backend      string `json:"backend"`
	// Capabilities are the operations open to the caller on this pool: lease, kubeconfig,
	// extend, release (a role that may lease from it), apply, delete (pool.admin).
	Capabilities []string `json:"capabilities"`
	// BackendCapabilities are the optional features of the pool's backend (sleep,
	// certRotation), whether or not kobe uses them yet.
	BackendCapabilities []string   `json:"backendCapabilities"`
	Phase               PoolPhase  `json:"phase,omitempty"`
	Ready               int        `json:"ready"`
	Leased              int        `json:"leased"`
	Creating            int        `json:"creating"`
	Recycling           int        `json:"recycling"`
	Unhealthy           int        `json:"unhealthy"`
	Quarantined         int        `json:"quarantined"`
	Outdated            int        `json:"outdated"`
	QueueDepth          int        `json:"queueDepth"`
	ConsecutiveFailures int        `json:"consecutiveFailures"`
	LastFailureReason   string     `json:"lastFailureReason,omitempty"`
	NextAttemptAt       *time.Time `json:"nextAttemptAt,omitempty"`
	Policy              PoolPolicy `json:"policy"`
	Generation          int64      `json:"generation"`
	// ManagedBy names the Kubernetes resource that manages the pool ("ClusterPool/dev"):
	// PUT and DELETE /v1/pools/{name} refuse it (managed_externally). Absent for a pool
	// applied through the API.
	ManagedBy string `json:"managedBy,omitempty"`
}

// TokenRequest is the body of POST /v1/tokens.
type TokenRequest struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// Principal is who the token acts as; defaults to Name.
	Principal string `json:"principal,omitempty"`
	// TTL bounds the token's life (e.g. "720h"); empty = does not expire.
	TTL string `json:"ttl,omitempty"`
}

// Token is a token as listed; Secret is set only in the answer to its creation.
type Token struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	Principal  string     `json:"principal"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	Secret     string     `json:"token,omitempty"`
}

// AuditEvent is one entry of GET /v1/audit (oldest first; ?since=RFC3339|duration,
// ?actor=, ?pool=, ?action=, ?after=ID, ?limit=).
type AuditEvent struct {
	ID        int64          `json:"id"`
	Time      time.Time      `json:"time"`
	Actor     string         `json:"actor"`
	Action    string         `json:"action"`
	Target    string         `json:"target"`
	Result    string         `json:"result"`
	RequestID string         `json:"request_id,omitempty"`
	Detail    map[string]any `json:"detail,omitempty"`
}

// List envelopes. Leases and pools are listed as bare JSON arrays, as upstream; tokens and the
// audit log are kobe's own and keep their object.
type (
	TokenList struct {
		Items []Token `json:"items"`
	}
	AuditList struct {
		Items []AuditEvent `json:"items"`
	}
)

// Instance is a cluster as kobe's store records it (GET /v1/instances[/{id}]): what an operator
// needs to find and clean up a member whose teardown kept failing (phase Quarantined).
type Instance struct {
	ID       string        `json:"id"`
	Pool     string        `json:"pool"`
	Backend  string        `json:"backend"`
	Host     string        `json:"host,omitempty"`
	Phase    InstancePhase `json:"phase"`
	Endpoint string        `json:"endpoint,omitempty"`
	// Message is the last thing kobe noted about the instance, e.g. why its teardown failed.
	Message   string    `json:"message,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// RetryTeardown answers POST /v1/instances/{id}/retry-teardown (202): Via is "pool" when the
// pool's workflow was asked to retry, "teardown" when the pool is gone and the API started a
// Teardown workflow itself (WorkflowID).
type RetryTeardown struct {
	ID         string `json:"id"`
	Via        string `json:"via"`
	WorkflowID string `json:"workflowId"`
}
