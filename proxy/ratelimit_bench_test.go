package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
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

// BenchmarkRateLimitAllow is the limiter step alone, sequential.
func BenchmarkRateLimitAllow(b *testing.B) {
	for _, store := range []string{"memory", "redis"} {
		b.Run(store, func(b *testing.B) {
			url := testkit.RedisURL(b)
			l := &rateLimiter{}
			l.configure(&config.RateLimit{RequestsPerSecond: 1e9, Burst: 1 << 30, Store: store, RedisURLEnv: "X"}, func(string) string { return url })
			defer l.close()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if e := l.allow(context.Background(), "bench"); e != nil {
					b.Fatal(e)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			reportLatency(b, lat)
		})
	}
}

func benchRateLimit(b *testing.B, store string, clients int) {
	up := testkit.NewUpstream(b, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		reply(w, 200, completion(validClassify, "stop", 10, 5))
	})
	up.SetQuiet(true)
	defer up.Close()
	rt := loadRuntime(b, up.URL(), cfg{})
	if store != "off" {
		rl := &config.RateLimit{RequestsPerSecond: 1e9, Burst: 1 << 30, Store: store}
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
	defer srv.Close()
	front := httptest.NewServer(srv.Handler(nil))
	defer front.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	post := func() time.Duration {
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
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	work := make(chan struct{}, b.N)
	for i := 0; i < b.N; i++ {
		work <- struct{}{}
	}
	close(work)
	var wg sync.WaitGroup
	b.ResetTimer()
	for g := 0; g < clients; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for range work {
				mine = append(mine, post())
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.StopTimer()
	reportLatency(b, lat)
}

func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e6, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e6, "p99-ms")
	}
}
