package e2e

import (
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
)

// A webhook delivery the receiver refused is retried after a restart: the
// pending deliveries live in the review store, not in the process. The
// first process only ever sees 503s; the second, on the same store,
// delivers review.created for the item, signed.
func TestWebhookRetriedAcrossRestart(t *testing.T) {
	t.Parallel()
	const secret = "whsec-restart-test"
	hook := testkit.NewWebhookReceiver(t, secret)
	hook.Refuse(true)

	up := newUpstream(t, byModel)
	env := baseEnv()
	env["CONTRACTD_WEBHOOK_SECRET"] = secret
	cfg := writeConfig(t, t.TempDir(), renderConfig(cfgOpts{upstream: up.URL()})+
		"\nreview:\n  webhook:\n    url: "+hook.URL+"\n    secret_env: CONTRACTD_WEBHOOK_SECRET\n")
	d := startDaemon(t, cfg, env)
	key := "review.created " + needsReview(t, d, "Cold soup.")
	if !waitFor(10*time.Second, func() bool { return hook.Refused(key) > 0 }) {
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
	if n := hook.Delivered(key); n != 0 {
		t.Fatalf("delivered %d times while refused", n)
	}

	hook.Refuse(false)
	d2 := startDaemon(t, cfg, env)
	if !waitFor(15*time.Second, func() bool { return hook.Delivered(key) > 0 }) {
		t.Fatalf("the restarted process did not deliver %s (refused %d times before)", key, hook.Refused(key))
	}
	time.Sleep(500 * time.Millisecond) // a second delivery of the same event would show now
	if n := hook.Delivered(key); n != 1 {
		t.Errorf("%s delivered %d times, want once", key, n)
	}
	if n := hook.Unsigned(); n != 0 {
		t.Errorf("%d requests without a valid signature or delivery id", n)
	}
	d2.signal(syscall.SIGTERM)
	if code := d2.wait(10 * time.Second); code != 0 {
		t.Fatalf("second process exit %d", code)
	}
}
