package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/api"
)

// answer is one HTTP exchange as the harness saw it.
type answer struct {
	Valid    bool
	Op       string
	Sent     time.Time
	Answered time.Time
	Status   int // 0: no answer (connection refused, reset, timeout)
	Reason   api.ReasonCode
	Err      string
	Instance string // the lease's instance, for a sleep or wake
	Detail   string // a refusal's detail
}

// leaseRecord is what the harness knows of one lease it asked for.
type leaseRecord struct {
	ID        string
	Principal string
	Kind      string // release, expire, cancel
	Bound     bool
	Instance  string
	Endpoint  string
	Final     api.LeasePhase // terminal phase, "" if never seen terminal
	Reason    api.ReasonCode
	// Created is when its first create was sent; Ended when the terminal phase was seen.
	Created time.Time
	Ended   time.Time
	// KubeconfigErr is set when a Bound lease's kubeconfig did not reach its cluster.
	KubeconfigErr string
	KubeconfigAt  time.Time
	// Secrets seen in the kubeconfig (client key material), for the secrets scan.
	secrets []string
	// Slept: the lease was put to sleep (POST …/sleep answered 200 sleeping) at least once.
	Slept bool
	// ReleasedAsleep: released while asleep.
	ReleasedAsleep bool
	// BoundAt is when the client first saw it Bound.
	BoundAt time.Time
	// phases seen through the API, in order (consecutive repeats once), for the "no lease
	// leaves a terminal phase" check.
	seen []seenPhase
}

type seenPhase struct {
	Phase api.LeasePhase
	At    time.Time
}

// observe records a phase the API answered for the lease.
func (rec *leaseRecord) observe(tr *traffic, p api.LeasePhase) {
	if p == "" {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if n := len(rec.seen); n > 0 && rec.seen[n-1].Phase == p {
		return
	}
	rec.seen = append(rec.seen, seenPhase{Phase: p, At: time.Now()})
}

// leftTerminal says how the API's phases of a lease left a terminal phase ("" if they never did).
func leftTerminal(seen []seenPhase) string {
	var first *seenPhase
	for i := range seen {
		s := &seen[i]
		if first != nil && s.Phase != first.Phase {
			return fmt.Sprintf("%s at %s, then %s at %s", first.Phase, first.At.Format("15:04:05.000"), s.Phase, s.At.Format("15:04:05.000"))
		}
		if first == nil && terminal[s.Phase] {
			first = s
		}
	}
	return ""
}

// traffic is everything the clients did; safe for concurrent use.
type traffic struct {
	mu      sync.Mutex
	answers []answer
	leases  []*leaseRecord
	invalid map[string]int         // invalid request kind → sent
	wrong   []string               // invalid requests answered with something else than the expected refusal
	refused map[api.ReasonCode]int // valid creates refused with a reason (quota_exhausted…)
	// poolMissing are valid creates answered 404: the pool was deleted (judged with the
	// recreate-pool fault windows).
	poolMissing []answer
	started     atomic.Int64
	extendRef   map[string]int
	// brokenExtends are extensions refused because the lease's cluster was broken (409
	// health_failed): judged against the faults that killed members.
	brokenExtends []brokenExtend
	// orphans are leases whose API the orphan fault killed after their admission.
	orphans []orphanRecord
	// sleeps counts the answers of the sleeping lifecycles: "sleep 200", "extend asleep 409
	// sleeping"...
	sleeps map[string]int
	// asleepTooLong are leases of the schedule pool seen asleep longer than asleepBound.
	asleepTooLong []string
	// schedSlept counts the schedule pool's leases seen asleep (slept by its schedule).
	schedSlept int
	// signIn is what the hostile sign-in client sent and measured.
	signIn signInSummary
}

// brokenExtend is an extension refused with health_failed: of which instance, when answered.
type brokenExtend struct {
	Instance string
	Answered time.Time
}

func newTraffic() *traffic {
	return &traffic{invalid: map[string]int{}, refused: map[api.ReasonCode]int{}, extendRef: map[string]int{},
		sleeps: map[string]int{}, signIn: signInSummary{Answers: map[int]int{}}}
}

func (tr *traffic) record(a answer) {
	tr.mu.Lock()
	tr.answers = append(tr.answers, a)
	tr.mu.Unlock()
}

// call makes one request and records its answer. out, if not nil, receives a 2xx JSON body.
func (e *env) call(tr *traffic, valid bool, op, token, method, path string, body []byte, out any) answer {
	return e.callOn(tr, "", valid, op, token, method, path, body, out)
}

// callOn is call for a request about an instance (a wake's 502 wake_failed is judged with the
// faults that broke that instance).
func (e *env) callOn(tr *traffic, instance string, valid bool, op, token, method, path string, body []byte, out any) answer {
	a := answer{Valid: valid, Op: op, Sent: time.Now(), Instance: instance}
	ctx, cancel := context.WithTimeout(context.Background(), 75*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.apiURL+path, rd)
	if err != nil {
		panic(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	a.Answered = time.Now()
	if err != nil {
		a.Err = err.Error()
		tr.record(a)
		return a
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	a.Status = resp.StatusCode
	if resp.StatusCode >= 400 {
		var eb api.ErrorBody
		_ = json.Unmarshal(data, &eb)
		a.Reason, a.Detail = eb.Reason, eb.Detail
	} else if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			a.Err = "decode: " + err.Error()
		}
	}
	tr.record(a)
	return a
}

// runClient starts lease lifecycles until stop is closed or the lifecycle budget is spent; the
// lifecycle in progress is always finished (its lease ended).
func (e *env) runClient(idx int, tr *traffic, rng *rand.Rand, stop <-chan struct{}) {
	me := e.principals[idx%len(e.principals)]
	for {
		select {
		case <-stop:
			return
		default:
		}
		if tr.started.Add(1) > int64(e.cfg.Lifecycles) {
			return
		}
		kind := "release"
		switch x := rng.Float64(); {
		case x < 0.15:
			kind = "expire"
		case x < 0.30:
			kind = "cancel"
		case x < 0.45:
			kind = "sleep"
		}
		e.lifecycle(tr, rng, me, kind, stop)
	}
}

var terminal = map[api.LeasePhase]bool{api.LeaseReleased: true, api.LeaseExpired: true, api.LeaseFailed: true}

// lifecycle: create (retrying lost answers with the same idempotency key) → wait for Bound →
// use the kubeconfig → maybe extend → release (or let it expire, or cancel it while pending)
// → wait for the terminal phase.
func (e *env) lifecycle(tr *traffic, rng *rand.Rand, me principal, kind string, stop <-chan struct{}) {
	ttl := "2m"
	if kind == "expire" {
		ttl = "6s"
	}
	body, _ := json.Marshal(api.LeaseRequest{Pool: soakPool, TTL: ttl, IdempotencyKey: fmt.Sprintf("soak-%x", rng.Int63())})
	var answer api.Lease
	created := time.Now()
	giveUp := created.Add(5 * time.Minute)
	for {
		if time.Now().After(giveUp) {
			tr.mu.Lock()
			tr.wrong = append(tr.wrong, "a valid create got no answer it could act on for 5 minutes")
			tr.mu.Unlock()
			return
		}
		a := e.call(tr, true, "create", me.token, "POST", "/v1/leases", body, &answer)
		switch {
		case a.Status == 200 || a.Status == 202:
		case a.Status == 429 && a.Reason == api.ReasonQuotaExhausted:
			// An answer, not a failure: this principal (or its role) holds its share. Nothing was
			// created; the client waits for one of its leases to end, as a CI job would.
			tr.mu.Lock()
			tr.refused[a.Reason]++
			tr.mu.Unlock()
			if !sleepOrStop(time.Duration(500+rng.Intn(1000))*time.Millisecond, stop) {
				return
			}
			continue
		case a.Status == 404 && a.Reason == api.ReasonNotFound:
			// The pool was deleted (and is being applied again): nothing was created; a CI job
			// would fail here, the harness tries again.
			tr.mu.Lock()
			tr.poolMissing = append(tr.poolMissing, a)
			tr.mu.Unlock()
			if !sleepOrStop(time.Duration(300+rng.Intn(500))*time.Millisecond, stop) {
				return
			}
			continue
		case a.Status == 0 || a.Status >= 500 || (a.Status == 429 && a.Reason == api.ReasonRateLimited):
			// Lost or transient: the same key makes the retry safe (same lease, or a new one if the
			// first never landed).
			time.Sleep(300 * time.Millisecond)
			continue
		default:
			tr.mu.Lock()
			tr.wrong = append(tr.wrong, fmt.Sprintf("valid create answered %d %q", a.Status, a.Reason))
			tr.mu.Unlock()
			return
		}
		break
	}
	rec := &leaseRecord{ID: answer.ID, Principal: me.name, Kind: kind, Created: created}
	tr.mu.Lock()
	tr.leases = append(tr.leases, rec)
	tr.mu.Unlock()
	rec.observe(tr, answer.Phase)
	path := "/v1/leases/" + answer.ID

	if kind == "cancel" {
		e.release(tr, me, path)
		e.waitTerminal(tr, me, rec, 3*time.Minute)
		return
	}
	// Wait for Bound (or an early end, e.g. pool_exhausted).
	deadline := time.Now().Add(4 * time.Minute)
	for time.Now().Before(deadline) {
		var l api.Lease
		a := e.call(tr, true, "get-wait", me.token, "GET", path+"?wait=20s", nil, &l)
		if a.Status != 200 {
			time.Sleep(300 * time.Millisecond)
			continue
		}
		rec.observe(tr, l.Phase)
		if terminal[l.Phase] {
			rec.Final, rec.Reason, rec.Ended = l.Phase, l.Reason, time.Now()
			return
		}
		if l.Phase == api.LeaseBound && l.Kubeconfig != "" {
			rec.Bound, rec.Instance, rec.Endpoint, rec.BoundAt = true, l.ClusterName, l.Endpoint, time.Now()
			rec.secrets = kubeconfigSecrets(l.Kubeconfig)
			rec.KubeconfigErr, rec.KubeconfigAt = useKubeconfig(l.Kubeconfig), time.Now()
			break
		}
	}
	if !rec.Bound {
		e.release(tr, me, path)
		e.waitTerminal(tr, me, rec, 3*time.Minute)
		return
	}
	if kind == "release" && rng.Float64() < 0.3 {
		a := e.call(tr, true, "extend", me.token, "PATCH", path, []byte(`{"extendTtl":"1m"}`), nil)
		tr.mu.Lock()
		tr.extendRef[fmt.Sprintf("%d %s", a.Status, a.Reason)]++
		if a.Status == 409 && a.Reason == api.ReasonHealthFailed {
			tr.brokenExtends = append(tr.brokenExtends, brokenExtend{Instance: rec.Instance, Answered: a.Answered})
		}
		tr.mu.Unlock()
	}
	if kind == "release" {
		time.Sleep(time.Duration(rng.Intn(1500)) * time.Millisecond)
		e.release(tr, me, path)
	}
	if kind == "sleep" {
		e.sleepAndWake(tr, rng, me, rec, path)
	}
	e.waitTerminal(tr, me, rec, 3*time.Minute)
}

// sleepAndWake: sleep the lease; an extension must then be refused at once (409 sleeping);
// then either release it asleep, or wake it, extend it (now allowed) and release it.
func (e *env) sleepAndWake(tr *traffic, rng *rand.Rand, me principal, rec *leaseRecord, path string) {
	count := func(k string) {
		tr.mu.Lock()
		tr.sleeps[k]++
		tr.mu.Unlock()
	}
	wrong := func(format string, args ...any) {
		tr.mu.Lock()
		tr.wrong = append(tr.wrong, fmt.Sprintf("lease %s: ", rec.ID)+fmt.Sprintf(format, args...))
		tr.mu.Unlock()
	}
	// sleepOrWake retries lost answers (both are idempotent) and returns the last answer.
	sleepOrWake := func(op string) (answer, api.Lease) {
		var l api.Lease
		var a answer
		for i := 0; i < 100; i++ {
			l = api.Lease{}
			a = e.callOn(tr, rec.Instance, true, op, me.token, "POST", path+"/"+op, nil, &l)
			if a.Status != 0 && a.Status < 500 || a.Reason == api.ReasonWakeFailed {
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
		count(fmt.Sprintf("%s %d %s", op, a.Status, a.Reason))
		return a, l
	}
	a, l := sleepOrWake("sleep")
	// Right after a bind the API refused a sleep 409 not_ready ("the lease is Pending") while
	// its GET said Bound: the handler read the store's row, which lags the workflow (fixed:
	// the workflow decides; docs/reliability.md). A refusal while GET says Bound is still
	// counted (the workflow refuses a lease that does not hold its member yet) and tried again.
	for i := 0; i < 30 && a.Status == 409 && a.Reason == api.ReasonNotReady; i++ {
		var v api.Lease
		if g := e.call(tr, true, "get", me.token, "GET", path, nil, &v); g.Status != 200 || v.Phase != api.LeaseBound {
			break
		}
		count(fmt.Sprintf("sleep refused not_ready while GET said Bound: %.40s", a.Detail))
		time.Sleep(time.Second)
		a, l = sleepOrWake("sleep")
	}
	if a.Status != 200 {
		// A lease whose cluster a fault broke, or that ended, is refused (409 with a reason).
		if a.Status != 409 || a.Reason == "" {
			wrong("sleep answered %d %q", a.Status, a.Reason)
		}
		e.release(tr, me, path)
		return
	}
	if !l.Sleeping {
		wrong("sleep answered 200 but the lease is not sleeping")
	}
	rec.Slept = true
	// Asleep, an extension is refused at once: 409 sleeping, not a wait for the cluster.
	sent := time.Now()
	a = e.call(tr, true, "extend asleep", me.token, "PATCH", path, []byte(`{"extendTtl":"1m"}`), nil)
	count(fmt.Sprintf("extend asleep %d %s", a.Status, a.Reason))
	if a.Status != 0 && a.Status < 500 && (a.Status != 409 || a.Reason != api.ReasonSleeping) {
		wrong("an extension while asleep answered %d %q, want 409 sleeping", a.Status, a.Reason)
	}
	if took := a.Answered.Sub(sent); a.Status == 409 && took > 20*time.Second {
		wrong("an extension while asleep took %s to be refused", took.Round(time.Millisecond))
	}
	time.Sleep(time.Duration(rng.Intn(1500)) * time.Millisecond)
	if rng.Intn(2) == 0 {
		rec.ReleasedAsleep = true
		e.release(tr, me, path)
		return
	}
	a, l = sleepOrWake("wake")
	if a.Status == 200 {
		if l.Sleeping {
			wrong("wake answered 200 but the lease still sleeps")
		}
		a = e.call(tr, true, "extend awake", me.token, "PATCH", path, []byte(`{"extendTtl":"1m"}`), nil)
		count(fmt.Sprintf("extend awake %d %s", a.Status, a.Reason))
		if a.Status == 409 && a.Reason == api.ReasonSleeping {
			wrong("an extension after the wake answered 409 sleeping")
		}
		if a.Status == 409 && a.Reason == api.ReasonHealthFailed {
			tr.mu.Lock()
			tr.brokenExtends = append(tr.brokenExtends, brokenExtend{Instance: rec.Instance, Answered: a.Answered})
			tr.mu.Unlock()
		}
	} else if a.Status != 502 && (a.Status != 409 || a.Reason == "") {
		wrong("wake answered %d %q", a.Status, a.Reason)
	}
	e.release(tr, me, path)
}

// release deletes the lease, retrying lost answers (DELETE is idempotent).
func (e *env) release(tr *traffic, me principal, path string) {
	for i := 0; i < 200; i++ {
		a := e.call(tr, true, "release", me.token, "DELETE", path, nil, nil)
		if a.Status == 204 || a.Status == 404 {
			return
		}
		if a.Status != 0 && a.Status < 500 {
			tr.mu.Lock()
			tr.wrong = append(tr.wrong, fmt.Sprintf("valid release answered %d %q", a.Status, a.Reason))
			tr.mu.Unlock()
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (e *env) waitTerminal(tr *traffic, me principal, rec *leaseRecord, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var l api.Lease
		a := e.call(tr, true, "get", me.token, "GET", "/v1/leases/"+rec.ID, nil, &l)
		if a.Status == 200 {
			rec.observe(tr, l.Phase)
		}
		if a.Status == 200 && terminal[l.Phase] {
			rec.Final, rec.Reason, rec.Ended = l.Phase, l.Reason, time.Now()
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// useKubeconfig asks the lease's cluster for its version: a Bound lease must work.
func useKubeconfig(kc string) string {
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kc))
	if err != nil {
		return err.Error()
	}
	cfg.Timeout = 10 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err.Error()
	}
	var last error
	for i := 0; i < 3; i++ {
		if _, last = dc.ServerVersion(); last == nil {
			return ""
		}
		time.Sleep(time.Second)
	}
	return last.Error()
}

// kubeconfigSecrets are the secret values of a kubeconfig: client key data and tokens.
func kubeconfigSecrets(kc string) []string {
	cfg, err := clientcmd.Load([]byte(kc))
	if err != nil {
		return nil
	}
	var out []string
	for _, u := range cfg.AuthInfos {
		if len(u.ClientKeyData) > 0 {
			out = append(out, string(u.ClientKeyData))
		}
		if u.Token != "" {
			out = append(out, u.Token)
		}
	}
	return out
}

// runInvalidClient sends invalid requests at cfg.Invalid per second, as random principals, until
// stop is closed.
func (e *env) runInvalidClient(tr *traffic, rng *rand.Rand, stop <-chan struct{}) {
	if e.cfg.Invalid <= 0 {
		return
	}
	every := time.Duration(float64(time.Second) / e.cfg.Invalid)
	for sleepOrStop(every, stop) {
		e.invalidRequest(tr, rng, e.principals[rng.Intn(len(e.principals))])
	}
}

// invalidRequest sends one request that must be refused with a 4xx and a reason code.
func (e *env) invalidRequest(tr *traffic, rng *rand.Rand, me principal) {
	other := e.otherLease(tr, me)
	cases := []struct {
		name   string
		token  string
		method string
		path   string
		body   string
		want   []int
	}{
		{"malformed JSON", me.token, "POST", "/v1/leases", `{"pool":`, []int{400}},
		{"unknown field", me.token, "POST", "/v1/leases", `{"pool":"soak","ttl":"1m","colour":"red"}`, []int{400}},
		{"bad ttl", me.token, "POST", "/v1/leases", `{"pool":"soak","ttl":"forever"}`, []int{400}},
		{"negative priority type", me.token, "POST", "/v1/leases", `{"pool":"soak","priority":"high"}`, []int{400}},
		{"unknown pool", me.token, "POST", "/v1/leases", `{"pool":"no-such-pool","ttl":"1m"}`, []int{404}},
		{"pool outside the role's globs", me.token, "POST", "/v1/leases", `{"pool":"` + forbiddenPool + `","ttl":"1m"}`, []int{403}},
		{"no token", "", "POST", "/v1/leases", `{"pool":"soak","ttl":"1m"}`, []int{401}},
		{"unknown token", "kobe_0000000000000000000000000000000000000000", "GET", "/v1/leases", "", []int{401}},
		{"oversized metadata", me.token, "POST", "/v1/leases", `{"pool":"soak","metadata":{"k":"` + strings.Repeat("x", 9000) + `"}}`, []int{400}},
		{"someone else's lease", me.token, "GET", "/v1/leases/" + other, "", []int{404}},
		{"extend someone else's lease", me.token, "PATCH", "/v1/leases/" + other, `{"extendTtl":"1m"}`, []int{404}},
		{"bad extension", me.token, "PATCH", "/v1/leases/" + other, `{"extendTtl":"soon"}`, []int{400, 404}},
		{"pool admin as ci", me.token, "DELETE", "/v1/pools/" + soakPool, "", []int{403}},
		{"token admin as ci", me.token, "POST", "/v1/tokens", `{"name":"x","role":"admin"}`, []int{403}},
	}
	c := cases[rng.Intn(len(cases))]
	var body []byte
	if c.body != "" {
		body = []byte(c.body)
	}
	a := e.call(tr, false, "invalid: "+c.name, c.token, c.method, c.path, body, nil)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.invalid[c.name]++
	if a.Status == 0 || a.Status >= 500 {
		return // judged with the fault windows, as every 5xx is
	}
	ok := false
	for _, w := range c.want {
		ok = ok || a.Status == w
	}
	if !ok || a.Reason == "" {
		tr.wrong = append(tr.wrong, fmt.Sprintf("invalid request %q answered %d %q, want %v with a reason", c.name, a.Status, a.Reason, c.want))
	}
}

// otherLease is a lease id of another principal if one is known, else a made-up id.
func (e *env) otherLease(tr *traffic, me principal) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for i := len(tr.leases) - 1; i >= 0; i-- {
		if tr.leases[i].Principal != me.name {
			return tr.leases[i].ID
		}
	}
	return "lease-that-does-not-exist"
}

func sleepOrStop(d time.Duration, stop <-chan struct{}) bool {
	select {
	case <-stop:
		return false
	case <-time.After(d):
		return true
	}
}
