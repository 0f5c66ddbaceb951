package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A webhook delivery the receiver refused is retried after a restart: the
// pending deliveries live in the review store, not in the process. The
// first process only ever sees 503s; the second, on the same store,
// delivers review.created for the item, signed.
func TestWebhookRetriedAcrossRestart(t *testing.T) {
	t.Parallel()
	const secret = "whsec-restart-test"
	var accept atomic.Bool
	var mu sync.Mutex
	refused, delivered := map[string]int{}, map[string]int{}
	var badSig atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m := hmac.New(sha256.New, []byte(secret))
		m.Write(body)
		if r.Header.Get("X-Contractd-Signature") != "sha256="+hex.EncodeToString(m.Sum(nil)) || r.Header.Get("X-Contractd-Delivery") == "" {
			badSig.Add(1)
		}
		key := deliveryKey(body)
		mu.Lock()
		defer mu.Unlock()
		if !accept.Load() {
			refused[key]++
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		delivered[key]++
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	count := func(m map[string]int, key string) int {
		mu.Lock()
		defer mu.Unlock()
		return m[key]
	}

	up := newUpstream(t, byModel)
	env := baseEnv()
	env["CONTRACTD_WEBHOOK_SECRET"] = secret
	cfg := writeConfig(t, t.TempDir(), renderConfig(cfgOpts{upstream: up.URL()})+
		"\nreview:\n  webhook:\n    url: "+hook.URL+"\n    secret_env: CONTRACTD_WEBHOOK_SECRET\n")
	d := startDaemon(t, cfg, env)
	key := "review.created " + needsReview(t, d, "Cold soup.")
	if !waitFor(10*time.Second, func() bool { return count(refused, key) > 0 }) {
		t.Fatal("the first process never tried the webhook")
	}
	// Stop between tries (the next is a second later), once the refusal
	// is recorded: a delivery claimed at the moment of exit stays leased
	// to that process for a minute, which is the lease working, not the
	// restart this test is about.
	time.Sleep(300 * time.Millisecond)
	d.signal(syscall.SIGTERM)
	if code := d.wait(10 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if n := count(delivered, key); n != 0 {
		t.Fatalf("delivered %d times while refused", n)
	}

	accept.Store(true)
	d2 := startDaemon(t, cfg, env)
	if !waitFor(15*time.Second, func() bool { return count(delivered, key) > 0 }) {
		t.Fatalf("the restarted process did not deliver %s (refused %d times before)", key, count(refused, key))
	}
	time.Sleep(500 * time.Millisecond) // a second delivery of the same event would show now
	if n := count(delivered, key); n != 1 {
		t.Errorf("%s delivered %d times, want once", key, n)
	}
	if n := badSig.Load(); n != 0 {
		t.Errorf("%d requests without a valid signature or delivery id", n)
	}
	d2.signal(syscall.SIGTERM)
	if code := d2.wait(10 * time.Second); code != 0 {
		t.Fatalf("second process exit %d", code)
	}
}

// deliveryKey names a webhook delivery by what it reports, "<type> <review
// id>" ("review.created req_…"), so a receiver can count each event once
// however often it was retried.
func deliveryKey(body []byte) string {
	var ev struct {
		Type   string `json:"type"`
		Review struct {
			ID string `json:"id"`
		} `json:"review"`
	}
	_ = json.Unmarshal(body, &ev)
	return ev.Type + " " + ev.Review.ID
}
