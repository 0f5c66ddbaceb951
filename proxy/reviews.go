package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/contractd/contractd/internal/panics"
	"github.com/contractd/contractd/review"
)

// ReviewMetrics counts the review queue's events. Implementations must be
// safe for concurrent use.
type ReviewMetrics interface {
	StoreError()
	ItemLost() // neither the store nor the spool took an item (stored: false)
	Resolved(route string, status review.Status, by review.ResolvedBy)
	Delivery(result DeliveryResult)
}

// DeliveryResult is how one webhook delivery attempt ended.
type DeliveryResult string

// Webhook delivery results.
const (
	DeliverySuccess DeliveryResult = "success"
	DeliveryExpired DeliveryResult = "expired" // given up: past the retry window
	DeliveryFailure DeliveryResult = "failure" // retried later
)

type nopReviewMetrics struct{}

func (nopReviewMetrics) StoreError()                                       {}
func (nopReviewMetrics) ItemLost()                                         {}
func (nopReviewMetrics) Resolved(string, review.Status, review.ResolvedBy) {}
func (nopReviewMetrics) Delivery(DeliveryResult)                           {}

// ReviewQueue stores needs_review items. The store may be unavailable at
// start or fail later: items then go to the fsynced spool and Run moves
// them in once the store answers again, so serving never depends on it.
type ReviewQueue struct {
	Spool    *review.Spool
	Notifier review.Notifier
	Webhook  bool // enqueue webhook deliveries with each change
	Metrics  ReviewMetrics
	Log      *slog.Logger
	// Panics counts the panics Run, RunWebhook and the store's writer
	// recover (nil: not counted).
	Panics PanicMetrics
	// Retention: resolved items older than this are deleted by Run.
	Retention time.Duration
	// Retry is how often Run retries opening the store and draining the
	// spool.
	Retry time.Duration
	// OutboxPurgeAfter: webhook deliveries older than this are deleted by
	// Run, hourly, whether a webhook is configured or not (0:
	// DefaultOutboxPurgeAfter).
	OutboxPurgeAfter time.Duration

	open  func(context.Context) (review.Store, error)
	store atomic.Pointer[review.Store]

	// started is closed when Run's first pass has tried to open the store
	// and, if it opened, to move the spool in (WaitStarted).
	started     chan struct{}
	startedOnce sync.Once

	lookupWarned atomic.Int64 // unix ns of the last dedupe sync warning
	openWarn     warnEvery    // the store failing to open
	outboxWarn   warnEvery    // the webhook outbox failing to be read
	drainWarn    warnEvery    // the spool failing to move into the store
	hookWarn     warnEvery    // webhook posts failing (the receiver down, hung or refusing)
	storeWarn    warnEvery    // an item the store could not take (spooled)
	spoolWarn    warnEvery    // an item the spool could not take either (lost)
	readWarn     warnEvery    // a client's review poll failing to read the store

	// The store's breaker: after storeBreakAfter writes in a row failed
	// or timed out, save spools at once without asking the store (each
	// 422 of a hung PostgreSQL waited writeTimeout, 5 s, for as long as
	// the hang lasted), until Run's drain of the spool, the one probe,
	// moves the spool in.
	storeFails atomic.Int64 // store writes failed in a row
	bypass     atomic.Bool  // the breaker is open
	// writeTimeout bounds a 422's store write (0: storeWriteTimeout).
	writeTimeout time.Duration
}

// storeBreakAfter is how many store writes in a row must fail (or time
// out) before new items go straight to the spool.
const storeBreakAfter = 3

// storeWriteTimeout is a 422's own deadline for its store write.
const storeWriteTimeout = 5 * time.Second

// warnEvery lets one line of a warning that repeats (Run retries every
// second) through per minute and counts the others: a store down for an
// hour logged 3,600 identical lines.
type warnEvery struct {
	last  atomic.Int64 // unix ns of the last line let through
	n     atomic.Int64 // occurrences since then, that one included
	total atomic.Int64 // occurrences since the last reset
}

const warnInterval = time.Minute

// allow counts one occurrence and reports whether to log it, with the
// occurrences since the last line logged.
func (w *warnEvery) allow() (int64, bool) {
	w.total.Add(1)
	n := w.n.Add(1)
	now, last := time.Now().UnixNano(), w.last.Load()
	if last != 0 && now-last < int64(warnInterval) || !w.last.CompareAndSwap(last, now) {
		return n, false
	}
	w.n.Add(-n)
	return n, true
}

// reset starts over (the failure ended), so the next one is logged at
// once, and returns how many occurred since the last reset.
func (w *warnEvery) reset() int64 {
	if w.total.Load() == 0 {
		return 0 // the common case: nothing failed, nothing to write
	}
	w.last.Store(0)
	w.n.Store(0)
	return w.total.Swap(0)
}

// spoolWritable reports whether the spool file can be appended to, or
// created in its directory: when it cannot (a directory of another user, a
// read-only file system), items the store cannot take are lost.
func spoolWritable(path string) bool {
	err := unix.Access(path, unix.W_OK)
	if err == nil {
		return true
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	return unix.Access(filepath.Dir(path), unix.W_OK|unix.X_OK) == nil
}

// NewReviewQueue returns a queue whose store comes from open; call Run to
// (re)open it and drain the spool. It tries to open the store once now.
func NewReviewQueue(ctx context.Context, open func(context.Context) (review.Store, error), spoolPath string, log *slog.Logger) *ReviewQueue {
	q := NewReviewQueueOpenedByRun(open, spoolPath, log)
	q.tryOpen(ctx)
	return q
}

// NewReviewQueueOpenedByRun returns a queue whose store only Run opens (at
// once, then every Retry while it fails). Until it has, the queue behaves
// as with a store that is down: items are spooled, lookups read the spool,
// the reviewer API answers 503 review_store_unavailable. serve uses it so
// that it listens (and answers its health checks) while a migration runs:
// opening the store first kept a migration longer than a startup probe from
// ever finishing, the probe killing the pod mid-migration again and again.
func NewReviewQueueOpenedByRun(open func(context.Context) (review.Store, error), spoolPath string, log *slog.Logger) *ReviewQueue {
	q := &ReviewQueue{Spool: &review.Spool{Path: spoolPath}, Notifier: review.NewHub(), Metrics: nopReviewMetrics{},
		Log: log, Retry: time.Second, open: open, started: make(chan struct{})}
	if q.Log == nil {
		q.Log = slog.New(slog.DiscardHandler)
	}
	return q
}

// WaitStarted waits, at most wait (or until ctx ends), for Run's first
// pass: the store's first open (its migrations included) and, when it
// opened, the spool's move into it. It reports whether that pass ended;
// Store says whether the store opened. serve waits so before it listens: a
// usual start answers its first requests with the store open, as when
// serve opened it first, while a long migration (or a lock another process
// holds) goes on in the background once wait has passed.
func (q *ReviewQueue) WaitStarted(ctx context.Context, wait time.Duration) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-q.started:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// errStoreNotOpen is a lookup's answer for an id not in the spool while
// the store is not open (still opening at start, or it cannot be opened):
// the item may well be in the store, so it is not ErrNotFound (404 told a
// client polling an item stored before a restart that it did not exist).
var errStoreNotOpen = errors.New("review store not open")

// Store is the open store, or nil while it cannot be opened.
func (q *ReviewQueue) Store() review.Store {
	if p := q.store.Load(); p != nil {
		return *p
	}
	return nil
}

func (q *ReviewQueue) tryOpen(ctx context.Context) review.Store {
	if st := q.Store(); st != nil {
		return st
	}
	start := time.Now()
	st, err := q.open(ctx)
	if err != nil {
		if ctx.Err() != nil {
			// serve is stopping (after a drain, or a start that could not
			// listen): the open was cut short, the store is not down.
			return nil
		}
		if n, ok := q.openWarn.allow(); ok {
			if spoolWritable(q.Spool.Path) {
				q.Log.Error("review store unavailable; items are spooled", "error", err.Error(), "spool", q.Spool.Path, "failed_tries", n)
			} else {
				q.Log.Error("review store unavailable and the spool cannot be written; needs_review items are lost (stored: false)",
					"error", err.Error(), "spool", q.Spool.Path, "failed_tries", n)
			}
		}
		return nil
	}
	q.store.Store(&st)
	// Opening includes the migrations, which may take minutes: the
	// operator sees when the reviewer API and the store's writes started.
	args := []any{"duration_ms", time.Since(start).Milliseconds()}
	if n := q.openWarn.reset(); n > 0 {
		args = append(args, "failed_tries", n)
	}
	q.Log.Info("review store open", args...)
	return st
}

// Close moves what the spool still holds into the store, if the store
// takes it now, and closes the store. Items left in the spool stay
// durable in its file, but only a contractd started later with that file
// moves them in (on Kubernetes the spool's emptyDir goes with the pod), so
// they are logged as an error with the spool's path.
func (q *ReviewQueue) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeDrainTimeout)
	defer cancel()
	st := q.Store()
	if q.Spool.Pending() {
		if st == nil {
			st = q.tryOpen(ctx)
		}
		if st != nil {
			if n, err := q.Spool.Drain(ctx, st, q.Webhook, nil); err != nil {
				q.Log.Warn("review spool drain at shutdown failed", "error", err.Error())
			} else if n > 0 {
				q.Log.Info("review spool drained into the store", "items", n)
			}
		}
		if q.Spool.Pending() {
			q.Log.Error("review items remain in the spool at shutdown; a contractd started with this spool file moves them into the store", "spool", q.Spool.Path)
		}
	}
	if st != nil {
		return st.Close()
	}
	return nil
}

// closeDrainTimeout bounds Close's last drain of the spool, which runs
// after the server stopped taking requests: within a Kubernetes grace
// period's remainder or systemd's TimeoutStopSec.
const closeDrainTimeout = 5 * time.Second

// save stores it durably before the client hears of it: in the store, or
// failing that in the spool. It reports whether the item is durable. While
// the breaker is open (the store's last storeBreakAfter writes failed) the
// item goes to the spool without asking the store, and to the store only
// if the spool cannot take it.
func (q *ReviewQueue) save(ctx context.Context, it *review.Item) bool {
	st := q.Store()
	if st != nil && !q.bypass.Load() {
		if q.create(ctx, st, it) {
			return true
		}
		st = nil // asked and failed: not asked again below
	}
	q.Metrics.StoreError()
	err := q.Spool.Append(it)
	if err == nil {
		return true
	}
	// The breaker skipped the store, and the spool failed (a full disk, a
	// spool that cannot be written): the store is the item's last chance.
	if st != nil && q.create(ctx, st, it) {
		return true
	}
	q.Metrics.ItemLost()
	if n, ok := q.spoolWarn.allow(); ok {
		q.Log.Error("review spool write failed; item lost", "review_id", it.ID, "error", err.Error(), "failed_writes", n)
	}
	return false
}

// create is save's store write, with its own deadline. A failure is logged
// (rate limited) and counts towards the breaker; a success closes it.
func (q *ReviewQueue) create(ctx context.Context, st review.Store, it *review.Item) bool {
	// The client's deadline must not cut a write short after the upstream
	// calls used it up: give the store its own short one.
	to := q.writeTimeout
	if to <= 0 {
		to = storeWriteTimeout
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), to)
	_, err := st.Create(wctx, it, q.Webhook)
	cancel()
	if err == nil {
		q.storeFails.Store(0)
		q.closeBreaker("write")
		return true
	}
	// The store's writer recovers a panic in its commit and fails the
	// items it held with it: spooled like any failed write, so none is
	// lost (the commit's transaction was rolled back, and an item it did
	// store is not stored twice: creating an id again is a no-op). A bug,
	// not an outage: it does not count towards the breaker.
	if pe := (*panics.Error)(nil); errors.As(err, &pe) {
		q.panicMetrics().Panic(PanicReviewWriter)
		logPanic(q.Log, "panic in the review store's writer; spooling", pe, "review_id", it.ID)
		return false
	}
	if n, ok := q.storeWarn.allow(); ok {
		q.Log.Error("review store write failed; spooling", "review_id", it.ID, "error", err.Error(), "failed_writes", n)
	}
	if n := q.storeFails.Add(1); n >= storeBreakAfter && q.bypass.CompareAndSwap(false, true) {
		q.Log.Error("review store failing; needs_review items are spooled without waiting for it until the spool moves in",
			"failed_writes", n, "error", err.Error())
	}
	return false
}

// closeBreaker lets save ask the store again, logging it when the breaker
// was open (by: what succeeded, "write" or "drain").
func (q *ReviewQueue) closeBreaker(by string) {
	if !q.bypass.Load() {
		return
	}
	q.storeFails.Store(0)
	if q.bypass.CompareAndSwap(true, false) {
		q.Log.Info("review store takes items again; needs_review items are stored, not spooled", "by", by)
	}
}

// warnLookup logs a failed dedupe sync at most once a minute: while the
// store is down every read would log one.
func (q *ReviewQueue) warnLookup(err error) {
	now := time.Now().UnixNano()
	last := q.lookupWarned.Load()
	if now-last < int64(time.Minute) || !q.lookupWarned.CompareAndSwap(last, now) {
		return
	}
	q.Log.Warn("review store dedupe sync failed; identical requests on other replicas run again until it recovers", "error", err.Error())
}

// get finds an item in the store, or in the spool while it waits there.
func (q *ReviewQueue) get(ctx context.Context, id string) (*review.Item, error) {
	// The spool is a file read whole per lookup, and large exactly while
	// the breaker is open: it is read at most once here (an item is spooled
	// before its id reaches the client, so a miss cannot turn into a hit).
	spoolRead := false
	fromSpool := func() (*review.Item, bool) {
		if spoolRead {
			return nil, false
		}
		spoolRead = true
		return q.Spool.Get(id)
	}
	// While the breaker is open the store's writes are failing (down or
	// hung), and the items made meanwhile are in the spool: answer those
	// from it without a store read that would fail or hang for its
	// deadline first.
	if q.bypass.Load() {
		if it, ok := fromSpool(); ok {
			return it, nil
		}
	}
	if st := q.Store(); st != nil {
		it, err := st.Get(ctx, id)
		if err == nil || errors.Is(err, review.ErrNotFound) {
			q.readRecovered()
		}
		if err == nil {
			return it, nil
		}
		if !errors.Is(err, review.ErrNotFound) {
			// The store failed (down, or hung past its deadline): an
			// item still in the spool is answered from it, as before the
			// store opened. It answered 503 for the whole outage to the
			// very client the 422 had told to poll it.
			if it, ok := fromSpool(); ok {
				return it, nil
			}
			return nil, err
		}
	}
	if it, ok := fromSpool(); ok {
		return it, nil
	}
	// A drain may have moved the item in between the two reads (it
	// stores, then removes the spool): ask the store once more, so an item
	// a client was told about is never answered 404 for a moment.
	if st := q.Store(); st != nil {
		return st.Get(ctx, id)
	}
	// Not open (yet): what is not in the spool may be in the store.
	return nil, errStoreNotOpen
}

// readRecovered notes a store read that succeeded: after polls that failed
// to read it (logged once a minute), the next failure is logged at once,
// and the failures since the last line are logged now.
func (q *ReviewQueue) readRecovered() {
	if n := q.readWarn.reset(); n > 0 {
		q.Log.Info("review store read again", "failed_reads", n)
	}
}

// DefaultOutboxPurgeAfter is the age past which Run deletes a webhook
// delivery: the 24 h delivery window (Webhook.MaxAge) and two hours more.
// A running webhook worker retries at most an hour apart, so it has
// claimed and given up (logged, contractd_webhook_deliveries_total
// {result="expired"}) each of its own by then; what is left is what no
// worker will claim, such as the deliveries of a webhook removed from the
// config, which stayed in the outbox for ever.
const DefaultOutboxPurgeAfter = 26 * time.Hour

// Run reopens the store when needed, drains the spool into it, deletes
// resolved items past retention and webhook deliveries past
// OutboxPurgeAfter, until ctx ends. A panic in any of it is logged,
// counted and Run starts over after a backoff: each step may be cut short
// anywhere without loss or repeat. A drain stores items before it removes
// them from the spool (storing an id again is a no-op), and the deletes
// are by age, so doing either again only finishes the job.
func (q *ReviewQueue) Run(ctx context.Context) {
	restarting(ctx, PanicReviewQueue, q.Log, q.panicMetrics(), q.run)
}

func (q *ReviewQueue) panicMetrics() PanicMetrics {
	if q.Panics == nil {
		return nopPanicMetrics{}
	}
	return q.Panics
}

func (q *ReviewQueue) run(ctx context.Context) {
	t := time.NewTicker(q.Retry)
	defer t.Stop()
	if !spoolWritable(q.Spool.Path) {
		// Nothing fails until the store does, and then every item the
		// client is told about is lost: say so now, while it can be fixed.
		q.Log.Warn("the review spool cannot be written: needs_review items are lost while the store is down", "spool", q.Spool.Path)
	}
	var lastRetention, lastPurge time.Time
	purgeAfter := q.OutboxPurgeAfter
	if purgeAfter <= 0 {
		purgeAfter = DefaultOutboxPurgeAfter
	}
	for {
		if st := q.tryOpen(ctx); st != nil {
			if q.Spool.Pending() {
				n, err := q.Spool.Drain(ctx, st, q.Webhook, nil)
				if err != nil {
					if tries, ok := q.drainWarn.allow(); ok && ctx.Err() == nil {
						q.Log.Warn("review spool drain failed; will retry", "error", err.Error(), "failed_tries", tries)
					}
				} else {
					q.drainWarn.reset()
					if n > 0 {
						q.Log.Info("review spool drained into the store", "items", n)
					}
					q.closeBreaker("drain")
				}
			} else {
				// Nothing to move in (the spool could not take the items
				// either): the next write is the probe.
				q.closeBreaker("drain")
			}
		}
		q.startedOnce.Do(func() { close(q.started) })
		if st := q.Store(); st != nil {
			if q.Retention > 0 && time.Since(lastRetention) > time.Hour &&
				q.cleanup(ctx, st.DeleteResolvedBefore, q.Retention, "review retention cleanup failed", "review retention cleanup") {
				lastRetention = time.Now()
			}
			if time.Since(lastPurge) > time.Hour &&
				q.cleanup(ctx, st.DeleteDeliveriesBefore, purgeAfter, "webhook outbox purge failed", "webhook outbox purge: deliveries past the delivery window deleted") {
				lastPurge = time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// cleanup runs one of Run's hourly deletions (retention, the outbox purge)
// of what is older than age, and logs what it deleted (done) or why it
// failed (failed; not when ctx ended: serve is stopping, the store is not
// at fault). It reports whether the deletion ran, so the next waits an
// hour; a failed one is tried again at the next tick.
func (q *ReviewQueue) cleanup(ctx context.Context, del func(context.Context, time.Time) (int, error), age time.Duration, failed, done string) bool {
	n, err := del(ctx, time.Now().Add(-age))
	// Retention deleted items whose attempts could not be decoded (damaged
	// rows) with the others: the pass is done, the operator is told which.
	if de := (*review.DamagedItemsError)(nil); errors.As(err, &de) {
		q.Log.Warn("review retention deleted damaged items (attempts unreadable)", "items", len(de.IDs),
			"review_ids", de.IDs[:min(len(de.IDs), 10)])
		err = nil
	}
	if err != nil {
		if ctx.Err() == nil {
			q.Log.Warn(failed, "error", err.Error())
		}
		return false
	}
	if n > 0 {
		q.Log.Info(done, "deleted", n)
	}
	return true
}

// keyID identifies a client key without revealing it.
func keyID(key string) string {
	if key == "" {
		return ""
	}
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:])[:12]
}

// reviewItem builds the stored item of a 422 from the request's exchange.
func (x *exchange) reviewItem(p *Prepared, v *verdict, rv *Review, body []byte) *review.Item {
	// The item outlives the exchange; its input and body may alias the
	// pooled request buffer.
	body = bytes.Clone(body)
	in := p.inputJSON()
	input := json.RawMessage(bytes.Clone(in))
	if !json.Valid(in) {
		input = mustJSON(string(in))
	}
	var outputs []string
	if v != nil {
		outputs = v.outputs
	}
	req := json.RawMessage(body)
	if !json.Valid(body) {
		req = mustJSON(string(body))
	}
	return &review.Item{ID: rv.ID, Status: review.StatusPending, CreatedAt: x.ev.Time, Route: rv.Route,
		Prompt: *x.ev.Prompt, Contract: *x.ev.Contract, KeyID: x.keyID, Input: input, Request: req,
		Attempts: storedAttempts(rv.Attempts, outputs, 0)}
}

// storedAttempts are attempts as a review item keeps them: numbered after
// offset (a rerun continues the item's numbering), each with its output
// and the output's hash where outputs has one.
func storedAttempts(attempts []ReviewAttempt, outputs []string, offset int) []review.Attempt {
	atts := make([]review.Attempt, 0, len(attempts))
	for i, a := range attempts {
		ra := review.Attempt{AttemptReport: a}
		ra.Attempt += offset
		if i < len(outputs) {
			ra.Output, ra.OutputSHA256 = outputs[i], shaString(outputs[i])
		}
		atts = append(atts, ra)
	}
	return atts
}

// clientReview is GET /v1/reviews/{id}'s body.
type clientReview struct {
	ID         string             `json:"id"`
	Status     review.Status      `json:"status"`
	Route      string             `json:"route"`
	Contract   string             `json:"contract"`
	CreatedAt  time.Time          `json:"created_at"`
	ResolvedAt *time.Time         `json:"resolved_at"`
	Resolution *review.Resolution `json:"resolution"`
}

var errReviewNotFound = &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: CodeReviewNotFound, Message: "no such review"}

// MaxReviewWait bounds ?wait= on GET /v1/reviews/{id}.
const MaxReviewWait = 60 * time.Second

// getReview serves GET /v1/reviews/{id} to the key that made the request.
func (s *Server) getReview(w http.ResponseWriter, r *http.Request) {
	st := s.readAuth(w, r)
	if st == nil {
		return
	}
	kid := ""
	if len(st.keys) > 0 {
		kid = keyID(bearerToken(r))
	}
	// A poll is a request of its key like a chat completion: it spends
	// the key's rate limit, so a loop of polls cannot load the store
	// (shared by every replica with postgres) past the key's rate.
	if aerr := s.limit.allow(r.Context(), kid); aerr != nil {
		writeError(w, aerr)
		return
	}
	var wait time.Duration
	if ws := r.URL.Query().Get("wait"); ws != "" {
		d, err := time.ParseDuration(ws)
		if err != nil || d < 0 {
			writeError(w, badRequest(CodeInvalidParameter, "wait", "wait must be a Go duration such as 30s"))
			return
		}
		wait = min(d, MaxReviewWait)
	}
	q := s.Reviews
	if q == nil {
		writeError(w, errReviewNotFound)
		return
	}
	id := r.PathValue("id")
	it, err := q.get(r.Context(), id)
	if err == nil && it.Status == review.StatusPending && wait > 0 && it.KeyID == kid {
		// The answer may come later than request_timeout allows a
		// response: its write deadline follows the wait instead.
		grace := s.WriteGrace
		if grace <= 0 {
			grace = DefaultWriteGrace
		}
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + grace))
		// Subscribe, then look again, so a resolution in between is seen.
		ch, cancel := q.Notifier.Subscribe(id)
		if it, err = q.get(r.Context(), id); err == nil && it.Status == review.StatusPending {
			t := time.NewTimer(wait)
			select {
			case <-ch:
			case <-t.C:
			case <-r.Context().Done():
			case <-s.draining:
			}
			t.Stop()
			it, err = q.get(r.Context(), id)
		}
		cancel()
	}
	switch {
	case errors.Is(err, review.ErrNotFound) || (err == nil && it.KeyID != kid):
		writeError(w, errReviewNotFound)
	case errors.Is(err, errStoreNotOpen):
		// Not a failed read: the open's failures are logged by Run.
		writeError(w, errStoreDown)
	case err != nil && r.Context().Err() != nil:
		// The client left (a long poll given up): the read was cut
		// short by its leaving, not by the store. Nobody reads this.
		writeError(w, errClientClosed())
	case err != nil:
		// Every poll of an outage fails alike (a client polling each
		// second logged a line a second): the first is logged, then one
		// line a minute, with the failures since the last line.
		if n, ok := q.readWarn.allow(); ok {
			s.Logger.Error("review store read failed", "request_id", w.Header().Get("X-Request-Id"), "error", err.Error(), "failed_reads", n)
		}
		writeError(w, errStoreDown)
	default:
		writeJSON(w, http.StatusOK, clientReview{ID: it.ID, Status: it.Status, Route: it.Route, Contract: it.Contract.Name,
			CreatedAt: it.CreatedAt, ResolvedAt: it.ResolvedAt, Resolution: it.Resolution})
	}
}
