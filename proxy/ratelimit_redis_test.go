package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
)

// queueBatch makes the calls go out as one batch: it fills the store's
// round trips, starts each call, waits until all of them are queued, then
// frees the round trips, which starts the flush. It returns when every
// call has returned. beforeFree, when set, runs once all are queued.
func queueBatch(t *testing.T, r *redisStore, calls []func(), beforeFree func()) {
	t.Helper()
	r.mu.Lock()
	r.onWire += redisMaxOnWire
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, call := range calls {
		wg.Go(func() {
			call()
		})
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		n := len(r.queue)
		r.mu.Unlock()
		if n == len(calls) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d calls queued", n, len(calls))
		}
		time.Sleep(time.Millisecond)
	}
	if beforeFree != nil {
		beforeFree()
	}
	r.mu.Lock()
	r.onWire -= redisMaxOnWire
	r.startFlush()
	r.mu.Unlock()
	wg.Wait()
}

// TestRedisStoreBatch: takes queued while a round trip is on the wire go
// out as one pipeline and get the answers one at a time would: each key
// its own bucket, one bucket's burst exactly, Retry-After from the script,
// and after a lost script cache (NOSCRIPT) the script loaded again.
func TestRedisStoreBatch(t *testing.T) {
	for _, tc := range []struct {
		name        string
		keys        int // distinct clients; calls go round them
		calls       int
		rate        float64
		burst       int
		flush       bool // SCRIPT FLUSH first
		wantAllowed int
	}{
		{name: "distinct keys", keys: 32, calls: 32, rate: 1, burst: 1, wantAllowed: 32},
		{name: "one key over its burst", keys: 1, calls: 10, rate: 0.5, burst: 3, wantAllowed: 3},
		{name: "two keys over their burst", keys: 2, calls: 12, rate: 0.5, burst: 2, wantAllowed: 4},
		{name: "script cache lost", keys: 8, calls: 8, rate: 1, burst: 1, flush: true, wantAllowed: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testkit.StartRedis(t, 0)
			r := newRedisStore(srv.URL, 2*time.Second)
			t.Cleanup(r.close)
			if tc.flush {
				if err := r.c.ScriptFlush(context.Background()).Err(); err != nil {
					t.Fatal(err)
				}
			}
			rl := &config.RateLimit{RequestsPerSecond: tc.rate, Burst: tc.burst}
			keys := make([]string, tc.keys)
			for i := range keys {
				keys[i] = clientID(t)
			}
			waits := make([]time.Duration, tc.calls)
			errs := make([]error, tc.calls)
			calls := make([]func(), tc.calls)
			for i := range calls {
				calls[i] = func() { waits[i], errs[i] = r.take(context.Background(), keys[i%tc.keys], rl) }
			}
			queueBatch(t, r, calls, nil)
			allowed := 0
			for i := range calls {
				switch {
				case errs[i] != nil:
					t.Fatalf("call %d: %v", i, errs[i])
				case waits[i] == 0:
					allowed++
				case waits[i] > time.Duration(float64(time.Second)/tc.rate):
					t.Errorf("call %d refused for %v, more than one interval", i, waits[i])
				}
			}
			if allowed != tc.wantAllowed {
				t.Errorf("%d of %d allowed, want %d", allowed, tc.calls, tc.wantAllowed)
			}
			if tc.flush {
				ok, err := r.c.ScriptExists(context.Background(), gcraScript.Hash()).Result()
				if err != nil || len(ok) != 1 || !ok[0] {
					t.Errorf("script not loaded again after NOSCRIPT: %v %v", ok, err)
				}
			}
		})
	}
}

// TestRedisLimiterConcurrentExact: 16 request streams on one bucket, with
// calls going straight out and in batches as they meet, allow exactly the
// burst (the rate adds nothing within the test).
func TestRedisLimiterConcurrentExact(t *testing.T) {
	const (
		streams = 16
		each    = 20
		burst   = 50
	)
	l := limiterFor(t, "redis", 0.001, burst)
	c := clientID(t)
	var allowed, refused atomic.Int64
	var wg sync.WaitGroup
	for range streams {
		wg.Go(func() {
			for range each {
				if e := l.allow(context.Background(), c); e == nil {
					allowed.Add(1)
				} else if e.Status == 429 {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if allowed.Load() != burst || refused.Load() != streams*each-burst {
		t.Errorf("%d allowed, %d refused; want %d and %d", allowed.Load(), refused.Load(), burst, streams*each-burst)
	}
}

// TestRedisLimiterBatchFailOpen: Redis gone while calls are queued: every
// one passes and each failure is counted
// (contractd_rate_limit_store_errors_total).
func TestRedisLimiterBatchFailOpen(t *testing.T) {
	srv := testkit.StartRedis(t, 0)
	l := &rateLimiter{backoff: time.Hour}
	m := observe(l, io.Discard)
	defer l.close()
	c := limitOnRedis(t, l, srv.URL, 0.001)
	srv.Stop()
	const n = 8
	refused := make([]*APIError, n)
	calls := make([]func(), n)
	for i := range calls {
		calls[i] = func() { refused[i] = l.allow(context.Background(), c) }
	}
	queueBatch(t, l.state.Load().store.(*redisStore), calls, nil)
	for i, e := range refused {
		if e != nil {
			t.Errorf("call %d refused with Redis down (%+v): the limiter fails open", i, e)
		}
	}
	if m.n.Load() != n {
		t.Errorf("%d store errors counted, want %d", m.n.Load(), n)
	}
}

// TestRedisStoreClose: close answers every queued call, whether the batch
// still waits for a round trip (no flush goroutine starts) or is on the
// wire to a server that never answers (the flush goroutine ends); nothing
// is left running.
func TestRedisStoreClose(t *testing.T) {
	for _, tc := range []struct {
		name   string
		silent bool // a server that accepts and never answers
	}{
		{name: "queued", silent: false},
		{name: "on the wire", silent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := testkit.RedisURL(t) // shared, started once: before the count
			settled := noLeaks(t)
			stop := func() {}
			if tc.silent {
				url, stop = silentServer(t)
			}
			// A timeout far beyond the test: a call must end because the
			// store closed, not because it timed out.
			r := newRedisStore(url, time.Minute)
			rl := &config.RateLimit{RequestsPerSecond: 1, Burst: 1}
			const n = 4
			errs := make([]error, n)
			calls := make([]func(), n)
			for i := range calls {
				calls[i] = func() { _, errs[i] = r.take(context.Background(), clientID(t), rl) }
			}
			beforeFree := r.close
			if tc.silent {
				beforeFree = nil
				go func() {
					for { // close once the batch is on the wire
						r.mu.Lock()
						sent := r.flushing && len(r.queue) == 0
						r.mu.Unlock()
						if sent {
							break
						}
						time.Sleep(time.Millisecond)
					}
					time.Sleep(20 * time.Millisecond)
					r.close()
				}()
			}
			queueBatch(t, r, calls, beforeFree)
			for i, err := range errs {
				if err == nil || errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("call %d: %v; want the error of a closed store", i, err)
				}
			}
			r.close()
			stop()
			settled()
		})
	}
}

// silentServer accepts connections, reads and never answers; its URL,
// and stop, which returns when its goroutines have ended.
func silentServer(t *testing.T) (url string, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	var open sync.Map // net.Conn
	stop = func() {
		ln.Close()
		open.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
		conns.Wait()
	}
	t.Cleanup(stop)
	conns.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			open.Store(c, nil)
			go func() {
				defer conns.Done()
				defer c.Close()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	})
	return "redis://" + ln.Addr().String() + "/0", stop
}

// TestRedisHungCallsRunLaterSpendAtMostBurst: takes that timed out while
// Redis hung (their clients already passed, fail open) were sent, so Redis
// runs them once it continues and they spend the key's tokens then. They
// are not cancelled (telling the script each call's deadline would tie it
// to the replicas' clocks, which the script avoids by using Redis's TIME),
// but they cost at most the key's burst: a refused take writes nothing, so
// however many ran late, the key's next take passes within one interval,
// not after one interval per late call. Checked with the real Redis
// stopped by SIGSTOP.
func TestRedisHungCallsRunLaterSpendAtMostBurst(t *testing.T) {
	srv := testkit.StartRedis(t, 0)
	r := newRedisStore(srv.URL, 100*time.Millisecond)
	defer r.close()
	rl := &config.RateLimit{RequestsPerSecond: 10, Burst: 2} // one take per 100 ms
	const late = 12
	hung := srv.Freeze(t)
	for i := range late {
		if _, err := r.take(context.Background(), "k1", rl); err == nil {
			t.Fatalf("take %d answered with Redis stopped", i+1)
		}
	}
	hung.Thaw()
	// The late takes run once Redis continues: the bucket is spent.
	if !testkit.WaitFor(5*time.Second, 10*time.Millisecond, func() bool {
		n, err := r.c.Exists(context.Background(), redisKeyPrefix+"k1").Result()
		return err == nil && n == 1
	}) {
		t.Fatal("the takes sent while Redis was stopped never ran: the bucket is untouched")
	}
	time.Sleep(200 * time.Millisecond) // every late take has run
	wait, err := r.take(context.Background(), "k1", rl)
	if err != nil {
		t.Fatal(err)
	}
	// At most burst spent: the next take passes within one interval of
	// them (12 late takes pushing the bucket each would be 1 s).
	if wait > 100*time.Millisecond {
		t.Fatalf("after %d late takes the key waits %v: they spent more than its burst", late, wait)
	}
	t.Logf("after %d late takes: next take waits %v", late, wait)
}
