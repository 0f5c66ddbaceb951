package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// limiterFor is a limiter on store ("memory" or "redis", on the test
// binary's shared Redis), configured with rate and burst.
func limiterFor(t *testing.T, store string, rate float64, burst int) *rateLimiter {
	t.Helper()
	l := &rateLimiter{}
	l.configure(rateCfg(t, store, rate, burst), testRedisEnv(t))
	t.Cleanup(l.close)
	return l
}

func rateCfg(t *testing.T, store string, rate float64, burst int) *config.RateLimit {
	c := &config.RateLimit{RequestsPerSecond: rate, Burst: burst, Store: config.RateLimitStore(store)}
	if store == "redis" {
		c.RedisURLEnv = "RL_TEST_REDIS_URL"
		// Generous: a call that times out fails open, which would read
		// as a limiter letting too much through on an overloaded machine.
		c.Timeout = 2 * time.Second
	}
	return c
}

func testRedisEnv(t *testing.T) func(string) string {
	url := testkit.RedisURL(t)
	return func(string) string { return url }
}

// clientID is a fresh client for this test: buckets in the shared Redis
// outlive a test, and names must not collide between tests or runs.
func clientID(t *testing.T) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func TestRateLimiter(t *testing.T) {
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			var off rateLimiter
			if off.allow(context.Background(), "a") != nil {
				t.Fatal("no config: everything allowed")
			}
			l := limiterFor(t, store, 0.5, 2)
			a, b := clientID(t), clientID(t)
			for i := 0; i < 2; i++ {
				if e := l.allow(context.Background(), a); e != nil {
					t.Fatalf("burst request %d refused: %v", i, e)
				}
			}
			e := l.allow(context.Background(), a)
			// One token every 2 s: the next is 2 s away (ceil of a bit less).
			if e == nil || e.Status != 429 || e.Type != typeRateLimit || e.Code != CodeRateLimitExceeded || e.RetryAfter != 2 {
				t.Fatalf("over the burst: %+v", e)
			}
			if l.allow(context.Background(), b) != nil {
				t.Error("keys have separate buckets")
			}
			w := httptest.NewRecorder()
			writeError(w, e)
			if w.Code != 429 || w.Header().Get("Retry-After") != "2" {
				t.Errorf("429 without Retry-After: %d %v", w.Code, w.Header())
			}
			var body struct {
				Error struct{ Type, Code, Message string }
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error.Type != "rate_limit_error" ||
				body.Error.Code != "rate_limit_exceeded" || body.Error.Message != "rate limit exceeded; retry later" {
				t.Errorf("429 body %s", w.Body)
			}
			// A reload: memory buckets start over; shared ones must not
			// (another replica still holds them).
			l.configure(rateCfg(t, store, 0.5, 2), testRedisEnv(t))
			e = l.allow(context.Background(), a)
			if reset := e == nil; reset != (store == "memory") {
				t.Errorf("after a reload: %+v (reset expected: %v)", e, store == "memory")
			}
			// Without auth all clients share one bucket.
			l.configure(rateCfg(t, store, 0.5, 1), testRedisEnv(t))
			if store == "redis" {
				flushShared(t)
			}
			if l.allow(context.Background(), "") != nil || l.allow(context.Background(), "") == nil {
				t.Error("without auth all clients share one bucket")
			}
		})
	}
}

// TestRateLimiterRefill: a table of (rate, burst) run on both stores; each
// refills at its rate and never beyond its burst.
//
// Asking takes time, and on a loaded machine a call can take longer than
// the rate's interval (10 ms at 100/s): the upper bounds count what the
// time the asking really took refilled, as the refill bound counts the
// sleep; on a quiet machine they are the burst itself.
func TestRateLimiterRefill(t *testing.T) {
	for _, store := range []string{"memory", "redis"} {
		for _, tc := range []struct {
			rate       float64
			burst      int
			wantBurst  int           // allowed back to back
			sleep      time.Duration // then
			wantRefill int           // allowed after the sleep
			retryAfter int           // Retry-After once empty
		}{
			{rate: 10, burst: 3, wantBurst: 3, sleep: 220 * time.Millisecond, wantRefill: 2, retryAfter: 1},
			{rate: 20, burst: 0, wantBurst: 1, sleep: 120 * time.Millisecond, wantRefill: 1, retryAfter: 1},  // burst 0 is 1
			{rate: 100, burst: 2, wantBurst: 2, sleep: 300 * time.Millisecond, wantRefill: 2, retryAfter: 1}, // capped at burst
			{rate: 0.2, burst: 1, wantBurst: 1, sleep: 0, wantRefill: 0, retryAfter: 5},
		} {
			t.Run(fmt.Sprintf("%s/rate=%g,burst=%d", store, tc.rate, tc.burst), func(t *testing.T) {
				l := limiterFor(t, store, tc.rate, tc.burst)
				c := clientID(t)
				// take asks until refused: the allowed count, the refusal,
				// when the first ask was sent, when the refused one was
				// sent and when the last returned.
				take := func() (n int, last *APIError, first, refused, end time.Time) {
					first = time.Now()
					for range 100 {
						sent := time.Now()
						last = l.allow(context.Background(), c)
						end = time.Now()
						if last != nil {
							return n, last, first, sent, end
						}
						n++
					}
					return n, nil, first, time.Time{}, end
				}
				// What rate refilled in d, on top of level tokens.
				refilled := func(level float64, d time.Duration) int { return int(level + tc.rate*d.Seconds()) }
				n, e, first, refused, end := take()
				if most := refilled(float64(tc.wantBurst), end.Sub(first)); n < tc.wantBurst || n > most || e == nil || e.RetryAfter != tc.retryAfter {
					t.Fatalf("back to back in %v: %d allowed then %+v; want %d (at most %d) then Retry-After %d", end.Sub(first), n, e, tc.wantBurst, most, tc.retryAfter)
				}
				time.Sleep(tc.sleep)
				n, _, first, _, end = take()
				// Empty (under one token) when the refusal was sent at the
				// latest; refilled since, never past the burst, until the
				// asking began; refilled while it ran.
				level := min(float64(max(tc.burst, 1)), 1+tc.rate*first.Sub(refused).Seconds())
				if most := refilled(level, end.Sub(first)); n < tc.wantRefill || n > most {
					t.Errorf("after %v: %d allowed in %v, want %d (at most %d)", tc.sleep, n, end.Sub(first), tc.wantRefill, most)
				}
			})
		}
	}
}

func flushShared(t *testing.T) {
	c := redis.NewClient(mustParseURL(t, testkit.RedisURL(t)))
	defer c.Close()
	if err := c.Del(context.Background(), redisKeyPrefix+"shared").Err(); err != nil {
		t.Fatal(err)
	}
}

func mustParseURL(t *testing.T, u string) *redis.Options {
	o, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestRedisLimiterReplicas: N limiters (N replicas, each its own client)
// on one Redis allow together what one token bucket of the configured
// rate allows for the same requests, within 10%, and never more than the
// rate allows in the run.
//
// The reference is an ideal bucket (idealBucket) fed with the requests'
// own times, not burst + rate x elapsed: that figure assumes the requests
// kept the bucket empty the whole run, and on a loaded machine they do
// not (streams stall, a bucket that fills while nobody asks loses what
// overflows, and what refilled near the end is never asked for). Where a
// request met Redis lies between its send and its return, so the
// reference is run on both and the count must be near one of them.
func TestRedisLimiterReplicas(t *testing.T) {
	const (
		replicas = 4
		rate     = 200.0
		burst    = 20 // small: requests are refused from the first 0.1 s on
		run      = 2 * time.Second
	)
	c := clientID(t)
	limiters := make([]*rateLimiter, replicas)
	for i := range limiters {
		limiters[i] = limiterFor(t, "redis", rate, burst)
		// Connected and the script cached before the clock starts: the
		// first call's dial must not count as time the bucket refilled.
		if e := limiters[i].allow(context.Background(), c+"-warm"); e != nil {
			t.Fatal(e)
		}
	}
	type take struct {
		sent, back time.Time
		ok         bool
	}
	streams := make([][]take, 2*replicas) // two request streams per replica
	var wg sync.WaitGroup
	var begin time.Time // set before gate closes, read after
	gate := make(chan struct{})
	for i := range streams {
		l := limiters[i/2]
		wg.Go(func() {
			<-gate
			for {
				sent := time.Now()
				if sent.Sub(begin) >= run {
					return
				}
				ok := l.allow(context.Background(), c) == nil
				streams[i] = append(streams[i], take{sent, time.Now(), ok})
				time.Sleep(time.Millisecond)
			}
		})
	}
	begin = time.Now()
	close(gate)
	wg.Wait()
	var allowed, denied int
	var sent, back []time.Time
	end := begin
	for _, s := range streams {
		for _, tk := range s {
			if tk.ok {
				allowed++
			} else {
				denied++
			}
			sent, back = append(sent, tk.sent), append(back, tk.back)
			if tk.back.After(end) {
				end = tk.back
			}
		}
	}
	bySent, byBack := idealBucket(sent, rate, burst), idealBucket(back, rate, burst)
	most := burst + rate*end.Sub(begin).Seconds()
	t.Logf("%d replicas: %d allowed, %d refused in %v; one bucket allows %d (by send time) or %d (by return time), the rate at most %.0f",
		replicas, allowed, denied, end.Sub(begin), bySent, byBack, most)
	if denied == 0 {
		t.Fatal("nothing refused: the offered load did not exceed the rate")
	}
	lo, hi := float64(min(bySent, byBack)), float64(max(bySent, byBack))
	if got := float64(allowed); got < 0.9*lo || got > 1.1*hi || got > 1.1*most {
		t.Errorf("%d replicas together allowed %d, want %.0f-%.0f ±10%% (and at most %.0f +10%%)", replicas, allowed, lo, hi, most)
	}
}

// idealBucket counts what one bucket of rate and burst allows of requests
// arriving at times: the GCRA of gcraScript, in memory.
func idealBucket(times []time.Time, rate float64, burst int) int {
	times = slices.SortedFunc(slices.Values(times), time.Time.Compare)
	interval := time.Duration(float64(time.Second) / rate)
	var tat time.Time // when the bucket is full again
	n := 0
	for _, now := range times {
		if tat.Before(now) {
			tat = now
		}
		if tat.Add(interval - time.Duration(burst)*interval).After(now) {
			continue
		}
		tat = tat.Add(interval)
		n++
	}
	return n
}

// The reference itself: a full bucket's burst at once, then the rate; a
// slower stream all allowed; an idle bucket refills to its burst only.
func TestIdealBucket(t *testing.T) {
	t0 := time.Now()
	every := func(step time.Duration, n int, from time.Time) []time.Time {
		ts := make([]time.Time, n)
		for i := range ts {
			ts[i] = from.Add(time.Duration(i) * step)
		}
		return ts
	}
	for _, tc := range []struct {
		name  string
		times []time.Time
		want  int
	}{
		{"at once", every(0, 100, t0), 20},
		{"faster than the rate", every(time.Millisecond, 1001, t0), 20 + 200}, // 0 to 1 s: the burst, then 200
		{"slower than the rate", every(10*time.Millisecond, 100, t0), 100},
		{"idle between", append(every(0, 50, t0), every(0, 50, t0.Add(10*time.Second))...), 40},
	} {
		if got := idealBucket(tc.times, 200, 20); got != tc.want {
			t.Errorf("%s: %d allowed, want %d", tc.name, got, tc.want)
		}
	}
}

type countMetric struct{ n atomic.Int64 }

func (c *countMetric) StoreError() { c.n.Add(1) }

// observe gives l a JSON logger writing to logs and a store-error
// counter, which it returns.
func observe(l *rateLimiter, logs io.Writer) *countMetric {
	m := &countMetric{}
	l.logger.Store(slog.New(slog.NewJSONHandler(logs, nil)))
	l.metrics.Store(RateLimitMetrics(m))
	return m
}

// limitOnRedis configures l on the Redis at url (rps, burst 1) and checks
// that it limits: a fresh client's first call passes, the next is
// refused. It returns that client.
func limitOnRedis(t *testing.T, l *rateLimiter, url string, rps float64) string {
	t.Helper()
	l.configure(&config.RateLimit{RequestsPerSecond: rps, Burst: 1, Store: "redis", RedisURLEnv: "X"}, func(string) string { return url })
	c := clientID(t)
	if l.allow(context.Background(), c) != nil || l.allow(context.Background(), c) == nil {
		t.Fatal("the Redis store does not limit")
	}
	return c
}

// TestRedisLimiterFailOpen: Redis killed mid-run, the limiter lets every
// request through, counts the failures and logs one line per interval;
// Redis back on the same port, limiting resumes.
func TestRedisLimiterFailOpen(t *testing.T) {
	srv := testkit.StartRedis(t, 0)
	logs := &testkit.SyncBuffer{}
	l := &rateLimiter{logEvery: 400 * time.Millisecond, backoff: 20 * time.Millisecond}
	m := observe(l, logs)
	defer l.close()
	c := limitOnRedis(t, l, srv.URL, 1)

	srv.Stop()
	const down = 1200 * time.Millisecond
	start := time.Now()
	n := 0
	for time.Since(start) < down {
		if e := l.allow(context.Background(), c); e != nil {
			t.Fatalf("Redis down: request refused (%+v); the limiter must fail open", e)
		}
		n++
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(start)
	lines := strings.Count(logs.String(), "rate limit store unavailable")
	maxLines := int(elapsed/l.logEvery) + 1
	t.Logf("%d requests in %v with Redis down: %d store errors, %d log lines", n, elapsed, m.n.Load(), lines)
	if m.n.Load() < 2 {
		t.Errorf("store errors counted: %d", m.n.Load())
	}
	if lines < 2 || lines > maxLines {
		t.Errorf("%d \"unavailable\" lines in %v, want one per %v (2..%d):\n%s", lines, elapsed, l.logEvery, maxLines, logs)
	}
	if strings.Contains(logs.String(), srv.URL) {
		t.Errorf("the log quotes the Redis URL:\n%s", logs)
	}

	// Back on the same port: limiting resumes (the bucket is new: one
	// request passes, the next is refused).
	testkit.StartRedis(t, srv.Port)
	deadline := time.Now().Add(5 * time.Second)
	for l.allow(context.Background(), c) == nil {
		if time.Now().After(deadline) {
			t.Fatal("Redis back, but the limiter still lets everything through")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "rate limit store reachable again") {
		t.Errorf("no recovery line:\n%s", logs)
	}
}

// TestRedisLimiterBadURL: a URL that does not parse fails open, counted,
// and never echoes the URL.
func TestRedisLimiterBadURL(t *testing.T) {
	logs := &testkit.SyncBuffer{}
	l := &rateLimiter{}
	m := observe(l, logs)
	l.configure(&config.RateLimit{RequestsPerSecond: 1, Store: "redis", RedisURLEnv: "X"}, func(string) string { return "redis://:hunter2@[::1" })
	defer l.close()
	if l.allow(context.Background(), "a") != nil || m.n.Load() != 1 {
		t.Fatalf("bad URL: want fail open and one error, got %d", m.n.Load())
	}
	if s := logs.String(); strings.Contains(s, "hunter2") || !strings.Contains(s, "does not parse") {
		t.Errorf("log: %s", s)
	}
}

func TestBearerToken(t *testing.T) {
	for h, want := range map[string]string{"Bearer k1": "k1", "bearer k1": "k1", "BEARER   k1  ": "k1", "Basic k1": "", "": "", "Bearer": ""} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", h)
		if got := bearerToken(r); got != want {
			t.Errorf("%q: got %q want %q", h, got, want)
		}
	}
}

func TestUpstreamConcurrencyCap(t *testing.T) {
	var s semaphores
	u := &config.Upstream{Name: "u", MaxConcurrency: 1}
	release, err := s.acquire(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.acquire(ctx, u); err == nil {
		t.Fatal("second call got a slot while the first holds it")
	}
	release()
	r2, err := s.acquire(context.Background(), u)
	if err != nil {
		t.Fatal("slot not released")
	}
	r2()
	// No cap: never blocks.
	free := &config.Upstream{Name: "free"}
	for i := 0; i < 3; i++ {
		if _, err := s.acquire(ctx, free); err != nil {
			t.Fatal(err)
		}
	}
}

// scriptedStore answers take from a script: an error, or a wait.
type scriptedStore struct {
	mu    sync.Mutex
	steps []error // nil: refuse (wait 1 s)
	calls int
}

func (s *scriptedStore) take(context.Context, string, *config.RateLimit) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if len(s.steps) == 0 {
		return time.Second, nil
	}
	err := s.steps[0]
	s.steps = s.steps[1:]
	if err != nil {
		return 0, err
	}
	return time.Second, nil
}

func (s *scriptedStore) close() {}

// TestRateLimiterTrip: one failed store call lets that request through
// but the next one asks the store again; RateLimitStoreTrip failures in a
// row skip the store for the backoff; a success closes it again.
func TestRateLimiterTrip(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		failures  int
		wantCalls int // store calls for failures + 3 requests, within the backoff
	}{
		{"one failure", 1, 1 + 3},
		{"two in a row", 2, 2 + 3},
		{"trips", RateLimitStoreTrip, RateLimitStoreTrip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &scriptedStore{}
			for range tc.failures {
				st.steps = append(st.steps, boom)
			}
			l := &rateLimiter{backoff: time.Hour}
			m := observe(l, io.Discard)
			l.state.Store(&limitState{cfg: &config.RateLimit{RequestsPerSecond: 1}, store: st})
			for i := range tc.failures {
				if e := l.allow(context.Background(), "c"); e != nil {
					t.Fatalf("failure %d refused: fail open", i+1)
				}
			}
			refused := 0
			for range 3 {
				if l.allow(context.Background(), "c") != nil {
					refused++
				}
			}
			if st.calls != tc.wantCalls || int(m.n.Load()) != tc.failures {
				t.Errorf("store calls %d (want %d), errors counted %d (want %d)", st.calls, tc.wantCalls, m.n.Load(), tc.failures)
			}
			if tripped := tc.failures >= RateLimitStoreTrip; tripped != (refused == 0) {
				t.Errorf("%d refused after %d failures", refused, tc.failures)
			}
			// The backoff over, a success resets the count.
			l.downUntil.Store(0)
			if l.allow(context.Background(), "c") == nil || l.inARow.Load() != 0 {
				t.Errorf("after the backoff: the store's answer is not used, or failures not reset (%d)", l.inARow.Load())
			}
		})
	}
}

// A review poll (GET /v1/reviews/{id}, with or without ?wait=) is a
// request of its client key like a chat completion: it takes a token from
// the key's bucket, after auth, and gets 429 with Retry-After when none is
// left, so a client polling in a loop cannot load the review store past
// the key's rate. Both kinds of request share the one bucket.
func TestRateLimitCountsReviewPolls(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{ServerExtra: "  rate_limit: {requests_per_second: 0.2, burst: 2}"})
	const poll = "/v1/reviews/req_0123456789abcdef01234567"
	for i := 0; i < 2; i++ {
		if r := h.get(poll, clientKey); r.Status != 404 {
			t.Fatalf("poll %d: %d %s, want 404 review_not_found", i+1, r.Status, r.Body)
		}
	}
	r := h.get(poll+"?wait=1s", clientKey)
	wantError(t, r, 429, "rate_limit_error", "rate_limit_exceeded", nil)
	if r.Header.Get("Retry-After") == "" || r.Header.Get("X-Request-Id") == "" {
		t.Errorf("headers %v", r.Header)
	}
	// The polls spent the key's tokens for its chat requests too.
	if r := h.post("", `{"model":"free","messages":[`+userHi+`]}`); r.Status != 429 {
		t.Errorf("chat after two polls: %d, want 429", r.Status)
	}
	if h.up.Hits() != 0 {
		t.Errorf("upstream hits %d", h.up.Hits())
	}
	// Another key has its own bucket; a wrong key is refused by auth first.
	if r := h.get(poll, "client-key-2"); r.Status != 404 {
		t.Errorf("other key: %d %s", r.Status, r.Body)
	}
	if r := h.get(poll, "nope"); r.Status != 401 {
		t.Errorf("wrong key: %d %s", r.Status, r.Body)
	}
}
