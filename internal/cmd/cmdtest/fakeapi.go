// Package cmdtest is a fake kobe API for the CLI's unit tests: an httptest server implementing
// just enough of /v1 (leases, pools, tokens, audit) in memory, with knobs for the cases the
// commands must handle (queueing, failures, quotas, extension budgets). The real API is tested
// end to end elsewhere.
package cmdtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/cliconfig"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
)

// Token is the bearer the fake API accepts.
const Token = "test-token"

// Request is a request the fake API received.
type Request struct {
	Method, Path, Query, Body string
}

// API is the fake server. Lock Mu to read or change its state while a command runs.
type API struct {
	*httptest.Server
	Mu sync.Mutex

	Leases map[string]*api.Lease
	// IdempotencyKeys is the key each lease was created with, by lease id.
	IdempotencyKeys map[string]string
	Pools           map[string]*api.PoolView
	Tokens          map[string]*api.Token
	Audit           []api.AuditEvent
	Requests        []Request
	// Instances are the clusters the fake records; Retried and Forgotten the instance ids the
	// commands retried and forgot, in order.
	Instances map[string]*api.Instance
	Retried   []string
	Forgotten []string

	// PendingPolls is how many GETs a new lease stays Pending before it binds (0: binds at once
	// on the first GET); QueuePosition is its position meanwhile.
	PendingPolls  int
	QueuePosition int
	// FailReason, when set, makes a Pending lease end Failed with this reason instead of binding.
	FailReason api.ReasonCode
	// Quota is the most active leases the caller may hold (0: no limit).
	Quota int
	// MaxExtensions is the extension budget (default 2); MaxTTL the ceiling from bind time.
	MaxExtensions int
	MaxTTL        time.Duration
	// Heartbeats counts heartbeats per lease.
	Heartbeats map[string]int
	// Fail, when set, answers every request whose "METHOD path" it matches with this error.
	Fail map[string]Failure

	polls map[string]int
	seq   int
}

// Failure is a scripted error answer.
type Failure struct {
	Status     int
	Reason     api.ReasonCode
	Detail     string
	RetryAfter string
}

// New starts a fake API with one pool, "ci".
func New(t testing.TB) *API {
	a := &API{
		Leases: map[string]*api.Lease{}, IdempotencyKeys: map[string]string{}, Tokens: map[string]*api.Token{},
		Pools: map[string]*api.PoolView{"ci": {Name: "ci", ResourceKind: "Cluster", Backend: "local", Phase: "Healthy", Ready: 2,
			Capabilities: []string{"lease", "kubeconfig", "extend", "release", "apply", "delete"}, BackendCapabilities: []string{"sleep"},
			Policy: api.PoolPolicy{Mode: "fixed", TTL: "1h0m0s", MaxTTL: "24h0m0s", MaxExtensions: 2, WarmTarget: 2, MaxClusters: 4, QueueTimeout: "5m0s"}, Generation: 1}},
		Heartbeats: map[string]int{}, Fail: map[string]Failure{}, polls: map[string]int{}, Instances: map[string]*api.Instance{},
		MaxExtensions: 2, MaxTTL: 24 * time.Hour,
	}
	a.Server = httptest.NewServer(a)
	t.Cleanup(a.Close)
	return a
}

// Factory returns a factory whose API client talks to the fake with its token, and test streams.
func (a *API) Factory() (*factory.Factory, *iostreams.IOStreams) {
	ios, _, _, _ := iostreams.Test()
	f := &factory.Factory{IOStreams: ios}
	f.Target = func() (cliconfig.Target, error) { return cliconfig.Target{Server: a.URL, Token: Token}, nil }
	f.APIClient = func() (*api.Client, error) {
		c, err := api.NewClient(a.URL)
		if err != nil {
			return nil, err
		}
		c.Token = Token
		c.Retry.BaseDelay = time.Millisecond
		return c, nil
	}
	return f, ios
}

// Seen returns the requests received so far, as "METHOD path?query".
func (a *API) Seen() []string {
	a.Mu.Lock()
	defer a.Mu.Unlock()
	var out []string
	for _, r := range a.Requests {
		s := r.Method + " " + r.Path
		if r.Query != "" {
			s += "?" + r.Query
		}
		out = append(out, s)
	}
	return out
}

// Lease returns a copy of a lease.
func (a *API) Lease(id string) api.Lease {
	a.Mu.Lock()
	defer a.Mu.Unlock()
	if l := a.Leases[id]; l != nil {
		return *l
	}
	return api.Lease{}
}

// OnlyLease returns the one lease the fake holds (the test fails otherwise).
func (a *API) OnlyLease(t testing.TB) api.Lease {
	a.Mu.Lock()
	defer a.Mu.Unlock()
	if len(a.Leases) != 1 {
		t.Fatalf("want exactly one lease, the fake API holds %d", len(a.Leases))
	}
	for _, l := range a.Leases {
		return *l
	}
	return api.Lease{}
}

// IdempotencyKey is the key the lease was created with ("" if none).
func (a *API) IdempotencyKey(leaseID string) string {
	a.Mu.Lock()
	defer a.Mu.Unlock()
	return a.IdempotencyKeys[leaseID]
}

func fail(w http.ResponseWriter, status int, reason api.ReasonCode, msg, detail string) {
	writeJSON(w, status, api.ErrorBody{Error: msg, Reason: reason, Detail: detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	a.Mu.Lock()
	defer a.Mu.Unlock()
	a.Requests = append(a.Requests, Request{r.Method, r.URL.Path, r.URL.RawQuery, string(body)})
	if r.Header.Get("Authorization") != "Bearer "+Token {
		fail(w, 401, api.ReasonUnauthorized, "Missing or invalid bearer token", "")
		return
	}
	if f, ok := a.Fail[r.Method+" "+r.URL.Path]; ok {
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		fail(w, f.Status, f.Reason, http.StatusText(f.Status), f.Detail)
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 2 || parts[0] != "v1" {
		fail(w, 404, api.ReasonNotFound, "Not found", "")
		return
	}
	switch parts[1] {
	case "leases":
		a.leases(w, r, parts[2:], body)
	case "pools":
		a.pools(w, r, parts[2:], body)
	case "tokens":
		a.tokens(w, r, parts[2:], body)
	case "audit":
		writeJSON(w, 200, api.AuditList{Items: a.Audit})
	case "instances":
		a.instances(w, r, parts[2:])
	default:
		fail(w, 404, api.ReasonNotFound, "Not found", "")
	}
}

func (a *API) active() int {
	n := 0
	for _, l := range a.Leases {
		if l.Phase == "Pending" || l.Phase == "Bound" {
			n++
		}
	}
	return n
}

func (a *API) find(idOrAlias string) *api.Lease {
	if l := a.Leases[idOrAlias]; l != nil {
		return l
	}
	for _, l := range a.Leases {
		if l.Alias == idOrAlias && (l.Phase == "Pending" || l.Phase == "Bound") {
			return l
		}
	}
	return nil
}

// Kubeconfig is what a bound lease's kubeconfig holds in the fake.
func Kubeconfig(id string) string {
	return "apiVersion: v1\nkind: Config\ncurrent-context: " + id + "\n"
}

func (a *API) leases(w http.ResponseWriter, r *http.Request, rest []string, body []byte) {
	now := time.Now().UTC()
	switch {
	case len(rest) == 0 && r.Method == http.MethodPost:
		var req api.LeaseRequest
		if err := json.Unmarshal(body, &req); err != nil {
			fail(w, 400, api.ReasonInvalidRequest, "bad body", err.Error())
			return
		}
		if req.IdempotencyKey != "" {
			for id, key := range a.IdempotencyKeys {
				if key == req.IdempotencyKey {
					writeJSON(w, 200, a.Leases[id])
					return
				}
			}
		}
		pool := a.Pools[req.Pool]
		if pool == nil {
			fail(w, 404, api.ReasonNotFound, "Pool not found", req.Pool)
			return
		}
		if a.Quota > 0 && a.active() >= a.Quota {
			fail(w, 429, api.ReasonQuotaExhausted, "Quota exhausted", fmt.Sprintf("%d of %d active leases", a.active(), a.Quota))
			return
		}
		if req.Alias != "" && a.find(req.Alias) != nil {
			fail(w, 409, api.ReasonAliasTaken, "Alias taken", req.Alias)
			return
		}
		ttl := req.TTL
		if ttl == "" {
			ttl = pool.Policy.TTL
		}
		a.seq++
		l := &api.Lease{ID: fmt.Sprintf("lease-%04d", a.seq), ResourceKind: "Cluster", Phase: "Pending", Profile: req.Pool, Pool: req.Pool,
			EffectiveTTL: ttl, QueuePosition: a.QueuePosition, Alias: req.Alias, Metadata: req.Metadata, Owner: "tester", CreatedAt: now}
		if req.IdempotencyKey != "" {
			a.IdempotencyKeys[l.ID] = req.IdempotencyKey
		}
		a.Leases[l.ID] = l
		writeJSON(w, 202, l)
	case len(rest) == 0 && r.Method == http.MethodGet:
		items := []api.Lease{}
		alias := r.URL.Query().Get("alias")
		for _, l := range a.Leases {
			if (l.Phase == "Pending" || l.Phase == "Bound") && (alias == "" || l.Alias == alias) {
				items = append(items, *l)
			}
		}
		sort.Slice(items, func(i, j int) bool { return items[i].ID < items[j].ID })
		writeJSON(w, 200, items)
	case len(rest) == 1 && r.Method == http.MethodGet:
		l := a.find(rest[0])
		if l == nil {
			fail(w, 404, api.ReasonNotFound, "Lease not found", "")
			return
		}
		if l.Phase == "Pending" {
			if a.polls[l.ID] >= a.PendingPolls {
				if a.FailReason != "" {
					l.Phase, l.Reason, l.QueuePosition = "Failed", a.FailReason, 0
				} else {
					ttl, _ := time.ParseDuration(l.EffectiveTTL)
					exp := now.Add(ttl)
					bound := now
					l.Phase, l.QueuePosition, l.BoundAt, l.ExpiresAt = "Bound", 0, &bound, &exp
					l.ClusterName, l.Endpoint = "ci-1", "https://127.0.0.1:6443"
				}
			} else if l.QueuePosition > 1 {
				l.QueuePosition--
			}
			a.polls[l.ID]++
		}
		out := *l
		if out.Phase == "Bound" {
			out.Kubeconfig = Kubeconfig(l.ID)
		}
		writeJSON(w, 200, out)
	case len(rest) == 1 && r.Method == http.MethodPatch:
		l := a.Leases[rest[0]]
		if l == nil {
			fail(w, 404, api.ReasonNotFound, "Lease not found", "")
			return
		}
		var req api.ExtendRequest
		_ = json.Unmarshal(body, &req)
		d, err := time.ParseDuration(req.ExtendTTL)
		if err != nil {
			fail(w, 400, api.ReasonInvalidRequest, "bad extendTtl", req.ExtendTTL)
			return
		}
		switch {
		case l.Phase != "Bound":
			fail(w, 409, api.ReasonNotReady, "Lease not bound", "")
		case l.Extensions >= a.MaxExtensions:
			fail(w, 409, api.ReasonExtensionBudgetExhausted, "Extension budget exhausted", fmt.Sprintf("%d of %d extensions used", l.Extensions, a.MaxExtensions))
		case l.ExpiresAt.Add(d).After(l.BoundAt.Add(a.MaxTTL)):
			fail(w, 409, api.ReasonMaxTTLCeiling, "Max TTL ceiling", "")
		default:
			exp := l.ExpiresAt.Add(d)
			l.ExpiresAt = &exp
			l.Extensions++
			writeJSON(w, 200, api.ExtendResponse{ExpiresAt: exp})
		}
	case len(rest) == 1 && r.Method == http.MethodDelete:
		if l := a.Leases[rest[0]]; l != nil && (l.Phase == "Pending" || l.Phase == "Bound") {
			l.Phase = "Released"
		}
		w.WriteHeader(204)
	case len(rest) == 2 && rest[1] == "heartbeat" && r.Method == http.MethodPost:
		if a.Leases[rest[0]] == nil {
			fail(w, 404, api.ReasonNotFound, "Lease not found", "")
			return
		}
		a.Heartbeats[rest[0]]++
		w.WriteHeader(204)
	default:
		fail(w, 405, api.ReasonInvalidRequest, "Method not allowed", "")
	}
}

func (a *API) pools(w http.ResponseWriter, r *http.Request, rest []string, body []byte) {
	switch {
	case len(rest) == 0 && r.Method == http.MethodGet:
		items := []api.PoolView{}
		for _, name := range sortedPools(a.Pools) {
			items = append(items, *a.Pools[name])
		}
		writeJSON(w, 200, items)
	case len(rest) == 1 && r.Method == http.MethodGet:
		p := a.Pools[rest[0]]
		if p == nil {
			fail(w, 404, api.ReasonNotFound, "Pool not found", "")
			return
		}
		writeJSON(w, 200, p)
	case len(rest) == 2 && rest[1] == "leases" && r.Method == http.MethodGet:
		if a.Pools[rest[0]] == nil {
			fail(w, 404, api.ReasonNotFound, "Pool not found", "")
			return
		}
		// The fake's caller owns every lease, so nothing is redacted.
		items := []api.PoolLease{}
		for _, l := range a.Leases {
			if l.Pool == rest[0] && (r.URL.Query().Get("all") == "true" || l.Phase == "Pending" || l.Phase == "Bound") {
				items = append(items, api.PoolLease{ID: l.ID, Phase: l.Phase, Profile: l.Pool, ClusterName: l.ClusterName,
					Requester: l.Owner, ExpiresAt: l.ExpiresAt, Alias: l.Alias, Metadata: l.Metadata, CreatedAt: l.CreatedAt})
			}
		}
		sort.Slice(items, func(i, j int) bool { return items[i].ID < items[j].ID })
		writeJSON(w, 200, items)
	case len(rest) == 1 && r.Method == http.MethodPut:
		var m struct {
			Metadata struct{ Name string } `json:"metadata"`
			Spec     struct {
				Size    int `json:"size"`
				Backend struct {
					Type string `json:"type"`
				} `json:"backend"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(body, &m); err != nil || m.Metadata.Name != rest[0] {
			fail(w, 400, api.ReasonInvalidRequest, "bad manifest", "")
			return
		}
		p, existed := a.Pools[rest[0]]
		if !existed {
			p = &api.PoolView{Name: rest[0], ResourceKind: "Cluster", Capabilities: []string{"lease", "kubeconfig", "extend", "release", "apply", "delete"}}
			a.Pools[rest[0]] = p
		}
		p.Backend, p.Generation, p.Policy.WarmTarget, p.Phase = m.Spec.Backend.Type, p.Generation+1, m.Spec.Size, "ScalingUp"
		status := 200
		if !existed {
			status = 201
		}
		writeJSON(w, status, p)
	case len(rest) == 1 && r.Method == http.MethodDelete:
		if a.Pools[rest[0]] == nil {
			fail(w, 404, api.ReasonNotFound, "Pool not found", "")
			return
		}
		for _, l := range a.Leases {
			if l.Pool == rest[0] && (l.Phase == "Pending" || l.Phase == "Bound") {
				w.WriteHeader(202)
				return
			}
		}
		delete(a.Pools, rest[0])
		w.WriteHeader(204)
	default:
		fail(w, 405, api.ReasonInvalidRequest, "Method not allowed", "")
	}
}

func sortedPools(m map[string]*api.PoolView) []string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (a *API) tokens(w http.ResponseWriter, r *http.Request, rest []string, body []byte) {
	switch {
	case len(rest) == 0 && r.Method == http.MethodPost:
		var req api.TokenRequest
		if err := json.Unmarshal(body, &req); err != nil || req.Role == "" || req.Name == "" {
			fail(w, 400, api.ReasonInvalidRequest, "bad token request", "")
			return
		}
		a.seq++
		tok := &api.Token{ID: fmt.Sprintf("tok-%04d", a.seq), Name: req.Name, Role: req.Role, Principal: req.Principal, CreatedAt: time.Now().UTC()}
		if tok.Principal == "" {
			tok.Principal = req.Name
		}
		if req.TTL != "" {
			d, _ := time.ParseDuration(req.TTL)
			exp := tok.CreatedAt.Add(d)
			tok.ExpiresAt = &exp
		}
		a.Tokens[tok.ID] = tok
		out := *tok
		out.Secret = "kobe_secret_" + tok.ID
		writeJSON(w, 201, out)
	case len(rest) == 0 && r.Method == http.MethodGet:
		items := []api.Token{}
		for _, t := range a.Tokens {
			items = append(items, *t)
		}
		sort.Slice(items, func(i, j int) bool { return items[i].ID < items[j].ID })
		writeJSON(w, 200, api.TokenList{Items: items})
	case len(rest) == 1 && r.Method == http.MethodDelete:
		t := a.Tokens[rest[0]]
		if t == nil {
			fail(w, 404, api.ReasonNotFound, "Token not found", "")
			return
		}
		now := time.Now().UTC()
		t.RevokedAt = &now
		w.WriteHeader(204)
	default:
		fail(w, 405, api.ReasonInvalidRequest, "Method not allowed", "")
	}
}

func (a *API) instances(w http.ResponseWriter, r *http.Request, rest []string) {
	var in *api.Instance
	if len(rest) > 0 {
		if in = a.Instances[rest[0]]; in == nil {
			fail(w, 404, api.ReasonNotFound, "Instance not found", rest[0])
			return
		}
	}
	quarantined := func(what string) bool {
		if in.Phase != "Quarantined" && !(what == "forgotten" && r.URL.Query().Get("force") == "true") {
			fail(w, 409, api.ReasonNotQuarantined, "Instance not quarantined", "instance "+in.ID+" is "+string(in.Phase)+"; only a Quarantined instance can be "+what)
			return false
		}
		return true
	}
	switch {
	case len(rest) == 0 && r.Method == http.MethodGet:
		q := r.URL.Query()
		items := []api.Instance{}
		for _, in := range a.Instances {
			if (q.Get("pool") == "" || q.Get("pool") == in.Pool) && (q.Get("phase") == "" || q.Get("phase") == string(in.Phase)) &&
				(q.Get("host") == "" || q.Get("host") == in.Host) {
				items = append(items, *in)
			}
		}
		sort.Slice(items, func(i, j int) bool { return items[i].ID < items[j].ID })
		writeJSON(w, 200, items)
	case len(rest) == 1 && r.Method == http.MethodGet:
		writeJSON(w, 200, in)
	case len(rest) == 2 && rest[1] == "retry-teardown" && r.Method == http.MethodPost:
		if quarantined("retried") {
			a.Retried = append(a.Retried, in.ID)
			writeJSON(w, 202, api.RetryTeardown{ID: in.ID, Via: "pool", WorkflowID: "pool-" + in.Pool})
		}
	case len(rest) == 1 && r.Method == http.MethodDelete:
		if quarantined("forgotten") {
			a.Forgotten = append(a.Forgotten, in.ID)
			delete(a.Instances, in.ID)
			w.WriteHeader(204)
		}
	default:
		fail(w, 405, api.ReasonInvalidRequest, "Method not allowed", "")
	}
}
