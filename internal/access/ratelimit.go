package access

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultRateLimit applies to roles without a rateLimit.
var DefaultRateLimit = RateLimit{RequestsPerSecond: 20, Burst: 40}

// AnonymousRateLimit applies per client address to the requests that carry no credentials
// (the portal's login and callback, its static files, /v1/status without a token).
var AnonymousRateLimit = RateLimit{RequestsPerSecond: 20, Burst: 40}

// maxBuckets bounds the buckets kept in memory: past it, the buckets that are full again (an
// idle principal or address, which a fresh bucket would treat the same) are dropped, so that
// requests from ever new addresses cannot grow the map without bound.
const maxBuckets = 10000

// RateLimiter keeps one token bucket per principal, and one per client address for requests
// without credentials.
type RateLimiter struct {
	Policy *Policy

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// Allow takes one request from the principal's bucket; when it is empty it returns how long
// to wait before retrying.
func (l *RateLimiter) Allow(p Principal) (bool, time.Duration) {
	rl := DefaultRateLimit
	if r, ok := l.Policy.RoleOf(p); ok && r.RateLimit != nil {
		rl = *r.RateLimit
	}
	return l.take("p/"+p.Role+"/"+p.Name, rl)
}

// AllowAddress takes one request from the bucket of a client address (a request that carries
// no credentials, so no principal).
func (l *RateLimiter) AllowAddress(addr string) (bool, time.Duration) {
	return l.take("a/"+addr, AnonymousRateLimit)
}

func (l *RateLimiter) take(key string, rl RateLimit) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*rate.Limiter{}
	}
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxBuckets {
			l.sweep()
		}
		b = rate.NewLimiter(rate.Limit(rl.RequestsPerSecond), rl.Burst)
		l.buckets[key] = b
	}
	res := b.Reserve()
	if d := res.Delay(); d > 0 {
		res.Cancel()
		return false, d
	}
	return true, 0
}

// sweep drops the buckets that are full (forgetting them changes nothing); when every bucket
// is in use (a flood from more addresses than maxBuckets) it drops them all rather than grow.
func (l *RateLimiter) sweep() {
	now := time.Now()
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(b.Burst()) {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= maxBuckets {
		clear(l.buckets)
	}
}
