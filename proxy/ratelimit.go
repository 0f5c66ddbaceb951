package proxy

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contractd/contractd/config"
)

// RateLimitMetrics counts rate-limit store failures
// (contractd_rate_limit_store_errors_total). Safe for concurrent use.
type RateLimitMetrics interface{ StoreError() }

// Rate-limit store tuning (docs/config.md).
const (
	// RateLimitStoreBackoff: after RateLimitStoreTrip failed calls in a
	// row, requests skip the store (and pass) for this long, so a store
	// that hangs costs one timeout per backoff rather than one per request.
	// A single slow call does not open the limiter for everyone.
	RateLimitStoreBackoff = time.Second
	RateLimitStoreTrip    = 3
	// RateLimitLogInterval: at most one "store unavailable" line this often.
	RateLimitLogInterval = 30 * time.Second
)

// rateLimiter is the optional per-client-key token bucket
// (server.rate_limit). A client is the authenticated key's id (a prefix of
// its SHA-256), so only configured keys get buckets (no spelling of a
// header makes a new one) and no key is held here; without keys, all
// clients share one bucket. The buckets live in a rateStore: this
// process's memory, or Redis, where every replica shares them.
//
// When the store fails the limiter fails open: the request passes, the
// failure is counted, and a line is logged at most once per logEvery.
type rateLimiter struct {
	mu    sync.Mutex // configure
	state atomic.Pointer[limitState]

	logger   atomic.Pointer[slog.Logger]
	metrics  atomic.Value // RateLimitMetrics
	logEvery time.Duration
	backoff  time.Duration

	lastLog    atomic.Int64 // unix nanos of the last "unavailable" line
	suppressed atomic.Int64 // failures since that line
	inARow     atomic.Int64 // failures since the last success
	downUntil  atomic.Int64 // unix nanos; before it, the store is skipped
	down       atomic.Bool  // a failure was logged and no success since
}

type limitState struct {
	cfg   *config.RateLimit
	store rateStore
	url   string // redis: the URL the store was built from
}

// rateStore takes one request from a bucket: wait is 0 when the request
// may pass, else how long until it could.
type rateStore interface {
	take(ctx context.Context, client string, rl *config.RateLimit) (wait time.Duration, err error)
	close()
}

// errStoreURL: the Redis URL in the environment did not parse.
var errStoreURL = errors.New("the redis URL does not parse")

// configure installs c (nil: no limit). A memory store starts empty on
// every reload; a Redis store keeps its client (and the shared buckets)
// while the URL stays the same.
func (l *rateLimiter) configure(c *config.RateLimit, env func(string) string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.state.Load()
	next := &limitState{cfg: c}
	switch {
	case c == nil:
	case c.Store == config.RateLimitRedis:
		next.url = env(c.RedisURLEnv)
		if old != nil && old.url == next.url && old.store != nil && old.cfg != nil && old.cfg.Timeout == c.Timeout {
			next.store = old.store
		} else {
			next.store = newRedisStore(next.url, c.Timeout)
		}
	default:
		next.store = &memoryStore{buckets: map[string]*bucket{}}
	}
	l.state.Store(next)
	if old != nil && old.store != nil && old.store != next.store {
		// Requests that loaded the old state may still be using it.
		time.AfterFunc(2*old.cfg.Timeout+time.Second, old.store.close)
	}
}

// allow takes a token from client's bucket; client is the authenticated
// key's id, or "" when auth is off (one shared bucket).
func (l *rateLimiter) allow(ctx context.Context, client string) *APIError {
	st := l.state.Load()
	if st == nil || st.cfg == nil {
		return nil
	}
	now := time.Now().UnixNano()
	if now < l.downUntil.Load() {
		return nil // failing open while the store backs off
	}
	wait, err := st.store.take(ctx, client, st.cfg)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil // the client went away: not the store's fault
		}
		l.fail(now, err)
		return nil
	}
	if l.inARow.Load() != 0 {
		l.inARow.Store(0)
	}
	if l.down.Load() && l.down.CompareAndSwap(true, false) {
		l.log().Info("rate limit store reachable again")
	}
	if wait <= 0 {
		return nil
	}
	return &APIError{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: CodeRateLimitExceeded,
		Message: "rate limit exceeded; retry later", RetryAfter: max(int(math.Ceil(wait.Seconds())), 1)}
}

// fail counts a store failure, backs off after several in a row, and logs
// at most once per interval (with how many failures the interval saw).
func (l *rateLimiter) fail(now int64, err error) {
	if m, ok := l.metrics.Load().(RateLimitMetrics); ok {
		m.StoreError()
	}
	backoff := l.backoff
	if backoff == 0 {
		backoff = RateLimitStoreBackoff
	}
	if l.inARow.Add(1) >= RateLimitStoreTrip {
		l.downUntil.Store(now + int64(backoff))
	}
	l.down.Store(true)
	n := l.suppressed.Add(1)
	every := l.logEvery
	if every == 0 {
		every = RateLimitLogInterval
	}
	last := l.lastLog.Load()
	if (last == 0 || now-last >= int64(every)) && l.lastLog.CompareAndSwap(last, now) {
		l.suppressed.Add(-n)
		l.log().Warn("rate limit store unavailable; requests pass unlimited", "error", err.Error(),
			"failures", n, "log_interval", every.String())
	}
}

func (l *rateLimiter) log() *slog.Logger {
	if lg := l.logger.Load(); lg != nil {
		return lg
	}
	return slog.Default()
}

// memoryStore keeps the buckets in this process.
type memoryStore struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func (m *memoryStore) take(_ context.Context, client string, rl *config.RateLimit) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	burst := float64(max(rl.Burst, 1))
	now := time.Now()
	b := m.buckets[client]
	if b == nil {
		b = &bucket{tokens: burst, last: now}
		m.buckets[client] = b
	}
	b.tokens = math.Min(burst, b.tokens+now.Sub(b.last).Seconds()*rl.RequestsPerSecond)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0, nil
	}
	return time.Duration((1 - b.tokens) / rl.RequestsPerSecond * float64(time.Second)), nil
}

func (m *memoryStore) close() {}

// close releases the store's connections.
func (l *rateLimiter) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.state.Swap(nil); st != nil && st.store != nil {
		st.store.close()
	}
}
