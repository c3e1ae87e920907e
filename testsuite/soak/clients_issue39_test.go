package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kunobi-ninja/kobe/api"
)

// runSchedClient holds one lease at a time of the schedule pool (as admin: no quota of the
// clients is used) for 1–2.5 minutes, so its sleep and wake schedules find a Bound lease, and
// watches it: a lease seen asleep must be woken within asleepBound. It stops with the load.
func (e *env) runSchedClient(tr *traffic, rng *rand.Rand, stop <-chan struct{}) {
	me := principal{name: "admin", token: e.adminToken}
	for {
		select {
		case <-stop:
			return
		default:
		}
		body, _ := json.Marshal(api.LeaseRequest{Pool: schedPool, TTL: "3m", IdempotencyKey: fmt.Sprintf("soak-sched-%x", rng.Int63())})
		var l api.Lease
		created := time.Now()
		a := e.call(tr, true, "create (schedule pool)", me.token, "POST", "/v1/leases", body, &l)
		for (a.Status == 0 || a.Status >= 500 || a.Status == 404) && time.Since(created) < 5*time.Minute {
			if a.Status == 404 {
				tr.mu.Lock()
				tr.poolMissing = append(tr.poolMissing, a)
				tr.mu.Unlock()
			}
			if !sleepOrStop(500*time.Millisecond, stop) {
				// Nothing may have been created yet; a create that landed is found by the
				// store checks (it ends by TTL).
				return
			}
			a = e.call(tr, true, "create (schedule pool)", me.token, "POST", "/v1/leases", body, &l)
		}
		if a.Status != 200 && a.Status != 202 {
			tr.mu.Lock()
			tr.wrong = append(tr.wrong, fmt.Sprintf("create on the schedule pool answered %d %q", a.Status, a.Reason))
			tr.mu.Unlock()
			return
		}
		rec := &leaseRecord{ID: l.ID, Principal: me.name, Kind: "sched", Created: created}
		tr.mu.Lock()
		tr.leases = append(tr.leases, rec)
		tr.mu.Unlock()
		rec.observe(tr, l.Phase)
		path := "/v1/leases/" + l.ID
		hold := time.Now().Add(time.Duration(60+rng.Intn(90)) * time.Second)
		var asleepSince time.Time
		ended := false
		for time.Now().Before(hold) && !ended && !stopped(stop) {
			var v api.Lease
			a := e.call(tr, true, "get (schedule pool)", me.token, "GET", path, nil, &v)
			if a.Status == 200 {
				rec.observe(tr, v.Phase)
				if v.Phase == api.LeaseBound && !rec.Bound {
					rec.Bound, rec.Instance, rec.Endpoint, rec.BoundAt = true, v.ClusterName, v.Endpoint, time.Now()
				}
				switch {
				case terminal[v.Phase]:
					rec.Final, rec.Reason, rec.Ended = v.Phase, v.Reason, time.Now()
					ended = true
				case v.Sleeping && asleepSince.IsZero():
					asleepSince = time.Now()
					rec.Slept = true
					tr.mu.Lock()
					tr.schedSlept++
					tr.mu.Unlock()
				case !v.Sleeping:
					asleepSince = time.Time{}
				}
				if !asleepSince.IsZero() && time.Since(asleepSince) > asleepBound {
					tr.mu.Lock()
					tr.asleepTooLong = append(tr.asleepTooLong, fmt.Sprintf("lease %s of %s asleep since %s, more than %s", l.ID, schedPool, asleepSince.Format("15:04:05"), asleepBound))
					tr.mu.Unlock()
					asleepSince = time.Now() // once per bound
				}
			}
			time.Sleep(2 * time.Second)
		}
		if !ended {
			rec.ReleasedAsleep = !asleepSince.IsZero()
			e.release(tr, me, path)
			e.waitTerminal(tr, me, rec, 3*time.Minute)
		}
	}
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// signInSummary is what the hostile sign-in client sent and what the audit log grew by.
type signInSummary struct {
	Sent      int         `json:"sent"`
	Answers   map[int]int `json:"answers"`
	Addresses int         `json:"addresses"`
	// Events and Bytes are the growth of the unauthenticated events (action login) over the
	// flood; MaxEvents and MaxBytes the documented bound for the API runs it spanned.
	Events    int `json:"events"`
	Bytes     int `json:"bytes"`
	MaxEvents int `json:"maxEvents"`
	MaxBytes  int `json:"maxBytes"`
	Checks    int `json:"checks"`
	Start     time.Time
	base      struct{ n, b int }
}

// The documented bound of abuse.go: at most failedLoginsPerMinute events (5 per address) per
// minute window of an API process, plus one "suppressed" summary; each event's
// attacker-reachable fields at most about 2 KiB.
const (
	signInPerMinute = 50
	signInEventMax  = 2048
	signInAddresses = 64
)

// unauthEvents counts the events a request without credentials can write (action login) and
// the bytes of their fields.
func (e *env) unauthEvents() (n, bytes int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = e.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(octet_length(actor) + octet_length(action) + octet_length(target)
		+ octet_length(pool) + octet_length(result) + octet_length(request_id) + octet_length(detail::text)), 0)
		FROM events WHERE action = 'login' OR actor IN ('', 'unknown')`).Scan(&n, &bytes)
	return n, bytes, err
}

// signInBound is the most events the flood may have added by now: per run of the API that
// overlaps [from, now], each minute window it touched may write signInPerMinute + 1 events (the
// throttle is per process: a restarted API counts afresh).
func signInBound(starts []time.Time, from, now time.Time) int {
	windows := 0
	for i, s := range starts {
		end := now
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		if end.Before(from) {
			continue
		}
		if s.Before(from) {
			s = from
		}
		windows += int(end.Truncate(time.Minute).Sub(s.Truncate(time.Minute))/time.Minute) + 1
	}
	return windows * (signInPerMinute + 1)
}

// runSignInClient floods the portal's sign-in with hostile callbacks from signInAddresses
// loopback addresses at cfg.SignIn a second: callbacks without a login, with a query over 8 KiB,
// with a real login's cookie and state but a provider error of 7 KiB, and with a wrong state.
// Each must be refused (4xx: 400, 403, or 429 when the address's bucket is empty); every ten
// seconds and at the end the unauthenticated events must be within signInBound.
func (e *env) runSignInClient(tr *traffic, rng *rand.Rand, stop <-chan struct{}) {
	if e.cfg.SignIn <= 0 {
		return
	}
	clients := make([]*http.Client, signInAddresses)
	for i := range clients {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))}, Timeout: 10 * time.Second}
		clients[i] = &http.Client{Timeout: 30 * time.Second,
			Transport:     &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 2},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	n, b, err := e.unauthEvents()
	tr.mu.Lock()
	tr.signIn.Start, tr.signIn.Addresses = time.Now(), signInAddresses
	tr.signIn.base.n, tr.signIn.base.b = n, b
	tr.mu.Unlock()
	if err != nil {
		tr.mu.Lock()
		tr.wrong = append(tr.wrong, "count the unauthenticated events: "+err.Error())
		tr.mu.Unlock()
		return
	}
	every := time.Duration(float64(time.Second) / e.cfg.SignIn)
	lastCheck := time.Now()
	for sleepOrStop(every, stop) {
		c := clients[rng.Intn(len(clients))]
		e.hostileCallback(tr, rng, c)
		if time.Since(lastCheck) > 10*time.Second {
			e.checkSignInGrowth(tr)
			lastCheck = time.Now()
		}
	}
	e.checkSignInGrowth(tr)
}

// checkSignInGrowth compares the unauthenticated events' growth with the bound.
func (e *env) checkSignInGrowth(tr *traffic) {
	n, b, err := e.unauthEvents()
	if err != nil {
		return // the store is reachable in every fault; a failed read is tried again later
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	s := &tr.signIn
	s.Checks++
	s.Events, s.Bytes = n-s.base.n, b-s.base.b
	s.MaxEvents = signInBound(e.server.startTimes(), s.Start, time.Now())
	s.MaxBytes = s.MaxEvents * signInEventMax
	if s.Events > s.MaxEvents || s.Bytes > s.MaxBytes {
		tr.wrong = append(tr.wrong, fmt.Sprintf("after %d hostile sign-ins the unauthenticated events grew by %d (%d bytes); the bound is %d (%d bytes)",
			s.Sent, s.Events, s.Bytes, s.MaxEvents, s.MaxBytes))
	}
}

// hostileCallback sends one hostile sign-in callback through c and records its answer.
func (e *env) hostileCallback(tr *traffic, rng *rand.Rand, c *http.Client) {
	kind := []string{"callback without a login", "callback query over 8 KiB", "callback with a provider error", "callback with a wrong state"}[rng.Intn(4)]
	var cookie *http.Cookie
	state := fmt.Sprintf("%x", rng.Int63())
	if kind == "callback with a provider error" || kind == "callback with a wrong state" {
		// A real login's cookie and state, as anyone can get them from GET /ui/login.
		a, ck, st := e.startLogin(tr, c)
		if ck == nil {
			if a.Status != 0 && a.Status < 500 && a.Status != 429 {
				tr.mu.Lock()
				tr.wrong = append(tr.wrong, fmt.Sprintf("GET /ui/login answered %d without a login cookie", a.Status))
				tr.mu.Unlock()
			}
			return
		}
		cookie = ck
		if kind == "callback with a provider error" {
			state = st
		}
	}
	q := url.Values{"state": {state}, "code": {fmt.Sprintf("%x", rng.Int63())}}
	switch kind {
	case "callback query over 8 KiB":
		q.Set("error_description", strings.Repeat("B", 9<<10))
	case "callback with a provider error":
		q.Set("error", "access_denied")
		q.Set("error_description", strings.Repeat("A", 7<<10))
	}
	req, _ := http.NewRequest("GET", e.apiURL+"/ui/callback?"+q.Encode(), nil)
	req.Header.Set("X-Request-Id", strings.Repeat("r", 128))
	if cookie != nil {
		req.AddCookie(cookie)
	}
	a := answer{Op: "hostile sign-in: " + kind, Sent: time.Now()}
	resp, err := c.Do(req)
	a.Answered = time.Now()
	if err != nil {
		a.Err = err.Error()
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		a.Status = resp.StatusCode
	}
	tr.record(a)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.signIn.Sent++
	tr.signIn.Answers[a.Status]++
	if a.Status != 0 && a.Status < 500 && a.Status != 400 && a.Status != 403 && a.Status != 429 {
		tr.wrong = append(tr.wrong, fmt.Sprintf("hostile sign-in %q answered %d, want 400, 403 or 429", kind, a.Status))
	}
}

// startLogin is GET /ui/login: its login cookie and the state its redirect carries.
func (e *env) startLogin(tr *traffic, c *http.Client) (answer, *http.Cookie, string) {
	a := answer{Op: "hostile sign-in: login", Sent: time.Now()}
	resp, err := c.Get(e.apiURL + "/ui/login")
	a.Answered = time.Now()
	if err != nil {
		a.Err = err.Error()
		tr.record(a)
		return a, nil, ""
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	a.Status = resp.StatusCode
	tr.record(a)
	if resp.StatusCode != http.StatusFound {
		return a, nil, ""
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return a, nil, ""
	}
	for _, ck := range resp.Cookies() {
		if ck.Name == "kobe_login" || strings.Contains(ck.Name, "login") {
			return a, ck, loc.Query().Get("state")
		}
	}
	return a, nil, ""
}
