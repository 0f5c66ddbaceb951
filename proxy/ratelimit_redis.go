package proxy

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
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
//
// A call with nothing else on the wire goes straight out (one EVALSHA).
// Calls that arrive while one is on the wire queue, and one goroutine
// sends the queue as a pipeline: one write and one read for all of them,
// on both sides, where each would otherwise pay its own syscalls and
// wake-ups, which on this kind of VM cost about as much as the script.
type redisStore struct {
	c   *redis.Client
	err error // the URL did not parse: every take fails (open)
	to  time.Duration

	mu       sync.Mutex
	onWire   int         // round trips in flight: direct calls and the batch
	queue    []*takeCall // waiting for the next batch
	flushing bool        // the flush goroutine runs
	closed   bool
	flushers sync.WaitGroup

	args atomic.Pointer[gcraArgs] // the encoded arguments of the last config
}

// redisMaxOnWire bounds the round trips in flight at once: while it is
// reached, calls queue for the next batch. Two, not one: with one, a
// second concurrent call always waited for the first's round trip and
// then for the flush goroutine's wake-up; with two, two concurrent calls
// both go straight out, and batching starts at the third. (The shortfalls
// TestRedisLimiterReplicas once showed under load were the test's
// reference, not this chain: see the test.)
const redisMaxOnWire = 2

// takeCall is one queued take; done receives once, after wait and err are
// set.
type takeCall struct {
	key  string
	args *gcraArgs
	wait time.Duration
	err  error
	done chan struct{}
}

var takeCalls = sync.Pool{New: func() any { return &takeCall{done: make(chan struct{}, 1)} }}

// gcraArgs is the script's ARGV for one limit, encoded once per config.
type gcraArgs struct {
	rl       *config.RateLimit
	interval string // µs between requests
	burst    int
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
	// Batches run on the main pool's warm connections, not on a second
	// pool that would dial on the first batch with 128 KiB buffers.
	opt.PipelinePoolSize = -1
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
	args := r.argsFor(rl)
	key := redisKeyPrefix + client
	r.mu.Lock()
	if r.onWire < redisMaxOnWire || r.closed {
		r.onWire++
		r.mu.Unlock()
		wait, err := r.direct(ctx, key, args)
		r.mu.Lock()
		r.onWire--
		r.startFlush()
		r.mu.Unlock()
		return wait, err
	}
	call := takeCalls.Get().(*takeCall)
	call.key, call.args = key, args
	r.queue = append(r.queue, call)
	r.startFlush()
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, r.to)
	defer cancel()
	select {
	case <-call.done:
		wait, err := call.wait, call.err
		*call = takeCall{done: call.done}
		takeCalls.Put(call)
		return wait, err
	case <-ctx.Done():
		// The flusher still owns call: it is not reused.
		return 0, ctx.Err()
	}
}

func (r *redisStore) argsFor(rl *config.RateLimit) *gcraArgs {
	if a := r.args.Load(); a != nil && a.rl == rl {
		return a
	}
	a := &gcraArgs{rl: rl, interval: strconv.FormatFloat(1e6/rl.RequestsPerSecond, 'f', 3, 64), burst: max(rl.Burst, 1)}
	r.args.Store(a)
	return a
}

// direct is one take in its own round trip.
func (r *redisStore) direct(ctx context.Context, key string, a *gcraArgs) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, r.to)
	defer cancel()
	return gcraResult(gcraScript.Run(ctx, r.c, []string{key}, a.interval, a.burst))
}

// startFlush starts the flush goroutine when calls wait, a round trip is
// free and none runs; r.mu is held. Once closed, no goroutine starts: the
// calls still queued fail (and pass).
func (r *redisStore) startFlush() {
	if len(r.queue) == 0 || r.flushing || r.onWire >= redisMaxOnWire {
		return
	}
	if r.closed {
		for _, call := range r.queue {
			call.err = redis.ErrClosed
			call.done <- struct{}{}
		}
		r.queue = nil
		return
	}
	r.flushing = true
	r.onWire++
	r.flushers.Add(1)
	go r.flush()
}

// flush sends the queue as one pipeline, again while calls queued during
// the round trip, and ends when the queue is empty.
func (r *redisStore) flush() {
	defer r.flushers.Done()
	for {
		r.mu.Lock()
		batch := r.queue
		r.queue = nil
		if len(batch) == 0 {
			r.flushing = false
			r.onWire--
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		r.send(batch)
		for _, call := range batch {
			call.done <- struct{}{}
		}
	}
}

// send runs batch's takes in one pipeline. A Redis that lost its script
// cache (a restart) answers NOSCRIPT: those run again with EVAL, which
// loads the script.
func (r *redisStore) send(batch []*takeCall) {
	ctx, cancel := context.WithTimeout(context.Background(), r.to)
	defer cancel()
	pipe := r.c.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, call := range batch {
		cmds[i] = gcraScript.EvalSha(ctx, pipe, []string{call.key}, call.args.interval, call.args.burst)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
			continue
		}
		batch[i].wait, batch[i].err = gcraResult(cmd)
	}
	if len(again) == 0 {
		return
	}
	pipe = r.c.Pipeline()
	for _, i := range again {
		cmds[i] = gcraScript.Eval(ctx, pipe, []string{batch[i].key}, batch[i].args.interval, batch[i].args.burst)
	}
	_, _ = pipe.Exec(ctx)
	for _, i := range again {
		batch[i].wait, batch[i].err = gcraResult(cmds[i])
	}
}

// gcraResult reads the script's answer: {1, 0} allowed, {0, µs} refused.
func gcraResult(cmd *redis.Cmd) (time.Duration, error) {
	res, err := cmd.Int64Slice()
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

// close releases the connections; a batch on the wire fails (its callers
// pass, counted) and its goroutine ends before close returns.
func (r *redisStore) close() {
	if r.c == nil {
		return
	}
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	_ = r.c.Close()
	r.flushers.Wait()
}

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}
