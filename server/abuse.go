package server

// What a request without a reason to write cannot make kobe write. Every route has a rate
// limit: a request with credentials counts against its principal, one without (the portal's
// login, callback and static files, /v1/status without a token, a portal page that sends the
// browser to log in) against its client address. A refused sign-in — a failed callback, or a
// valid OIDC token (or a session) that no access rule admits (403) — is audited, but through a
// throttle: at most failedLoginsPerAddress events per client address and failedLoginsPerMinute
// events in all per minute, each field cut to auditFieldMax bytes; what the throttle holds
// back is counted and written as one "suppressed" event when the next minute's first refusal
// comes. So 10,000 hostile callbacks a minute (or from 10,000 addresses) add at most
// failedLoginsPerMinute+1 events of at most about 2 KiB each to the append-only events table.

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
)

const (
	// auditFieldMax bounds each attacker-controlled text of a refused sign-in's event (actor,
	// reason, subject...): longer ones are cut, their length noted.
	auditFieldMax = 256
	// failedLoginsPerAddress is how many refused sign-ins of one client address a minute are
	// each an event; failedLoginsPerMinute how many of all addresses together.
	failedLoginsPerAddress = 5
	failedLoginsPerMinute  = 50
	// suppressedTop is how many of the most refused addresses the "suppressed" event names.
	suppressedTop = 10
	// callbackQueryMax: a provider's redirect carries code, state, iss and perhaps
	// session_state, a few hundred bytes; a longer query is refused unread.
	callbackQueryMax = 8 << 10
)

// failedLoginAudit is the throttle of refused sign-ins' events, by fixed minute windows.
type failedLoginAudit struct {
	now func() time.Time // tests move it; nil = time.Now

	mu         sync.Mutex
	window     time.Time      // the minute being counted
	recorded   int            // events written in it
	byAddress  map[string]int // events written in it per address (at most failedLoginsPerMinute keys)
	suppressed int            // refusals not written in it
	// suppressedBy counts the suppressed refusals of at most failedLoginsPerMinute+suppressedTop
	// addresses (the rest only in suppressed): the summary names the worst.
	suppressedBy map[string]int
}

// suppressedSummary is what the throttle held back in a past minute.
type suppressedSummary struct {
	window time.Time
	count  int
	top    map[string]int
}

// admit says whether a refusal from addr is written as an event, and returns the summary of
// the previous window when this refusal is the first of a new one and the previous held some
// back.
func (a *failedLoginAudit) admit(addr string) (bool, *suppressedSummary) {
	now := time.Now()
	if a.now != nil {
		now = a.now()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var summary *suppressedSummary
	if w := now.Truncate(time.Minute); !w.Equal(a.window) {
		if a.suppressed > 0 {
			summary = &suppressedSummary{window: a.window, count: a.suppressed, top: topAddresses(a.suppressedBy, suppressedTop)}
		}
		a.window, a.recorded, a.suppressed = w, 0, 0
		a.byAddress, a.suppressedBy = map[string]int{}, map[string]int{}
	}
	if a.recorded < failedLoginsPerMinute && a.byAddress[addr] < failedLoginsPerAddress {
		a.recorded++
		a.byAddress[addr]++
		return true, summary
	}
	a.suppressed++
	if _, ok := a.suppressedBy[addr]; ok || len(a.suppressedBy) < failedLoginsPerMinute+suppressedTop {
		a.suppressedBy[addr]++
	}
	return false, summary
}

func topAddresses(m map[string]int, n int) map[string]int {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || (m[keys[i]] == m[keys[j]] && keys[i] < keys[j]) })
	out := map[string]int{}
	for _, k := range keys[:min(n, len(keys))] {
		out[k] = m[k]
	}
	return out
}

// clip cuts an attacker-controlled text to auditFieldMax bytes (on a rune boundary), saying
// how long it was.
func clip(s string) string {
	if len(s) <= auditFieldMax {
		return s
	}
	note := fmt.Sprintf("…(%d bytes)", len(s))
	cut := auditFieldMax - len(note)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + note
}

// clientAddress is the key of a request without credentials: the peer's IP (an IPv6 peer's
// /64, which one host usually holds whole). Behind a proxy every client shares the proxy's
// address: X-Forwarded-For is not trusted (anyone can send one).
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return clip(host)
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}

// auditRefusal writes the event of a refused sign-in through the throttle: action login,
// result failed, actor who (the principal the credentials named, or "unknown"), detail with
// every text clipped. A store failure is logged: the refusal stands either way.
func (s *Server) auditRefusal(r *http.Request, who string, detail map[string]any) {
	addr := clientAddress(r)
	record, summary := s.failedLogins.admit(addr)
	ctx := context.WithoutCancel(r.Context())
	if summary != nil {
		top := map[string]any{}
		for k, v := range summary.top {
			top[k] = v
		}
		ev := s.auditEvent(r, "login", "", "", "suppressed", map[string]any{"count": summary.count,
			"window": summary.window.UTC().Format(time.RFC3339), "addresses": top})
		ev.Actor = "unknown"
		if _, err := s.Store.AppendEvent(ctx, ev); err != nil && s.Logger != nil {
			s.Logger.Error("audit event of suppressed failed logins lost", zap.Int("count", summary.count), zap.Error(err))
		}
	}
	if !record {
		return
	}
	if who == "" {
		who = "unknown"
	}
	d := map[string]any{"address": addr}
	for k, v := range detail {
		if str, ok := v.(string); ok {
			v = clip(str)
		}
		d[k] = v
	}
	ev := s.auditEvent(r, "login", "", "", "failed", d)
	ev.Actor = clip(who)
	if _, err := s.Store.AppendEvent(ctx, ev); err != nil && s.Logger != nil {
		s.Logger.Error("audit event of a failed login lost", zap.Any("detail", d), zap.Error(err))
	}
}

// limited answers 429 rate_limited when the request's bucket is empty: the principal's when
// p is set, else the client address's. It reports whether the request may go on.
func (s *Server) limited(w http.ResponseWriter, r *http.Request, p *access.Principal) bool {
	var ok bool
	var wait time.Duration
	var who string
	if p != nil {
		ok, wait = s.Limiter.Allow(*p)
		who = "principal " + p.Name
	} else {
		addr := clientAddress(r)
		ok, wait = s.Limiter.AllowAddress(addr)
		who = "client address " + addr
	}
	if ok {
		return true
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	writeError(w, http.StatusTooManyRequests, api.ReasonRateLimited, "Too many requests",
		fmt.Sprintf("%s is over its rate limit; retry in %s", who, wait.Round(time.Millisecond)))
	return false
}

// byAddress wraps a route that carries no credentials (the login, the callback, static files):
// it counts against the client address.
func (s *Server) byAddress(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.limited(w, r, nil) {
			h(w, r)
		}
	}
}

// inProcessKey marks a /v1 request the portal makes for a page that already counted against
// its principal's rate: it does not count again.
type inProcessKey struct{}

func inProcess(ctx context.Context) bool {
	v, _ := ctx.Value(inProcessKey{}).(bool)
	return v
}
