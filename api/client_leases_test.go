package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorded is one request the fake server saw.
type recorded struct {
	Method, Path, Query, Auth, ContentType string
	Body                                   string
}

// fakeAPI answers each request with the next scripted answer for its "METHOD path" and records it.
type fakeAPI struct {
	mu      sync.Mutex
	answers map[string][]answer
	seen    []recorded
	sleeps  []time.Duration // pauses the client's retry policy asked for
}

type answer struct {
	status int
	header map[string]string
	body   any
}

func newFake(t *testing.T, answers map[string][]answer) (*fakeAPI, *Client) {
	f := &fakeAPI{answers: answers}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := NewClient(srv.URL)
	require.NoError(t, err)
	c.Token = "s3cret"
	c.Retry.sleep = func(ctx context.Context, d time.Duration) error { f.slept(d); return ctx.Err() }
	return f, c
}

func (f *fakeAPI) slept(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sleeps = append(f.sleeps, d)
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, recorded{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(body)})
	key := r.Method + " " + r.URL.EscapedPath()
	list := f.answers[key]
	if len(list) == 0 {
		f.mu.Unlock()
		writeError(w, http.StatusNotFound, ReasonNotFound, "no scripted answer for "+key, "")
		return
	}
	a := list[0]
	if len(list) > 1 {
		f.answers[key] = list[1:]
	}
	f.mu.Unlock()
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	if a.body == nil {
		w.WriteHeader(a.status)
		return
	}
	writeJSON(w, a.status, a.body)
}

func (f *fakeAPI) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.seen...)
}

func TestCreateLeaseSendsTheRequestAndToken(t *testing.T) {
	f, c := newFake(t, map[string][]answer{
		"POST /v1/leases": {
			{status: 202, body: Lease{ID: "lease-1", Phase: "Pending", Pool: "ci", QueuePosition: 2}},
			{status: 200, header: map[string]string{HeaderIdempotentReplay: "true"}, body: Lease{ID: "lease-1", Phase: "Pending", Pool: "ci"}},
			{status: 200, body: Lease{ID: "lease-2", Phase: "Bound", Pool: "ci", Kubeconfig: "apiVersion: v1\n"}},
		},
	})
	req := LeaseRequest{Pool: "ci", TTL: "1h0m0s", Alias: "e2e", Metadata: map[string]string{"job": "42"}, IdempotencyKey: "k1", Priority: 5}
	l, replayed, err := c.CreateLease(context.Background(), req)
	require.NoError(t, err)
	assert.False(t, replayed)
	assert.Equal(t, "lease-1", l.ID)
	assert.Equal(t, 2, l.QueuePosition)

	_, replayed, err = c.CreateLease(context.Background(), req)
	require.NoError(t, err)
	assert.True(t, replayed, "the server says the idempotency key replayed")

	// 200 without the header: a warm bind, Bound at once with its kubeconfig; not a replay.
	l, replayed, err = c.CreateLease(context.Background(), LeaseRequest{Pool: "ci", IdempotencyKey: "k2"})
	require.NoError(t, err)
	assert.False(t, replayed)
	assert.Equal(t, LeaseBound, l.Phase)
	assert.NotEmpty(t, l.Kubeconfig)

	seen := f.requests()
	require.Len(t, seen, 3)
	assert.Equal(t, "Bearer s3cret", seen[0].Auth)
	assert.Equal(t, "application/json", seen[0].ContentType)
	var sent map[string]any
	require.NoError(t, json.Unmarshal([]byte(seen[0].Body), &sent))
	assert.Equal(t, map[string]any{"pool": "ci", "ttl": "1h0m0s", "alias": "e2e", "metadata": map[string]any{"job": "42"},
		"idempotencyKey": "k1", "priority": float64(5)}, sent)
}

func TestNoTokenNoAuthorizationHeader(t *testing.T) {
	f, c := newFake(t, map[string][]answer{"GET /v1/pools": {{status: 200, body: []PoolView{{Name: "dev"}}}}})
	c.Token = ""
	pools, err := c.ListPools(context.Background())
	require.NoError(t, err)
	require.Len(t, pools, 1)
	assert.Equal(t, "", f.requests()[0].Auth)
}

func TestLeaseMethodsPathsAndAnswers(t *testing.T) {
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	f, c := newFake(t, map[string][]answer{
		"GET /v1/leases":                    {{status: 200, body: []Lease{{ID: "lease-1", Alias: "my e2e"}}}},
		"GET /v1/leases/my%20e2e":           {{status: 200, body: Lease{ID: "lease-1", Phase: "Bound", Kubeconfig: "apiVersion: v1\n"}}},
		"PATCH /v1/leases/lease-1":          {{status: 200, body: ExtendResponse{ExpiresAt: exp}}},
		"DELETE /v1/leases/lease-1":         {{status: 204}},
		"POST /v1/leases/lease-1/heartbeat": {{status: 204}},
	})
	ctx := context.Background()
	ls, err := c.ListLeases(ctx, "my e2e")
	require.NoError(t, err)
	require.Len(t, ls, 1)
	l, err := c.GetLease(ctx, "my e2e", 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "apiVersion: v1\n", l.Kubeconfig)
	ext, err := c.ExtendLease(ctx, "lease-1", 30*time.Minute)
	require.NoError(t, err)
	assert.True(t, exp.Equal(ext.ExpiresAt))
	require.NoError(t, c.ReleaseLease(ctx, "lease-1"))
	require.NoError(t, c.HeartbeatLease(ctx, "lease-1"))

	seen := f.requests()
	require.Len(t, seen, 5)
	assert.Equal(t, "alias=my+e2e", seen[0].Query)
	assert.Equal(t, "wait=30s", seen[1].Query)
	assert.JSONEq(t, `{"extendTtl":"30m0s"}`, seen[2].Body)
	assert.Equal(t, "DELETE", seen[3].Method)
	assert.Equal(t, "/v1/leases/lease-1/heartbeat", seen[4].Path)
}

func TestPoolMethods(t *testing.T) {
	f, c := newFake(t, map[string][]answer{
		"GET /v1/pools/ci":    {{status: 200, body: PoolView{Name: "ci", Ready: 2}}},
		"PUT /v1/pools/ci":    {{status: 201, body: PoolView{Name: "ci", Generation: 1}}, {status: 200, body: PoolView{Name: "ci", Generation: 2}}},
		"DELETE /v1/pools/ci": {{status: 202}, {status: 204}},
	})
	ctx := context.Background()
	p, err := c.GetPool(ctx, "ci")
	require.NoError(t, err)
	assert.Equal(t, 2, p.Ready)

	manifest := []byte(`{"apiVersion":"kobe.kunobi.ninja/v1alpha1","kind":"ClusterPool","metadata":{"name":"ci"},"spec":{"size":2}}`)
	p, created, err := c.ApplyPool(ctx, manifest)
	require.NoError(t, err)
	assert.True(t, created)
	assert.EqualValues(t, 1, p.Generation)
	_, created, err = c.ApplyPool(ctx, manifest)
	require.NoError(t, err)
	assert.False(t, created)

	draining, err := c.DeletePool(ctx, "ci")
	require.NoError(t, err)
	assert.True(t, draining)
	draining, err = c.DeletePool(ctx, "ci")
	require.NoError(t, err)
	assert.False(t, draining)

	seen := f.requests()
	assert.JSONEq(t, string(manifest), seen[1].Body, "the manifest goes as it is")

	_, _, err = c.ApplyPool(ctx, []byte(`{"metadata":{}}`))
	require.ErrorContains(t, err, "metadata.name")
}

func TestTokenAndAuditMethods(t *testing.T) {
	f, c := newFake(t, map[string][]answer{
		"POST /v1/tokens":         {{status: 201, body: Token{ID: "tok-1", Name: "ci", Role: "ci", Secret: "kobe_abc"}}},
		"GET /v1/tokens":          {{status: 200, body: TokenList{Items: []Token{{ID: "tok-1"}}}}},
		"DELETE /v1/tokens/tok-1": {{status: 204}},
		"GET /v1/audit":           {{status: 200, body: AuditList{Items: []AuditEvent{{ID: 7, Action: "lease.created"}}}}},
	})
	ctx := context.Background()
	tok, err := c.CreateToken(ctx, TokenRequest{Name: "ci", Role: "ci", TTL: "720h"})
	require.NoError(t, err)
	assert.Equal(t, "kobe_abc", tok.Secret)
	toks, err := c.ListTokens(ctx)
	require.NoError(t, err)
	assert.Len(t, toks, 1)
	require.NoError(t, c.RevokeToken(ctx, "tok-1"))
	evs, err := c.ListAudit(ctx, AuditQuery{Since: "1h", Actor: "alice", Pool: "ci", Action: "lease.created", After: 6, Limit: 50})
	require.NoError(t, err)
	require.Len(t, evs, 1)

	seen := f.requests()
	assert.JSONEq(t, `{"name":"ci","role":"ci","ttl":"720h"}`, seen[0].Body)
	assert.Equal(t, "action=lease.created&actor=alice&after=6&limit=50&pool=ci&since=1h", seen[3].Query)
}

func TestErrorsCarryTheEnvelope(t *testing.T) {
	_, c := newFake(t, map[string][]answer{
		"POST /v1/leases": {{status: 429, body: ErrorBody{Error: "Quota exhausted", Detail: "3 of 3 leases", Reason: ReasonQuotaExhausted}}},
	})
	_, _, err := c.CreateLease(context.Background(), LeaseRequest{Pool: "ci"})
	var apiErr *Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, 429, apiErr.StatusCode)
	assert.Equal(t, ReasonQuotaExhausted, Reason(err))
	assert.Equal(t, "3 of 3 leases", apiErr.Body.Detail)
}

func TestRetries(t *testing.T) {
	busy := answer{status: 503, header: map[string]string{"Retry-After": "2"}, body: ErrorBody{Error: "busy", Reason: "admission_busy"}}
	limited := answer{status: 429, header: map[string]string{"Retry-After": "1"}, body: ErrorBody{Error: "slow down", Reason: ReasonRateLimited}}
	quota := answer{status: 429, body: ErrorBody{Error: "Quota exhausted", Reason: ReasonQuotaExhausted}}
	noHeader := answer{status: 503, body: ErrorBody{Error: "degraded", Reason: ReasonDegraded}}
	ok := answer{status: 202, body: Lease{ID: "lease-1"}}

	for _, tc := range []struct {
		name     string
		answers  []answer
		attempts int
		sleeps   []time.Duration
		wantErr  ReasonCode
	}{
		{"503 then ok, honouring Retry-After", []answer{busy, ok}, 2, []time.Duration{2 * time.Second}, ""},
		{"rate_limited then ok", []answer{limited, limited, ok}, 3, []time.Duration{time.Second, time.Second}, ""},
		{"quota_exhausted is not retried", []answer{quota, ok}, 1, nil, ReasonQuotaExhausted},
		{"no Retry-After: backoff doubles", []answer{noHeader, noHeader, noHeader, ok}, 4, []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}, ""},
		{"bounded attempts", []answer{busy, busy, busy, busy, ok}, 4, []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}, "admission_busy"},
		{"Retry-After beyond MaxDelay is returned", []answer{{status: 503, header: map[string]string{"Retry-After": "3600"}, body: ErrorBody{Error: "down"}}, ok}, 1, nil, "HTTP 503"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFake(t, map[string][]answer{"POST /v1/leases": tc.answers})
			_, _, err := c.CreateLease(context.Background(), LeaseRequest{Pool: "ci", IdempotencyKey: "k"})
			if tc.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, string(tc.wantErr))
			}
			assert.Len(t, f.requests(), tc.attempts)
			assert.Equal(t, tc.sleeps, f.sleeps)
			for _, r := range f.requests() {
				assert.JSONEq(t, `{"pool":"ci","idempotencyKey":"k"}`, r.Body, "every attempt sends the whole body")
			}
		})
	}
}

func TestCreateLeaseRetriesWithOneIdempotencyKey(t *testing.T) {
	// The server admitted the first request but its answer was a 503: without a key of its own
	// the retry would admit a second lease.
	busy := answer{status: 503, body: ErrorBody{Error: "busy", Reason: ReasonDegraded}}
	f, c := newFake(t, map[string][]answer{"POST /v1/leases": {busy, {status: 200, header: map[string]string{HeaderIdempotentReplay: "true"}, body: Lease{ID: "lease-1"}}}})
	_, replayed, err := c.CreateLease(context.Background(), LeaseRequest{Pool: "ci"})
	require.NoError(t, err)
	assert.True(t, replayed)
	seen := f.requests()
	require.Len(t, seen, 2)
	var first, second LeaseRequest
	require.NoError(t, json.Unmarshal([]byte(seen[0].Body), &first))
	require.NoError(t, json.Unmarshal([]byte(seen[1].Body), &second))
	assert.Regexp(t, `^kobe-client-[0-9a-f]{32}$`, first.IdempotencyKey)
	assert.Equal(t, first.IdempotencyKey, second.IdempotencyKey, "the retry replays the same request")

	// Another call is another request: another key.
	f.answers["POST /v1/leases"] = []answer{{status: 202, body: Lease{ID: "lease-2"}}}
	_, _, err = c.CreateLease(context.Background(), LeaseRequest{Pool: "ci"})
	require.NoError(t, err)
	var third LeaseRequest
	require.NoError(t, json.Unmarshal([]byte(f.requests()[2].Body), &third))
	assert.NotEqual(t, first.IdempotencyKey, third.IdempotencyKey)
}

func TestRetryStopsWithTheContext(t *testing.T) {
	busy := answer{status: 503, header: map[string]string{"Retry-After": "5"}, body: ErrorBody{Error: "busy"}}
	f, c := newFake(t, map[string][]answer{"GET /v1/pools": {busy, busy, busy}})
	c.Retry.sleep = nil // real pauses
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	t0 := time.Now()
	_, err := c.ListPools(ctx)
	require.ErrorContains(t, err, "HTTP 503")
	assert.Less(t, time.Since(t0), time.Second, "a pause longer than the deadline is not started")
	assert.Len(t, f.requests(), 1)

	// A cancelled context ends a pause at once.
	c.Retry.MaxDelay = time.Minute
	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel2)
	t0 = time.Now()
	_, err = c.ListPools(ctx2)
	require.Error(t, err)
	assert.Less(t, time.Since(t0), 2*time.Second)
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	assert.Equal(t, 3*time.Second, parseRetryAfter("3", now))
	assert.Equal(t, time.Duration(0), parseRetryAfter("", now))
	assert.Equal(t, time.Duration(0), parseRetryAfter("soon", now))
	assert.Equal(t, 10*time.Second, parseRetryAfter(now.Add(10*time.Second).Format(http.TimeFormat), now))
}

// writeJSON and writeError answer as the server does (package server has its own).
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, reason ReasonCode, msg, detail string) {
	writeJSON(w, status, ErrorBody{Error: msg, Detail: detail, Reason: reason})
}
