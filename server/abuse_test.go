package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite/oidcprovider"
)

// loginServer is a server whose policy logs people in with a real OpenID provider, on a real
// SQLite store, served in-process (requests carry the client address the test chooses).
func loginServer(t *testing.T) (*Server, http.Handler) {
	t.Helper()
	prov := oidcprovider.Start(t)
	pol, err := access.ParsePolicy([]byte(fmt.Sprintf(`
roles:
  dev: {permissions: [lease, pool.read]}
oidc:
  issuers:
  - issuer: %s
    audiences: [kobe-portal]
    rules: [{match: {email: "*@example.com"}, role: dev}]
  login:
    issuer: %s
    clientId: kobe-portal
    redirectUrl: http://kobe.test/ui/callback
`, prov.Issuer, prov.Issuer)))
	require.NoError(t, err)
	s := &Server{Store: sqliteStore(t), Policy: pol, Secrets: secretbox.Random(), Namespace: "default"}
	return s, s.Handler()
}

// sqliteStore is a fresh SQLite store in a file of the test's own.
func sqliteStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "kobe.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// auditSize is the number of events and the bytes their attacker-reachable fields hold.
func auditSize(t *testing.T, st store.Store) (n, bytes int) {
	t.Helper()
	evs, err := st.ListEvents(context.Background(), store.EventFilter{})
	require.NoError(t, err)
	for _, ev := range evs {
		bytes += len(ev.Actor) + len(ev.Action) + len(ev.Target) + len(ev.Pool) + len(ev.Result) + len(ev.RequestID) + len(ev.Detail)
	}
	return len(evs), bytes
}

// Item 4 of issue 39: anyone could fill the append-only audit table without logging in. The
// login cookie GET /ui/login hands to anyone carries the state in its Location; a callback with
// that state and error_description of about 1 MB wrote 1 MB of attacker text per request. Here
// 10,000 such callbacks from 1,000 client addresses grow the events table by a bounded amount:
// at most failedLoginsPerMinute events plus one "suppressed" count per minute the run spans,
// each field at most auditFieldMax bytes (an event's attacker-reachable fields at most 2 KiB).
func TestHostileCallbacksGrowTheAuditLogBoundedly(t *testing.T) {
	s, h := loginServer(t)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/login", nil))
	require.Equal(t, http.StatusFound, rec.Code, rec.Body.String())
	loc, err := url.Parse(rec.Header().Get("Location"))
	require.NoError(t, err)
	state := loc.Query().Get("state")
	require.NotEmpty(t, state)
	var cookie *http.Cookie
	for _, c := range rec.Result().Cookies() {
		if c.Name == loginCookie {
			cookie = c
		}
	}
	require.NotNil(t, cookie, "the login cookie")

	huge := strings.Repeat("A", 1<<20)
	q := url.Values{"state": {state}, "error": {"access_denied"}, "error_description": {huge}}
	base := httptest.NewRequest("GET", "/ui/callback?"+q.Encode(), nil)
	base.AddCookie(cookie)

	n0, b0 := auditSize(t, s.Store)
	start := time.Now()
	const (
		callbacks = 10000
		addresses = 1000
		perMinute = 50   // failedLoginsPerMinute
		eventMax  = 2048 // the attacker-reachable bytes of one bounded event
	)
	bound := func() (events, bytes int) {
		windows := int(time.Since(start)/time.Minute) + 2 // the minutes the run touched
		return windows * (perMinute + 1), windows * (perMinute + 1) * eventMax
	}
	statuses := map[int]int{}
	for i := range callbacks {
		req := base.Clone(context.Background())
		req.RemoteAddr = fmt.Sprintf("198.51.%d.%d:40000", (i%addresses)/250, (i%addresses)%250)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		statuses[rec.Code]++
		if i == 0 || i%500 == 499 || i == callbacks-1 {
			n, b := auditSize(t, s.Store)
			maxN, maxB := bound()
			require.LessOrEqual(t, b-b0, maxB, "after %d hostile callbacks the audit log grew by %d bytes in %d events; the bound is %d bytes", i+1, b-b0, n-n0, maxB)
			require.LessOrEqual(t, n-n0, maxN, "after %d hostile callbacks the audit log grew by %d events; the bound is %d", i+1, n-n0, maxN)
		}
	}
	n, b := auditSize(t, s.Store)
	t.Logf("10,000 hostile callbacks: answers %v; the audit log grew by %d events, %d bytes", statuses, n-n0, b-b0)
	assert.Zero(t, statuses[http.StatusOK]+statuses[http.StatusFound], "no callback succeeded")
	assert.Positive(t, n-n0, "failed logins are still audited")

	evs, err := s.Store.ListEvents(context.Background(), store.EventFilter{Action: "login"})
	require.NoError(t, err)
	for _, ev := range evs {
		var d map[string]any
		require.NoError(t, json.Unmarshal(ev.Detail, &d))
		for k, v := range d {
			if str, ok := v.(string); ok {
				assert.LessOrEqual(t, len(str), auditFieldMax, "detail %s", k)
			}
		}
		assert.LessOrEqual(t, len(ev.Actor), auditFieldMax)
	}

	// The next minute, the first failure records how many were suppressed in the last one:
	// every callback that reached the handler is either a failed login event or counted.
	failed := 0
	for _, ev := range evs {
		if ev.Result == "failed" {
			failed++
		}
	}
	s.failedLogins.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	req := base.Clone(context.Background())
	req.RemoteAddr = "203.0.113.9:1"
	h.ServeHTTP(httptest.NewRecorder(), req)
	evs, err = s.Store.ListEvents(context.Background(), store.EventFilter{Action: "login"})
	require.NoError(t, err)
	suppressed := 0
	for _, ev := range evs {
		if ev.Result == "suppressed" {
			var d struct {
				Count int `json:"count"`
			}
			require.NoError(t, json.Unmarshal(ev.Detail, &d))
			suppressed += d.Count
		}
	}
	assert.Equal(t, callbacks-statuses[http.StatusTooManyRequests], failed+suppressed,
		"every callback that reached the handler is a failed login event or counted as suppressed")
}
