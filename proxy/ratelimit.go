package proxy

import (
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/contractd/contractd/config"
)

// rateLimiter is an optional per-client-key token bucket (server.rate_limit).
// Buckets are keyed by the index of the authenticated key, so only
// configured keys get buckets (no spelling of a header makes a new one) and
// no key is held here; without keys, all clients share one bucket.
type rateLimiter struct {
	mu      sync.Mutex
	cfg     *config.RateLimit
	buckets map[int]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func (l *rateLimiter) configure(c *config.RateLimit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg = c
	l.buckets = map[int]*bucket{}
}

// allow takes a token from client's bucket; client is the authenticated
// key's index, or -1 when auth is off (one shared bucket).
func (l *rateLimiter) allow(client int) *APIError {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cfg == nil {
		return nil
	}
	burst := float64(max(l.cfg.Burst, 1))
	now := time.Now()
	b := l.buckets[client]
	if b == nil {
		b = &bucket{tokens: burst, last: now}
		l.buckets[client] = b
	}
	b.tokens = math.Min(burst, b.tokens+now.Sub(b.last).Seconds()*l.cfg.RequestsPerSecond)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return nil
	}
	wait := int(math.Ceil((1 - b.tokens) / l.cfg.RequestsPerSecond))
	return &APIError{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: CodeRateLimitExceeded,
		Message: "rate limit exceeded; retry later", RetryAfter: max(wait, 1)}
}
