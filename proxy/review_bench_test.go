package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/review"
)

// BenchmarkReviewPath measures what storing a needs_review item costs: the
// same requests with review.store sqlite, postgres and none, at concurrency 16
// (SetParallelism(8) on 2 cores), reporting p50/p99 per request. The valid
// path is measured too: it must not touch the store at all. Every request
// body is distinct, so review.dedupe_window (on, as by default) answers
// none of them from memory.
//
//	go test -run '^$' -bench ReviewPath -count 5 ./proxy/
func BenchmarkReviewPath(b *testing.B) {
	for _, path := range []string{"needs_review", "valid"} {
		for _, store := range reviewBenchStores {
			b.Run(path+"/"+store, func(b *testing.B) { benchReview(b, path, store, 0) })
		}
	}
}

// BenchmarkReviewPathPaced is the same comparison as an open loop: 16
// clients together offer pacedRate requests per second, well under what
// the machine can serve, and latency counts from the moment each request
// was due (no coordinated omission). A closed loop at saturation turns any
// CPU the store spends into queueing for every request; this measures what
// one needs_review answer waits for its item to be stored.
//
//	go test -run '^$' -bench ReviewPathPaced -benchtime 2000x ./proxy/
func BenchmarkReviewPathPaced(b *testing.B) {
	for _, path := range []string{"needs_review", "valid"} {
		for _, store := range reviewBenchStores {
			b.Run(path+"/"+store, func(b *testing.B) { benchReview(b, path, store, pacedRate) })
		}
	}
}

// reviewBenchStores: postgres-nosync is the same server with
// synchronous_commit off for the benchmark's connections, so a commit does
// not wait for the WAL to reach the disk: the difference to postgres is the
// disk's flush, the rest is what contractd and PostgreSQL's CPU cost.
var reviewBenchStores = []string{"none", "sqlite", "postgres", "postgres-nosync"}

// pacedRate is a quarter of the needs_review path's closed-loop throughput
// on the 2-core reference machine.
const pacedRate = 400

// warmupPerClient: requests each of the 16 clients sends before timing.
const warmupPerClient = 25

// sqliteQueue is a review queue on a fresh SQLite store with its spool
// beside it in a temporary directory, as review.store sqlite lays them
// out; the caller closes it (before the directory goes, which Cleanup
// does after the test).
func sqliteQueue(tb testing.TB) *ReviewQueue {
	dir := tb.TempDir()
	return NewReviewQueue(context.Background(), func(ctx context.Context) (review.Store, error) {
		return review.OpenSQLite(ctx, filepath.Join(dir, "reviews.db"))
	}, filepath.Join(dir, "review-spool.jsonl"), nil)
}

func benchReview(b *testing.B, path, store string, rate int) {
	content := validClassify
	if path == "needs_review" {
		content = invalidClassify
	}
	up := testkit.NewUpstream(b, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		reply(w, 200, completion(content, "stop", 10, 5))
	})
	up.SetQuiet(true)
	defer up.Close()
	rt := loadRuntime(b, up.URL(), cfg{})
	caller := NewCaller(testKeys)
	srv := NewServer(rt, caller, audit.NewWriter(io.Discard), nil)
	if store == "sqlite" {
		q := sqliteQueue(b)
		defer q.Close()
		srv.Reviews = q
	}
	if strings.HasPrefix(store, "postgres") {
		// A fresh schema on the test server (scripts/postgres.sh: local,
		// fsync on, default synchronous_commit), sharing the 2 cores.
		dsn := testkit.PostgresDSN(b)
		if store == "postgres-nosync" {
			dsn = withPGParam(dsn, "synchronous_commit", "off")
		}
		q := NewReviewQueue(context.Background(), func(ctx context.Context) (review.Store, error) {
			return review.OpenPostgres(ctx, dsn, review.PostgresOptions{})
		}, filepath.Join(b.TempDir(), "review-spool.jsonl"), nil)
		if q.Store() == nil {
			b.Fatal("postgres store did not open")
		}
		defer q.Close()
		srv.Reviews = q
	}
	front := httptest.NewServer(srv.Handler(nil))
	defer front.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	want := 200
	if path == "needs_review" {
		want = 422
	}
	var lat testkit.Latencies
	const clients = 16
	var seq atomic.Int64
	post := func() (int, error) {
		// Distinct bodies: with review.dedupe_window on (the default)
		// a repeated body would be answered from memory, not stored.
		body := classifyReq[:len(classifyReq)-1] + `,"user":"bench-` + strconv.FormatInt(seq.Add(1), 10) + `"}`
		resp, err := client.Post(front.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Warm-up, untimed and alike for every store: the clients'
	// connections, the store's pool (a PostgreSQL connection is a new
	// server process, and its statements are prepared on first use) and
	// the caches, so the timed part is the steady state and a cold
	// start's first requests are not most of the p99.
	var warm sync.WaitGroup
	for range clients {
		warm.Go(func() {
			for range warmupPerClient {
				if st, err := post(); err != nil || st != want {
					b.Errorf("warm-up: status %d, %v", st, err)
					return
				}
			}
		})
	}
	warm.Wait()
	// Paced: request i of the run is due at begin + i/rate, taken in order
	// by whichever client is free (a shared ticket counter).
	var ticket atomic.Int64
	interval := time.Duration(0)
	if rate > 0 {
		interval = time.Second / time.Duration(rate)
	}
	b.SetParallelism(clients / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	begin := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			start := time.Now()
			if interval > 0 {
				start = begin.Add(time.Duration(ticket.Add(1)-1) * interval)
				time.Sleep(time.Until(start))
			}
			st, err := post()
			if err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(start))
			if st != want {
				b.Errorf("status %d", st)
				return
			}
		}
		lat.Add(mine...)
	})
	b.StopTimer()
	lat.Report(b)
}

// withPGParam adds a run-time parameter to a URL or keyword/value DSN (pgx
// sends parameters it does not know to the server at connect).
func withPGParam(dsn, name, value string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set(name, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + name + "=" + value
}
