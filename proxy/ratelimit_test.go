package proxy

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/contractd/contractd/config"
)

func TestRateLimiter(t *testing.T) {
	var l rateLimiter
	// Clients are authenticated key indexes; -1 is "auth off" (shared).
	req := func(key string) int { return map[string]int{"a": 0, "b": 1}[key] }
	if l.allow(req("a")) != nil {
		t.Fatal("no config: everything allowed")
	}
	l.configure(&config.RateLimit{RequestsPerSecond: 0.5, Burst: 2})
	for i := 0; i < 2; i++ {
		if e := l.allow(req("a")); e != nil {
			t.Fatalf("burst request %d refused: %v", i, e)
		}
	}
	e := l.allow(req("a"))
	if e == nil || e.Status != 429 || e.Code != CodeRateLimitExceeded || e.RetryAfter < 1 {
		t.Fatalf("over the burst: %+v", e)
	}
	if l.allow(req("b")) != nil {
		t.Error("keys have separate buckets")
	}
	w := httptest.NewRecorder()
	writeError(w, e)
	if w.Code != 429 || w.Header().Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After: %d %v", w.Code, w.Header())
	}
	l.configure(&config.RateLimit{RequestsPerSecond: 0.5, Burst: 2})
	if l.allow(req("a")) != nil {
		t.Error("a reload resets the buckets")
	}
	l.configure(&config.RateLimit{RequestsPerSecond: 0.5, Burst: 1})
	if l.allow(-1) != nil || l.allow(-1) == nil {
		t.Error("without auth all clients share one bucket")
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
