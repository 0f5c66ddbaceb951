package proxy

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
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
	for _, part := range [][]byte{[]byte(clientKey), []byte(api), []byte(route), body, []byte(promptSHA), []byte(contractSHA)} {
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
type dedupe struct {
	mu       sync.Mutex
	max      int
	lru      *list.List // of *dedupeEntry, most recent first
	items    map[dedupeKey]*list.Element
	inflight map[dedupeKey]chan struct{}
	now      func() time.Time

	evictions atomic.Int64
}

type dedupeEntry struct {
	key     dedupeKey
	err     *APIError // read-only once stored
	expires time.Time
}

func newDedupe(max int) *dedupe {
	return &dedupe{max: max, lru: list.New(), items: map[dedupeKey]*list.Element{},
		inflight: map[dedupeKey]chan struct{}{}, now: time.Now}
}

// acquire returns the stored 422 of an identical request still inside its
// window, or makes the caller the one request that runs: it must then call
// release exactly once with its needs_review error (nil: nothing to keep).
// While one runs, identical requests wait for it; if it ends without a
// verdict to keep, one of them runs next. ctx ends the wait.
func (d *dedupe) acquire(ctx context.Context, k dedupeKey) (hit *APIError, release func(verdict *APIError, window time.Duration), err error) {
	for {
		d.mu.Lock()
		if el, ok := d.items[k]; ok {
			e := el.Value.(*dedupeEntry)
			if d.now().Before(e.expires) {
				d.lru.MoveToFront(el)
				d.mu.Unlock()
				return e.err, nil, nil
			}
			d.lru.Remove(el)
			delete(d.items, k)
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

func (d *dedupe) release(k dedupeKey, ch chan struct{}, v *APIError, window time.Duration) {
	d.mu.Lock()
	delete(d.inflight, k)
	if v != nil && window > 0 {
		e := &dedupeEntry{key: k, err: v, expires: d.now().Add(window)}
		if el, ok := d.items[k]; ok {
			el.Value = e
			d.lru.MoveToFront(el)
		} else {
			d.items[k] = d.lru.PushFront(e)
		}
		for d.lru.Len() > d.max {
			old := d.lru.Back()
			d.lru.Remove(old)
			delete(d.items, old.Value.(*dedupeEntry).key)
			d.evictions.Add(1)
		}
	}
	d.mu.Unlock()
	close(ch)
}

// stats reports the entries held and the evictions so far.
func (d *dedupe) stats() (entries int, evictions int64) {
	d.mu.Lock()
	entries = d.lru.Len()
	d.mu.Unlock()
	return entries, d.evictions.Load()
}

// DedupeStats reports the dedupe cache's entries and its evictions so far
// (for the contractd_dedupe_* metrics).
func (s *Server) DedupeStats() (entries int, evictions int64) { return s.dedupe.stats() }
