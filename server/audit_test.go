package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/kunobi-ninja/kobe/api"
	_ "github.com/kunobi-ninja/kobe/backends/local" // pools name a backend that is compiled in
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/store"
	kobetest "github.com/kunobi-ninja/kobe/testsuite/dbtest"
)

// recordingTemporal stands in for Temporal in handler tests: it records what the API asks of
// it (starts, signals, updates) and answers queries with an error (views fall back to the store).
type recordingTemporal struct {
	client.Client
	mu    sync.Mutex
	calls []string
}

func (c *recordingTemporal) record(call string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call)
}

func (c *recordingTemporal) taken() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = nil
	return out
}

func (c *recordingTemporal) ExecuteWorkflow(_ context.Context, opts client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	c.record("start " + opts.ID)
	return nil, nil
}

func (c *recordingTemporal) SignalWorkflow(_ context.Context, id, _, name string, _ any) error {
	c.record("signal " + name + " " + id)
	return nil
}

func (c *recordingTemporal) UpdateWorkflow(_ context.Context, opts client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	c.record("update " + opts.UpdateName + " " + opts.WorkflowID)
	return nil, errors.New("updates are not scripted in this test")
}

func (c *recordingTemporal) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return nil, errors.New("no workflow answers in this test")
}

// Every API mutation and its audit event go together: while the store's audit log refuses
// inserts (a trigger in the database), each mutation answers 503 degraded naming the cause,
// changes no row and asks nothing of Temporal; once the log is back, each writes its event.
func TestMutationsFailWhenTheirAuditEventCannotBeWritten(t *testing.T) {
	for name, dsn := range kobetest.StoreDSNs() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dsn := dsn(t)
			st, err := store.Open(ctx, dsn)
			require.NoError(t, err)
			t.Cleanup(func() { st.Close() })
			pol, err := access.ParsePolicy([]byte("roles:\n  admin:\n    permissions: [lease, pool.read, pool.admin, audit.read, tokens]\n"))
			require.NoError(t, err)
			tc := &recordingTemporal{}
			s := &Server{Store: st, InsecureNoAuth: true, Policy: pol, Temporal: tc, Limiter: &access.RateLimiter{Policy: pol}}
			h := s.Handler()
			do := func(method, path, body string) *httptest.ResponseRecorder {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
				return rec
			}
			manifest := []byte(`{"apiVersion":"kobe.kunobi.ninja/v1alpha1","kind":"ClusterPool","metadata":{"name":"dev"},` +
				`"spec":{"size":2,"ttl":"1h","backend":{"type":"local"},"cluster":{"version":"v1.31.0"}}}`)
			require.NoError(t, st.UpsertPool(ctx, store.Pool{Name: "dev", Backend: "local", Spec: manifest}))
			_, err = st.CreateToken(ctx, store.Token{ID: "tok-old", Name: "old", Role: "admin", Principal: "ci", Hash: "h-old"})
			require.NoError(t, err)
			require.NoError(t, st.UpsertLease(ctx, store.Lease{ID: "lease-held", Pool: "dev", Principal: anonymous.Name,
				Phase: "Bound", TTL: time.Hour, ExpiresAt: time.Now().Add(time.Hour)}))
			events := func() int {
				evs, err := st.ListEvents(ctx, store.EventFilter{})
				require.NoError(t, err)
				return len(evs)
			}
			before := events()

			restore := kobetest.BreakAudit(t, dsn)
			for _, m := range []struct{ method, path, body string }{
				{"POST", "/v1/tokens", `{"name":"new","role":"admin"}`},
				{"DELETE", "/v1/tokens/tok-old", ``},
				{"POST", "/v1/leases", `{"pool":"dev","ttl":"30m"}`},
				{"PATCH", "/v1/leases/lease-held", `{"extendTtl":"10m"}`},
				{"DELETE", "/v1/leases/lease-held", ``},
				{"PUT", "/v1/pools/other", strings.ReplaceAll(string(manifest), `"name":"dev"`, `"name":"other"`)},
				{"DELETE", "/v1/pools/dev", ``},
			} {
				rec := do(m.method, m.path, m.body)
				assert.Equal(t, 503, rec.Code, "%s %s: %s", m.method, m.path, rec.Body.String())
				var eb api.ErrorBody
				if assert.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb), rec.Body.String()) {
					assert.Equal(t, api.ReasonDegraded, eb.Reason, "%s %s", m.method, m.path)
					assert.Contains(t, eb.Detail, kobetest.AuditDownMessage, "%s %s: the answer names the cause", m.method, m.path)
				}
				assert.Empty(t, tc.taken(), "%s %s: nothing is asked of Temporal", m.method, m.path)
			}
			restore()

			toks, err := st.ListTokens(ctx)
			require.NoError(t, err)
			require.Len(t, toks, 1, "no token was created")
			assert.True(t, toks[0].RevokedAt.IsZero(), "no token was revoked")
			leases, err := st.ListLeases(ctx, store.LeaseFilter{})
			require.NoError(t, err)
			require.Len(t, leases, 1, "no lease was admitted")
			assert.Equal(t, api.LeaseBound, leases[0].Phase)
			ps, err := st.ListPools(ctx)
			require.NoError(t, err)
			require.Len(t, ps, 1, "no pool was applied or deleted")
			assert.Equal(t, before, events())

			// With the log back: each mutation succeeds and writes its event.
			for _, m := range []struct {
				method, path, body string
				status             int
				action             string
			}{
				{"POST", "/v1/tokens", `{"name":"new","role":"admin"}`, 201, "token.create"},
				{"DELETE", "/v1/tokens/tok-old", ``, 204, "token.revoke"},
				{"POST", "/v1/leases", `{"pool":"dev","ttl":"30m"}`, 202, "lease.create"},
				{"DELETE", "/v1/leases/lease-held", ``, 204, "lease.release"},
			} {
				rec := do(m.method, m.path, m.body)
				require.Equal(t, m.status, rec.Code, "%s %s: %s", m.method, m.path, rec.Body.String())
				evs, err := st.ListEvents(ctx, store.EventFilter{Action: m.action})
				require.NoError(t, err)
				assert.Len(t, evs, 1, "%s %s: its %s event", m.method, m.path, m.action)
			}
		})
	}
}
