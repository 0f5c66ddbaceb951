package proxy

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contractd/contractd/internal/panics"
	"github.com/contractd/contractd/review"
)

// Webhook posts review events from the store's outbox: at least once,
// retried with exponential backoff for MaxAge, resumed after a restart
// because the pending deliveries live in the store. It runs apart from
// requests, so a slow receiver never delays a client.
type Webhook struct {
	URL     string
	Secret  []byte
	Client  *http.Client
	Backoff time.Duration // first retry delay, doubled per try up to an hour
	MaxAge  time.Duration // give up on a delivery this old
	Timeout time.Duration // one post's limit (default 10 s)
	Lease   time.Duration // how long a claimed batch is this replica's (default 1 min)
	// Parallel is how many posts of a claimed batch are in flight at once
	// (default 8): one at a time, a receiver that takes 100 ms an answer
	// capped a replica at 10 deliveries a second.
	Parallel int
}

// webhookParallel is Webhook.Parallel's default.
const webhookParallel = 8

// Sign is the X-Contractd-Signature value of body.
func (h *Webhook) Sign(body []byte) string {
	m := hmac.New(sha256.New, h.Secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// post sends d once, until end, and reports whether the receiver took it (2xx) and,
// when not, why: the status, or the transport's error without the URL (it
// may hold a token).
func (h *Webhook) post(ctx context.Context, d review.Delivery, end time.Time) (bool, string) {
	ctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(d.Body))
	if err != nil {
		return false, "request: " + errWithoutURL(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "contractd-webhook")
	req.Header.Set("X-Contractd-Signature", h.Sign(d.Body))
	req.Header.Set("X-Contractd-Delivery", d.ID)
	req.Header.Set("X-Contractd-Event", string(d.Type))
	resp, err := h.Client.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return false, "no answer within " + h.Timeout.String()
		}
		return false, errWithoutURL(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return true, ""
	}
	return false, "status " + strconv.Itoa(resp.StatusCode)
}

// errWithoutURL is err's text without the URL a *url.Error quotes.
func errWithoutURL(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

func (h *Webhook) retryAt(now time.Time, tries int) time.Time {
	d := h.Backoff
	for i := 0; i < tries && d < time.Hour; i++ {
		d *= 2
	}
	return now.Add(min(d, time.Hour))
}

// RunWebhook delivers due webhook events until ctx ends.
func (q *ReviewQueue) RunWebhook(ctx context.Context, h *Webhook) {
	// A redirect is not followed: the body (inputs and outputs of the
	// item) goes to the configured URL only, never to where a receiver
	// points it (another host, or http:// after https://). A 3xx is not 2xx,
	// so the delivery is retried like any other failure.
	c := http.Client{}
	if h.Client != nil {
		c = *h.Client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	h.Client = &c
	if h.Backoff == 0 {
		h.Backoff = time.Second
	}
	if h.MaxAge == 0 {
		h.MaxAge = 24 * time.Hour
	}
	if h.Timeout == 0 {
		h.Timeout = 10 * time.Second
	}
	if h.Lease == 0 {
		h.Lease = time.Minute
	}
	// A panic is logged and counted and the worker starts over after a
	// backoff: deliveries are claimed under a lease, so one claimed and
	// not finished is claimed again when the lease ends, as after a crash.
	// It may then be posted twice, which at-least-once delivery allows
	// (its X-Contractd-Delivery id is the same); none is lost.
	restarting(ctx, PanicWebhook, q.Log, q.panicMetrics(), func(ctx context.Context) {
		t := time.NewTicker(q.Retry)
		defer t.Stop()
		for {
			if st := q.Store(); st != nil {
				q.deliver(ctx, st, h)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

func (q *ReviewQueue) deliver(ctx context.Context, st review.Store, h *Webhook) {
	for ctx.Err() == nil {
		claimed := time.Now()
		ds, err := st.ClaimDeliveries(ctx, claimed, 32, h.Lease)
		if err != nil {
			if ctx.Err() == nil {
				if n, ok := q.outboxWarn.allow(); ok {
					q.Log.Warn("webhook outbox unavailable", "error", err.Error(), "failed_tries", n)
				}
			}
			return
		}
		q.outboxWarn.reset()
		if len(ds) == 0 {
			return
		}
		q.postBatch(ctx, st, h, claimed, ds)
	}
}

// postBatch posts a claimed batch, h.Parallel posts at a time. The
// deliveries of one review go one after another, in claim order, so a
// receiver gets review.created before review.resolved; different reviews go
// in parallel. It returns once every post it started has ended.
func (q *ReviewQueue) postBatch(ctx context.Context, st review.Store, h *Webhook, claimed time.Time, ds []review.Delivery) {
	var chains [][]review.Delivery
	at := map[string]int{}
	for _, d := range ds {
		i, ok := at[d.ReviewID]
		if !ok {
			i = len(chains)
			at[d.ReviewID] = i
			chains = append(chains, nil)
		}
		chains[i] = append(chains[i], d)
	}
	var (
		next, started atomic.Int64
		wg            sync.WaitGroup
		mu            sync.Mutex
		pe            *panics.Error // the first panic of a worker
	)
	// mayStart reports whether a post may start now, and its deadline (its
	// timeout from the clock reading that checked the lease, so a post let
	// start never runs past the lease, however late it gets going). The
	// rest of the batch could be posted after its lease ran out, while
	// another replica has claimed it too: it is left to be claimed again
	// when the lease ends. A receiver that hangs would otherwise have 32
	// deliveries of 10 s each posted twice. The batch's first post goes
	// whatever the lease, so a timeout longer than the lease still delivers.
	mayStart := func() (time.Time, bool) {
		if ctx.Err() != nil {
			return time.Time{}, false
		}
		end := time.Now().Add(h.Timeout)
		return end, started.Add(1) == 1 || end.Sub(claimed) <= h.Lease
	}
	work := func() {
		defer wg.Done()
		defer func() {
			// A panic in this goroutine would end the process: it is
			// raised again in deliver's once the batch's posts ended,
			// where RunWebhook recovers it and restarts the worker.
			if p := recover(); p != nil {
				mu.Lock()
				if pe == nil {
					pe = panics.New(p)
				}
				mu.Unlock()
			}
		}()
		for i := int(next.Add(1)) - 1; i < len(chains); i = int(next.Add(1)) - 1 {
			for _, d := range chains[i] {
				end, ok := mayStart()
				if !ok {
					return
				}
				q.deliverOne(ctx, st, h, d, end)
			}
		}
	}
	n := h.Parallel
	if n <= 0 {
		n = webhookParallel
	}
	n = min(n, len(chains))
	wg.Add(n)
	for range n {
		go work()
	}
	wg.Wait()
	if pe != nil {
		panic(pe)
	}
}

// deliverOne posts d until end (or gives it up when past its age) and records the
// outcome in the store.
func (q *ReviewQueue) deliverOne(ctx context.Context, st review.Store, h *Webhook, d review.Delivery, end time.Time) {
	if time.Since(d.CreatedAt) > h.MaxAge {
		// Past its age already: given up without one more post, so an
		// outbox grown behind a hung receiver drains at the store's speed,
		// not at one post's timeout per row.
		q.Log.Error("webhook delivery given up", "delivery", d.ID, "type", d.Type, "review_id", d.ReviewID, "tries", d.Tries)
		q.finishDelivery(ctx, st, d, DeliveryExpired, true, time.Now())
		return
	}
	ok, why := h.post(ctx, d, end)
	now := time.Now()
	if !ok && ctx.Err() == nil {
		// A receiver that fails or hangs was counted and never logged:
		// nothing said so until a delivery was given up a day later. The
		// first failure is logged, then one line a minute while they go on.
		if n, log := q.hookWarn.allow(); log {
			q.Log.Warn("webhook delivery failed; retried with backoff", "error", why, "type", d.Type,
				"review_id", d.ReviewID, "tries", d.Tries+1, "failed_posts", n)
		}
	}
	switch {
	case ok:
		if n := q.hookWarn.reset(); n > 0 {
			q.Log.Info("webhook receiver took a delivery again", "failed_posts", n)
		}
		q.finishDelivery(ctx, st, d, DeliverySuccess, true, now)
	case now.Sub(d.CreatedAt) > h.MaxAge:
		q.Log.Error("webhook delivery given up", "delivery", d.ID, "type", d.Type, "review_id", d.ReviewID, "tries", d.Tries+1)
		q.finishDelivery(ctx, st, d, DeliveryExpired, true, now)
	default:
		q.finishDelivery(ctx, st, d, DeliveryFailure, false, h.retryAt(now, d.Tries))
	}
}

// finishDelivery records d's outcome in the outbox (deleted when done, else
// due again at at), then counts it, whether or not the store took it: a
// count seen means its store call has returned. Counted first, whoever saw
// the count and then stopped the worker (shutdown cancels the store call)
// could find the delivery still in the outbox.
func (q *ReviewQueue) finishDelivery(ctx context.Context, st review.Store, d review.Delivery, result DeliveryResult, done bool, at time.Time) {
	err := st.FinishDelivery(ctx, d.ID, done, at)
	q.Metrics.Delivery(result)
	if err != nil && ctx.Err() == nil {
		q.Log.Warn("webhook outbox update failed", "delivery", d.ID, "error", err.Error())
	}
}
