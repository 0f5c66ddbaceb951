package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// BenchmarkRateLimitPath measures what the Redis store adds to a request
// over the memory store (and over no limit): whole requests through the
// handler to a fake upstream on a contract route, with a limit high enough
// never to refuse, at concurrency 1 and 16, reporting p50/p99 per request.
// Redis is the throwaway local server (scripts/redis.sh), on the same
// 2 cores. make bench-ratelimit interleaves rounds (docs/benchmarks.md).
//
//	go test -run '^$' -bench RateLimitPath -benchtime 3000x ./proxy/
func BenchmarkRateLimitPath(b *testing.B) {
	for _, c := range []int{1, 16} {
		for _, store := range []string{"off", "memory", "redis"} {
			b.Run(store+"/c="+strconv.Itoa(c), func(b *testing.B) { benchRateLimit(b, store, c) })
		}
	}
}

// BenchmarkRateLimitAllow is the limiter step alone: one caller in a loop
// (c=1), or 16 callers each with its own client key (c=16, the calls of
// concurrent requests).
func BenchmarkRateLimitAllow(b *testing.B) {
	for _, c := range []int{1, 16} {
		for _, store := range []string{"memory", "redis"} {
			b.Run(store+"/c="+strconv.Itoa(c), func(b *testing.B) { benchAllow(b, store, c) })
		}
	}
}

func benchAllow(b *testing.B, store string, clients int) {
	url := testkit.RedisURL(b)
	l := &rateLimiter{}
	l.configure(&config.RateLimit{RequestsPerSecond: 1e9, Burst: 1 << 30, Store: config.RateLimitStore(store), RedisURLEnv: "X"}, func(string) string { return url })
	defer l.close()
	keys := make([]string, clients)
	for g := range keys { // dial and load the script before the clock
		keys[g] = "bench" + strconv.Itoa(g)
		if e := l.allow(context.Background(), keys[g]); e != nil {
			b.Fatal(e)
		}
	}
	closedLoop(b, url, clients, func(g int) (time.Duration, error) {
		t0 := time.Now()
		if e := l.allow(context.Background(), keys[g]); e != nil {
			return 0, e
		}
		return time.Since(t0), nil
	})
}

// closedLoop shares b.N calls of op among workers goroutines, op(g) being
// worker g's next call and returning its latency; a worker stops at its
// first error. It reports the latencies' p50 and p99 and the CPU per op
// (this process's and redis-server's at url) over the loop.
func closedLoop(b *testing.B, url string, workers int, op func(g int) (time.Duration, error)) {
	work := make(chan struct{}, b.N)
	for i := 0; i < b.N; i++ {
		work <- struct{}{}
	}
	close(work)
	var wg sync.WaitGroup
	var lat testkit.Latencies
	cpu := startCPU(b, url)
	b.ResetTimer()
	for g := 0; g < workers; g++ {
		wg.Go(func() {
			mine := make([]time.Duration, 0, b.N/workers+1)
			for range work {
				d, err := op(g)
				if err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, d)
			}
			lat.Add(mine...)
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu.report(b)
	lat.Report(b)
}

// BenchmarkRedisRoundTrip is the floor under the Redis store's step, one
// call at a time on loopback: a bare socket writing PING and reading PONG,
// go-redis's PING with the store's options, and the store's take (one
// EVALSHA of the GCRA script).
func BenchmarkRedisRoundTrip(b *testing.B) {
	url := testkit.RedisURL(b)
	b.Run("socket-ping", func(b *testing.B) {
		opt, err := redis.ParseURL(url)
		if err != nil {
			b.Fatal(err)
		}
		conn, err := net.Dial("tcp", opt.Addr)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		rd := bufio.NewReader(conn)
		ping := []byte("*1\r\n$4\r\nPING\r\n")
		var lat testkit.Latencies
		cpu := startCPU(b, url)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			if _, err := conn.Write(ping); err != nil {
				b.Fatal(err)
			}
			if line, err := rd.ReadString('\n'); err != nil || line != "+PONG\r\n" {
				b.Fatal(line, err)
			}
			lat.Add(time.Since(t0))
		}
		b.StopTimer()
		cpu.report(b)
		lat.Report(b)
	})
	store := newRedisStore(url, config.DefaultRateLimitTimeout)
	defer store.close()
	rl := &config.RateLimit{RequestsPerSecond: 1e9, Burst: 1 << 30}
	for _, v := range []struct {
		name string
		call func() error
	}{
		{"goredis-ping", func() error { return store.c.Ping(context.Background()).Err() }},
		{"store-take", func() error { _, err := store.take(context.Background(), "bench", rl); return err }},
	} {
		b.Run(v.name, func(b *testing.B) {
			if err := v.call(); err != nil {
				b.Fatal(err)
			}
			var lat testkit.Latencies
			cpu := startCPU(b, url)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if err := v.call(); err != nil {
					b.Fatal(err)
				}
				lat.Add(time.Since(t0))
			}
			b.StopTimer()
			cpu.report(b)
			lat.Report(b)
		})
	}
}

// BenchmarkRateLimitPaced is BenchmarkRateLimitPath/c=16 open loop: 16
// senders together offer limitPacedRate requests per second on a fixed
// schedule, below what the machine can serve, and each latency runs from
// the request's scheduled time (a late send counts). Closed loop at c=16
// saturates the 2 cores, and its p50 then measures the queue for CPU more
// than the step; paced, it is the cost one request sees under load.
func BenchmarkRateLimitPaced(b *testing.B) {
	for _, store := range []string{"memory", "redis"} {
		b.Run(store+"/c=16", func(b *testing.B) {
			post, url := rateLimitFront(b, store)
			const senders = 16
			every := time.Duration(float64(time.Second) * senders / limitPacedRate)
			var wg sync.WaitGroup
			var lat testkit.Latencies
			cpu := startCPU(b, url)
			b.ResetTimer()
			begin := time.Now()
			for g := 0; g < senders; g++ {
				wg.Go(func() {
					mine := make([]time.Duration, 0, b.N/senders+1)
					// Sender g sends requests g, g+16, ...; request i is due at
					// begin + i/limitPacedRate.
					for i := g; i < b.N; i += senders {
						due := begin.Add(time.Duration(i/senders)*every + time.Duration(g)*every/senders)
						time.Sleep(time.Until(due))
						post()
						mine = append(mine, time.Since(due))
					}
					lat.Add(mine...)
				})
			}
			wg.Wait()
			b.StopTimer()
			cpu.report(b)
			lat.Report(b)
		})
	}
}

// limitPacedRate is BenchmarkRateLimitPaced's offered load (requests/s):
// a fifth of what closed loop serves on the 2 cores with the Redis store,
// so that other work on the machine does not push it to saturation.
const limitPacedRate = 400

func benchRateLimit(b *testing.B, store string, clients int) {
	post, url := rateLimitFront(b, store)
	closedLoop(b, url, clients, func(int) (time.Duration, error) { return post(), nil })
}

// rateLimitFront is a contract route in front of a fake upstream with the
// limit on store ("off", "memory", "redis"), warmed; post sends one
// request and returns its latency.
func rateLimitFront(b *testing.B, store string) (post func() time.Duration, redisURL string) {
	up := testkit.NewUpstream(b, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		reply(w, 200, completion(validClassify, "stop", 10, 5))
	})
	up.SetQuiet(true)
	b.Cleanup(up.Close)
	rt := loadRuntime(b, up.URL(), cfg{})
	if store != "off" {
		rl := &config.RateLimit{RequestsPerSecond: 1e9, Burst: 1 << 30, Store: config.RateLimitStore(store)}
		if store == "redis" {
			rl.RedisURLEnv = "BENCH_REDIS_URL"
		}
		rt.Server.RateLimit = rl
	}
	srv := NewServer(rt, NewCaller(testKeys), audit.NewWriter(io.Discard), nil)
	url := testkit.RedisURL(b)
	srv.Env = func(k string) string {
		if k == "BENCH_REDIS_URL" {
			return url
		}
		return ""
	}
	srv.Swap(rt)
	b.Cleanup(srv.Close)
	front := httptest.NewServer(srv.Handler(nil))
	b.Cleanup(front.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(client.CloseIdleConnections)
	post = func() time.Duration {
		t0 := time.Now()
		resp, err := client.Post(front.URL+"/v1/chat/completions", "application/json", strings.NewReader(classifyReq))
		if err != nil {
			b.Error(err)
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Errorf("status %d", resp.StatusCode)
		}
		return time.Since(t0)
	}
	for i := 0; i < 50; i++ { // warm connections (HTTP and Redis) and the script cache
		post()
	}
	return post, url
}

// cpuMeter is the CPU spent over a timed loop by this process (getrusage:
// clients, contractd and fake upstream together) and by redis-server (its
// INFO cpu), reported per operation: what the store costs beyond latency.
type cpuMeter struct {
	rc          *redis.Client
	self, redis time.Duration
}

func startCPU(b *testing.B, url string) *cpuMeter {
	opt, err := redis.ParseURL(url)
	if err != nil {
		b.Fatal(err)
	}
	m := &cpuMeter{rc: redis.NewClient(opt)}
	b.Cleanup(func() { _ = m.rc.Close() })
	m.self, m.redis = testkit.ProcessCPU(), m.redisCPU(b)
	return m
}

func (m *cpuMeter) report(b *testing.B) {
	self, red := testkit.ProcessCPU()-m.self, m.redisCPU(b)-m.redis
	b.ReportMetric(float64(self.Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(red.Nanoseconds())/1e3/float64(b.N), "redis-cpu-µs/op")
}

// redisCPU is redis-server's used_cpu_user + used_cpu_sys.
func (m *cpuMeter) redisCPU(b *testing.B) time.Duration {
	info, err := m.rc.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum time.Duration
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			sec, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(line, err)
			}
			sum += time.Duration(sec * float64(time.Second))
		}
	}
	return sum
}
