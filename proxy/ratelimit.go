package proxy

import (
	"crypto/sha256"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/contractd/contractd/config"
)

// rateLimiter is an optional per-client-key token bucket (server.rate_limit).
// Buckets are keyed by a SHA-256 of the key, so no key sits in the map and
// nothing here can log one; without keys, all clients share one bucket.
type rateLimiter struct {
	mu      sync.Mutex
	cfg     *config.RateLimit
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func (l *rateLimiter) configure(c *config.RateLimit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg = c
	l.buckets = map[string]*bucket{}
}

func (l *rateLimiter) allow(r *http.Request) *APIError {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cfg == nil {
		return nil
	}
	sum := sha256.Sum256([]byte(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")))
	key := string(sum[:])
	burst := float64(max(l.cfg.Burst, 1))
	now := time.Now()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) > 10000 { // unknown keys cannot grow memory without bound
			l.buckets = map[string]*bucket{}
		}
		b = &bucket{tokens: burst, last: now}
		l.buckets[key] = b
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
