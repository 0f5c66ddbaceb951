package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/review"
)

// BenchmarkReviewPath measures what storing a needs_review item costs: the
// same requests with review.store sqlite and none, at concurrency 16
// (SetParallelism(8) on 2 cores), reporting p50/p99 per request. The valid
// path is measured too: it must not touch the store at all.
//
//	go test -run '^$' -bench ReviewPath -count 5 ./proxy/
func BenchmarkReviewPath(b *testing.B) {
	for _, path := range []string{"needs_review", "valid"} {
		for _, store := range []string{"none", "sqlite"} {
			b.Run(path+"/"+store, func(b *testing.B) { benchReview(b, path, store) })
		}
	}
}

func benchReview(b *testing.B, path, store string) {
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
		dir := b.TempDir()
		q := NewReviewQueue(context.Background(), func(ctx context.Context) (review.Store, error) {
			return review.OpenSQLite(ctx, filepath.Join(dir, "reviews.db"))
		}, filepath.Join(dir, "review-spool.jsonl"), nil)
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
	var mu sync.Mutex
	var lat []time.Duration
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			start := time.Now()
			resp, err := client.Post(front.URL+"/v1/chat/completions", "application/json", strings.NewReader(classifyReq))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mine = append(mine, time.Since(start))
			if resp.StatusCode != want {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}
