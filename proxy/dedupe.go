package proxy

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// DedupeMaxEntries bounds the dedupe cache: the least recently used verdict
// is evicted past it, so a flood of distinct failing bodies costs at most
// this many entries (each a 422 body's worth of memory).
const DedupeMaxEntries = 10000

// dedupeKey identifies "the same request": client key, edge, route, body
// bytes, and the prompt and contract hashes, so a reload that changes the
// contract or the prompt never serves a verdict made under the old one.
type dedupeKey [sha256.Size]byte

// String is the key's hex form, the review store's dedupe key.
func (k dedupeKey) String() string { return hex.EncodeToString(k[:]) }

func newDedupeKey(clientKey, api, route string, body []byte, promptSHA, contractSHA string) dedupeKey {
	h := sha256.New()
	for _, part := range [...][]byte{stringBytes(clientKey), stringBytes(api), stringBytes(route), body, stringBytes(promptSHA), stringBytes(contractSHA)} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:]) // length-prefixed: no two splits of the same bytes collide
		h.Write(part)
	}
	var k dedupeKey
	h.Sum(k[:0])
	return k
}

// dedupe remembers recent needs_review verdicts for review.dedupe_window
// and makes identical requests in flight wait for the one that runs, so a
// client retrying a 422 blindly costs no upstream call. Only needs_review
// verdicts are kept: a valid answer or an upstream error is not a verdict
// on the request and the next identical request runs again.
//
// Waiting is only worth it while a verdict may come: once a run of a body
// ends without one, its waiters and later identical requests run side by
// side (a clear mark, kept for a short while). Otherwise identical valid
// requests, which load tests and fan-out jobs send, would run one at a
// time, each behind a whole upstream call.
type dedupe struct {
	mu       sync.Mutex
	max      int
	lru      *list.List // of *dedupeEntry, most recent first
	items    map[dedupeKey]*list.Element
	inflight map[dedupeKey]chan struct{}
	clear    map[dedupeKey]time.Time // ran without a verdict; until when identical requests need not wait
	now      func() time.Time
	swept    time.Time // the last sweepLocked

	evictions atomic.Int64
}

// dedupeSweepEvery is how often at most a new verdict, a new clear mark
// or a scrape of the entries (stats) drops the verdicts whose window has
// ended and the clear marks past their time (sweepLocked). Before, an entry
// went only when an identical request came after its window or when the
// LRU limit pushed it out: with distinct failing bodies (the usual case)
// every verdict stayed, each a 422 body's worth of memory, until
// DedupeMaxEntries of them were held, whatever the window (a 17-minute soak,
// `make soak-long`, held all 1,834 of its verdicts with a 20 s window).
const dedupeSweepEvery = time.Second

// dedupeClearFor is how long a run without a verdict lets identical
// requests skip the wait; dedupeClearMax bounds those marks (an arbitrary
// one goes when it is full: a lost mark costs one wait, never a verdict).
const (
	dedupeClearFor = 10 * time.Second
	dedupeClearMax = 4096
)

type dedupeEntry struct {
	key     dedupeKey
	err     *APIError // read-only once stored
	expires time.Time
}

func newDedupe(max int) *dedupe {
	return &dedupe{max: max, lru: list.New(), items: map[dedupeKey]*list.Element{},
		inflight: map[dedupeKey]chan struct{}{}, clear: map[dedupeKey]time.Time{}, now: time.Now}
}

// acquire returns the stored 422 of an identical request still inside its
// window, or makes the caller the one request that runs: it must then call
// release exactly once with its needs_review error (nil: nothing to keep).
// While one runs, identical requests wait for it; if it ends without a
// verdict to keep, they all run. ctx ends the wait.
func (d *dedupe) acquire(ctx context.Context, k dedupeKey) (hit *APIError, release func(verdict *APIError, window time.Duration), err error) {
	for {
		d.mu.Lock()
		now := d.now()
		if el, ok := d.items[k]; ok {
			e := el.Value.(*dedupeEntry)
			if now.Before(e.expires) {
				d.lru.MoveToFront(el)
				d.mu.Unlock()
				return e.err, nil, nil
			}
			d.lru.Remove(el)
			delete(d.items, k)
		}
		if until, ok := d.clear[k]; ok {
			if now.Before(until) {
				// Side by side with any identical run: a verdict it ends
				// with is kept all the same.
				d.mu.Unlock()
				var once sync.Once
				return nil, func(v *APIError, window time.Duration) {
					once.Do(func() { d.release(k, nil, v, window) })
				}, nil
			}
			delete(d.clear, k)
		}
		ch, running := d.inflight[k]
		if !running {
			ch = make(chan struct{})
			d.inflight[k] = ch
			d.mu.Unlock()
			var once sync.Once
			return nil, func(v *APIError, window time.Duration) {
				once.Do(func() { d.release(k, ch, v, window) })
			}, nil
		}
		d.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// release ends a run of k: ch is the waiters' channel when the run was the
// registered one (nil when it ran beside others after a clear mark).
func (d *dedupe) release(k dedupeKey, ch chan struct{}, v *APIError, window time.Duration) {
	d.mu.Lock()
	if ch != nil {
		delete(d.inflight, k)
	}
	switch {
	case v != nil && window > 0:
		delete(d.clear, k)
		now := d.now()
		d.sweepLocked(now)
		e := &dedupeEntry{key: k, err: v, expires: now.Add(window)}
		if el, ok := d.items[k]; ok {
			el.Value = e
			d.lru.MoveToFront(el)
		} else {
			d.items[k] = d.lru.PushFront(e)
			d.evictLocked()
		}
	case v == nil:
		if _, kept := d.items[k]; kept {
			break // a verdict from an identical run beside this one
		}
		now := d.now()
		d.sweepLocked(now)
		if _, ok := d.clear[k]; !ok && len(d.clear) >= dedupeClearMax {
			for old := range d.clear {
				delete(d.clear, old)
				break
			}
		}
		d.clear[k] = now.Add(dedupeClearFor)
	}
	d.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// learn remembers a verdict made elsewhere (another process sharing the
// review store, or this one before a restart) until expires. A verdict
// already held that lasts longer stays.
func (d *dedupe) learn(k dedupeKey, v *APIError, expires time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if !now.Before(expires) {
		return
	}
	d.sweepLocked(now)
	delete(d.clear, k)
	if el, ok := d.items[k]; ok {
		if !expires.After(el.Value.(*dedupeEntry).expires) {
			return
		}
		el.Value = &dedupeEntry{key: k, err: v, expires: expires}
		return
	}
	d.items[k] = d.lru.PushFront(&dedupeEntry{key: k, err: v, expires: expires})
	d.evictLocked()
}

// holds reports whether a verdict for k is held until at least expires:
// learning one that ends no later would change nothing (learn), so the
// sync need not render it first.
func (d *dedupe) holds(k dedupeKey, expires time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	el, ok := d.items[k]
	return ok && !expires.After(el.Value.(*dedupeEntry).expires)
}

// sweepLocked drops the verdicts whose window has ended and the clear
// marks past their time, at most once per dedupeSweepEvery: a walk over at
// most DedupeMaxEntries verdicts and dedupeClearMax marks, under the lock
// (at the limit, about 0.1 ms a second). acquire already treats both as
// absent; this gives their memory back.
func (d *dedupe) sweepLocked(now time.Time) {
	if since := now.Sub(d.swept); !d.swept.IsZero() && since >= 0 && since < dedupeSweepEvery {
		return
	}
	d.swept = now
	for el := d.lru.Back(); el != nil; {
		prev := el.Prev()
		if e := el.Value.(*dedupeEntry); !now.Before(e.expires) {
			d.lru.Remove(el)
			delete(d.items, e.key)
		}
		el = prev
	}
	for k, until := range d.clear {
		if !now.Before(until) {
			delete(d.clear, k)
		}
	}
}

func (d *dedupe) evictLocked() {
	for d.lru.Len() > d.max {
		old := d.lru.Back()
		d.lru.Remove(old)
		delete(d.items, old.Value.(*dedupeEntry).key)
		d.evictions.Add(1)
	}
}

// DedupeSyncEvery is how often SyncDedupe reads the review store: an
// identical repeat on another replica is served from memory once this
// much has passed since the verdict (SDKs back off longer than that).
const DedupeSyncEvery = 500 * time.Millisecond

// dedupeSyncOverlap: each read goes back this far before the newest item
// already seen, because an item's creation time is taken before its
// transaction commits and a slower commit can land behind a newer one.
const dedupeSyncOverlap = 2 * time.Second

// dedupeSyncBatch bounds one read; a full batch is followed at once by the
// next.
const dedupeSyncBatch = 1000

// SyncDedupe keeps the dedupe memory in step with the review store until
// ctx ends: every `every` it reads the windows opened by any process
// sharing the store (this one included) since its last read and
// remembers them. An identical repeat on another replica, or after a
// restart, is then answered from memory: no request waits on the store
// for it, and a slow or unreachable store slows no request (the sync logs
// once a minute and the repeats run, as without a store).
//
// A panic is logged and counted, and the sync starts over after a
// backoff from the start of the window: it only reads the store into the
// cache, and learning a verdict again changes nothing.
func (s *Server) SyncDedupe(ctx context.Context, every time.Duration) {
	restarting(ctx, PanicDedupeSync, s.Logger, s.panics(), func(ctx context.Context) {
		y := &dedupeSync{s: s}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if err := y.once(ctx); err != nil && ctx.Err() == nil && s.Reviews != nil {
				s.Reviews.warnLookup(err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

// dedupeSync is one SyncDedupe's position in the store.
type dedupeSync struct {
	s     *Server
	since time.Time // newest creation time seen; zero before the first read
}

func (y *dedupeSync) once(ctx context.Context) error {
	q := y.s.Reviews
	window := y.s.Runtime().Review.DedupeWindow
	if q == nil || window <= 0 {
		return nil
	}
	st := q.Store()
	if st == nil {
		return nil // the queue logs an unavailable store
	}
	now := y.s.dedupe.now()
	if y.since.IsZero() {
		y.since = now.Add(-window)
	}
	from := y.since.Add(-dedupeSyncOverlap)
	for {
		recs, err := st.RecentDedupe(ctx, from, now, dedupeSyncBatch)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if r.CreatedAt.After(y.since) {
				y.since = r.CreatedAt
			}
			var k dedupeKey
			if n, err := hex.Decode(k[:], []byte(r.Key)); err != nil || n != len(k) {
				continue // not a key this version writes
			}
			if y.s.dedupe.holds(k, r.Until) {
				continue // read again in the overlap, or this process's own
			}
			e, err := renderDedupe(&r)
			if err != nil {
				q.warnLookup(fmt.Errorf("item %s: dedupe answer: %w", r.ID, err))
				continue
			}
			y.s.dedupe.learn(k, e, r.Until)
		}
		if len(recs) < dedupeSyncBatch || !recs[len(recs)-1].CreatedAt.After(from) {
			return nil
		}
		from = recs[len(recs)-1].CreatedAt
	}
}

// stats reports the entries held (after a sweep: verdicts still inside
// their window) and the evictions so far.
func (d *dedupe) stats() (entries int, evictions int64) {
	d.mu.Lock()
	d.sweepLocked(d.now())
	entries = d.lru.Len()
	d.mu.Unlock()
	return entries, d.evictions.Load()
}

// DedupeStats reports the dedupe cache's entries and its evictions so far
// (for the contractd_dedupe_* metrics).
func (s *Server) DedupeStats() (entries int, evictions int64) { return s.dedupe.stats() }
