package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Typed client of the /v1 lease, pool, token and audit API. Every method sends the bearer
// token when the client has one and retries what the API marks as transient (see RetryPolicy).

// RetryPolicy bounds the retries of transient answers: 503 (any reason) and 429 rate_limited
// or server_busy. 429 quota_exhausted is an answer, not congestion, and is never retried.
type RetryPolicy struct {
	// MaxAttempts is the number of requests made in all, first included (default 4; 1 = no retry).
	MaxAttempts int
	// BaseDelay is the pause before the first retry when the answer has no Retry-After; it
	// doubles on each retry (default 500ms).
	BaseDelay time.Duration
	// MaxDelay is the longest pause honoured: an answer asking to wait longer is returned as it
	// is (default 30s).
	MaxDelay time.Duration

	// sleep replaces the pause in tests.
	sleep func(context.Context, time.Duration) error
}

const (
	defaultMaxAttempts = 4
	defaultBaseDelay   = 500 * time.Millisecond
	defaultMaxDelay    = 30 * time.Second
)

// Retryable reports whether an error is an answer the client retries: 503, or 429 with reason
// rate_limited or server_busy.
func Retryable(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.StatusCode {
	case http.StatusServiceUnavailable:
		return true
	case http.StatusTooManyRequests:
		return e.Body.Reason == ReasonRateLimited || e.Body.Reason == "server_busy"
	}
	return false
}

// Reason returns the reason code of an API error ("" for any other error).
func Reason(err error) ReasonCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Body.Reason
	}
	return ""
}

// call makes a request, retrying transient answers within the policy and the context.
func (c *Client) call(ctx context.Context, method, path string, in, out any) (int, error) {
	p := c.Retry
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = defaultMaxAttempts
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = defaultBaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = defaultMaxDelay
	}
	if p.sleep == nil {
		p.sleep = sleepCtx
	}
	delay := p.BaseDelay
	for attempt := 1; ; attempt++ {
		status, err := c.send(ctx, method, path, in, out)
		if err == nil || attempt >= p.MaxAttempts || !Retryable(err) {
			return status, err
		}
		var apiErr *Error
		errors.As(err, &apiErr)
		pause := delay
		if apiErr.RetryAfter > 0 {
			pause = apiErr.RetryAfter
		}
		if pause > p.MaxDelay {
			return status, err
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < pause {
			return status, err
		}
		if p.sleep(ctx, pause) != nil {
			return status, err
		}
		delay = min(2*delay, p.MaxDelay)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// parseRetryAfter reads a Retry-After header: seconds, or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// CreateLease asks for a lease (POST /v1/leases). The lease comes back Bound with its
// kubeconfig (200) when the pool had a warm member for it, Pending (202) otherwise; replayed is
// true when req.IdempotencyKey matched an earlier request (the server says so in the
// Kobe-Idempotent-Replay header).
//
// Without an IdempotencyKey the client makes one up for this call: a retry of a request whose
// answer was lost (a 503 after the server admitted it) then replays the first lease instead of
// admitting a second one that would hold a cluster and quota until its TTL.
// HeaderIdempotentReplay is set to "true" on the answer to a POST /v1/leases that replays an
// earlier request with the same idempotency key.
const HeaderIdempotentReplay = "Kobe-Idempotent-Replay"

func (c *Client) CreateLease(ctx context.Context, req LeaseRequest) (lease Lease, replayed bool, err error) {
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = newIdempotencyKey()
	}
	answer := &withHeader{out: &lease}
	_, err = c.call(ctx, http.MethodPost, "/v1/leases", req, answer)
	return lease, answer.header.Get(HeaderIdempotentReplay) == "true", err
}

// ListLeases returns the caller's leases (GET /v1/leases), only the one with that alias when
// alias is set.
func (c *Client) ListLeases(ctx context.Context, alias string) ([]Lease, error) {
	path := "/v1/leases"
	if alias != "" {
		path += "?alias=" + url.QueryEscape(alias)
	}
	out := []Lease{}
	_, err := c.call(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// GetLease returns a lease by id or alias (GET /v1/leases/{id|alias}); its kubeconfig is set
// once it is Bound. With wait > 0 the server holds the request until the lease is Bound or
// final, or wait has passed, and answers with the lease as it is then.
func (c *Client) GetLease(ctx context.Context, idOrAlias string, wait time.Duration) (Lease, error) {
	path := "/v1/leases/" + url.PathEscape(idOrAlias)
	if wait > 0 {
		path += "?wait=" + wait.String()
	}
	var out Lease
	_, err := c.call(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// ExtendLease extends a Bound lease by ttl (PATCH /v1/leases/{id}). Rejections carry the reason
// codes extension_budget_exhausted, max_ttl_ceiling, not_ready and sleeping (the lease's
// cluster is asleep: WakeLease first).
func (c *Client) ExtendLease(ctx context.Context, id string, ttl time.Duration) (ExtendResponse, error) {
	var out ExtendResponse
	_, err := c.call(ctx, http.MethodPatch, "/v1/leases/"+url.PathEscape(id), ExtendRequest{ExtendTTL: ttl.String()}, &out)
	return out, err
}

// ReleaseLease gives a lease back (DELETE /v1/leases/{id}); releasing twice is not an error.
func (c *Client) ReleaseLease(ctx context.Context, id string) error {
	_, err := c.call(ctx, http.MethodDelete, "/v1/leases/"+url.PathEscape(id), nil, nil)
	return err
}

// SleepLease puts a Bound lease's cluster to sleep (POST /v1/leases/{id}/sleep) and returns
// the lease as it is then (Sleeping true). Sleeping a sleeping lease is not an error; a backend
// that cannot sleep answers sleep_unsupported.
func (c *Client) SleepLease(ctx context.Context, id string) (Lease, error) {
	var out Lease
	_, err := c.call(ctx, http.MethodPost, "/v1/leases/"+url.PathEscape(id)+"/sleep", nil, &out)
	return out, err
}

// WakeLease wakes a sleeping lease's cluster (POST /v1/leases/{id}/wake) and returns once it
// is ready again; wake_failed when it did not come back within its pool's resumeTimeout.
func (c *Client) WakeLease(ctx context.Context, id string) (Lease, error) {
	var out Lease
	_, err := c.call(ctx, http.MethodPost, "/v1/leases/"+url.PathEscape(id)+"/wake", nil, &out)
	return out, err
}

// HeartbeatLease tells the server the lease is in use (POST /v1/leases/{id}/heartbeat), which
// keeps a lease with an idle timeout alive.
func (c *Client) HeartbeatLease(ctx context.Context, id string) error {
	_, err := c.call(ctx, http.MethodPost, "/v1/leases/"+url.PathEscape(id)+"/heartbeat", nil, nil)
	return err
}

// ListPools returns the pools (GET /v1/pools).
func (c *Client) ListPools(ctx context.Context) ([]PoolView, error) {
	out := []PoolView{}
	_, err := c.call(ctx, http.MethodGet, "/v1/pools", nil, &out)
	return out, err
}

// ListPoolLeases returns a pool's active leases (GET /v1/pools/{name}/leases; all: ended ones
// too). Other principals' leases come without requester, alias and metadata unless the caller
// manages pools.
func (c *Client) ListPoolLeases(ctx context.Context, pool string, all bool) ([]PoolLease, error) {
	path := "/v1/pools/" + url.PathEscape(pool) + "/leases"
	if all {
		path += "?all=true"
	}
	out := []PoolLease{}
	_, err := c.call(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// GetPool returns one pool (GET /v1/pools/{name}).
func (c *Client) GetPool(ctx context.Context, name string) (PoolView, error) {
	var out PoolView
	_, err := c.call(ctx, http.MethodGet, "/v1/pools/"+url.PathEscape(name), nil, &out)
	return out, err
}

// ApplyPool creates or updates a pool from its ClusterPool manifest in JSON
// (PUT /v1/pools/{metadata.name}); created is true when the pool is new (201).
func (c *Client) ApplyPool(ctx context.Context, manifestJSON []byte) (pool PoolView, created bool, err error) {
	var head struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(manifestJSON, &head); err != nil {
		return pool, false, fmt.Errorf("pool manifest is not JSON: %w", err)
	}
	if head.Metadata.Name == "" {
		return pool, false, errors.New("pool manifest: metadata.name: required")
	}
	status, err := c.call(ctx, http.MethodPut, "/v1/pools/"+url.PathEscape(head.Metadata.Name), json.RawMessage(manifestJSON), &pool)
	return pool, status == http.StatusCreated, err
}

// DeletePool deletes a pool (DELETE /v1/pools/{name}); draining is true when the server
// accepted the deletion but waits for the pool's leases to end first (202).
func (c *Client) DeletePool(ctx context.Context, name string) (draining bool, err error) {
	status, err := c.call(ctx, http.MethodDelete, "/v1/pools/"+url.PathEscape(name), nil, nil)
	return status == http.StatusAccepted, err
}

// CreateToken creates an API token (POST /v1/tokens); the answer's Secret is the only copy.
func (c *Client) CreateToken(ctx context.Context, req TokenRequest) (Token, error) {
	var out Token
	_, err := c.call(ctx, http.MethodPost, "/v1/tokens", req, &out)
	return out, err
}

// ListTokens returns the tokens, without their secrets (GET /v1/tokens).
func (c *Client) ListTokens(ctx context.Context) ([]Token, error) {
	var out TokenList
	_, err := c.call(ctx, http.MethodGet, "/v1/tokens", nil, &out)
	return out.Items, err
}

// RevokeToken revokes a token (DELETE /v1/tokens/{id}).
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	_, err := c.call(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(id), nil, nil)
	return err
}

// AuditQuery selects audit events; zero fields do not filter.
type AuditQuery struct {
	// Since is an RFC 3339 time or a duration back from the server's now ("1h").
	Since  string
	Actor  string
	Pool   string
	Action string
	// After returns only events with a larger id (paging: the last id of the previous page).
	After int64
	Limit int
}

// Values encodes the query as URL parameters.
func (q AuditQuery) Values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("since", q.Since)
	set("actor", q.Actor)
	set("pool", q.Pool)
	set("action", q.Action)
	if q.After > 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// ListAudit returns audit events, oldest first (GET /v1/audit).
func (c *Client) ListAudit(ctx context.Context, q AuditQuery) ([]AuditEvent, error) {
	path := "/v1/audit"
	if v := q.Values(); len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out AuditList
	_, err := c.call(ctx, http.MethodGet, path, nil, &out)
	return out.Items, err
}

// newIdempotencyKey is a key no other request has: 128 random bits.
func newIdempotencyKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	return "kobe-client-" + hex.EncodeToString(b)
}

// InstanceFilter selects instances in ListInstances; empty fields match everything.
type InstanceFilter struct {
	Pool, Phase, Host string
}

// ListInstances returns the instances the store records (GET /v1/instances; pool.admin).
func (c *Client) ListInstances(ctx context.Context, f InstanceFilter) ([]Instance, error) {
	q := url.Values{}
	for k, v := range map[string]string{"pool": f.Pool, "phase": f.Phase, "host": f.Host} {
		if v != "" {
			q.Set(k, v)
		}
	}
	path := "/v1/instances"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	out := []Instance{}
	_, err := c.call(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// GetInstance returns one instance (GET /v1/instances/{id}).
func (c *Client) GetInstance(ctx context.Context, id string) (Instance, error) {
	var out Instance
	_, err := c.call(ctx, http.MethodGet, "/v1/instances/"+url.PathEscape(id), nil, &out)
	return out, err
}

// RetryTeardown retries a Quarantined instance's teardown (POST /v1/instances/{id}/retry-teardown);
// another phase is refused with reason not_quarantined.
func (c *Client) RetryTeardown(ctx context.Context, id string) (RetryTeardown, error) {
	var out RetryTeardown
	_, err := c.call(ctx, http.MethodPost, "/v1/instances/"+url.PathEscape(id)+"/retry-teardown", nil, &out)
	return out, err
}

// ForgetInstance drops kobe's record of a Quarantined instance cleaned up by hand
// (DELETE /v1/instances/{id}; admin role); force forgets an instance in any phase.
func (c *Client) ForgetInstance(ctx context.Context, id string, force bool) error {
	path := "/v1/instances/" + url.PathEscape(id)
	if force {
		path += "?force=true"
	}
	_, err := c.call(ctx, http.MethodDelete, path, nil, nil)
	return err
}
