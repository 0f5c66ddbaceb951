package proxy

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/contractd/contractd/config"
	"github.com/redis/go-redis/v9"
)

// redisKeyPrefix namespaces the bucket keys; the rest is the client's key
// id (hex) or "shared" when auth is off.
const redisKeyPrefix = "contractd:ratelimit:"

// gcraScript is the whole decision, run atomically by Redis: the generic
// cell rate algorithm, which is the token bucket kept as one number, the
// bucket's "theoretical arrival time" (tat, µs). A request is allowed when
// the bucket would not overflow past burst; each one pushes tat one
// emission interval (1/rate) on. Redis's own clock is used, so replicas
// with skewed clocks still agree. The key expires when the bucket would be
// full again (an absent key is a full bucket).
//
// KEYS[1] bucket; ARGV[1] emission interval (µs); ARGV[2] burst.
// Returns {1, 0} when allowed, {0, µs until a request would be}.
var gcraScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or 0) or 0
if tat < now then tat = now end
local next_tat = tat + interval
local allow_at = next_tat - burst * interval
if allow_at > now then
  return {0, math.ceil(allow_at - now)}
end
redis.call('SET', KEYS[1], string.format('%.0f', next_tat), 'PX', math.ceil((next_tat - now) / 1000) + 1)
return {1, 0}
`)

// redisStore keeps the buckets in Redis, shared by every replica.
type redisStore struct {
	c   *redis.Client
	err error // the URL did not parse: every take fails (open)
	to  time.Duration
}

var quietRedis sync.Once

func newRedisStore(url string, timeout time.Duration) *redisStore {
	if timeout <= 0 {
		timeout = config.DefaultRateLimitTimeout
	}
	// go-redis logs pool failures to stderr; the limiter logs (rate
	// limited) and counts them itself.
	quietRedis.Do(func() { redis.SetLogger(discardLogger{}) })
	opt, err := redis.ParseURL(url)
	if err != nil {
		// Not err itself: it may quote the URL and its password.
		return &redisStore{err: errStoreURL}
	}
	// One quick try per request: the limiter fails open rather than wait.
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = timeout, timeout, timeout, timeout
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	opt.DisableIdentity = true
	c := redis.NewClient(opt)
	// Dial once and load the script now, waiting at most warmUp: the first
	// request would otherwise pay the dial and the script upload inside its
	// own short timeout and, on a busy machine, fail open. A Redis that is
	// down costs this wait once, at start or when the URL changes.
	ctx, cancel := context.WithTimeout(context.Background(), redisWarmUp)
	_ = gcraScript.Load(ctx, c).Err()
	cancel()
	return &redisStore{c: c, to: timeout}
}

// redisWarmUp bounds newRedisStore's first connection and script load.
const redisWarmUp = time.Second

func (r *redisStore) take(ctx context.Context, client string, rl *config.RateLimit) (time.Duration, error) {
	if r.err != nil {
		return 0, r.err
	}
	if client == "" {
		client = "shared"
	}
	ctx, cancel := context.WithTimeout(ctx, r.to)
	defer cancel()
	interval := strconv.FormatFloat(1e6/rl.RequestsPerSecond, 'f', 3, 64)
	res, err := gcraScript.Run(ctx, r.c, []string{redisKeyPrefix + client}, interval, max(rl.Burst, 1)).Int64Slice()
	if err != nil {
		return 0, err
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("rate limit script returned %d values", len(res))
	}
	if res[0] == 1 {
		return 0, nil
	}
	return time.Duration(res[1]) * time.Microsecond, nil
}

func (r *redisStore) close() {
	if r.c != nil {
		_ = r.c.Close()
	}
}

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}
