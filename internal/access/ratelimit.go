package access

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultRateLimit applies to roles without a rateLimit.
var DefaultRateLimit = RateLimit{RequestsPerSecond: 20, Burst: 40}

// RateLimiter keeps one token bucket per principal.
type RateLimiter struct {
	Policy *Policy

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// Allow takes one request from the principal's bucket; when it is empty it returns how long
// to wait before retrying.
func (l *RateLimiter) Allow(p Principal) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*rate.Limiter{}
	}
	key := p.Role + "/" + p.Name
	b, ok := l.buckets[key]
	if !ok {
		rl := DefaultRateLimit
		if r, ok := l.Policy.RoleOf(p); ok && r.RateLimit != nil {
			rl = *r.RateLimit
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
