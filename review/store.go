package review

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Store keeps review items and the webhook outbox. Implementations must make
// every acknowledged write durable (it survives kill -9) and resolve with a
// conditional update so that of concurrent resolutions, across processes,
// exactly one wins.
type Store interface {
	// Create stores a new pending item (and, when webhook is true, its
	// review.created delivery in the same transaction). Creating an id that
	// already exists changes nothing and reports created=false, so spooled
	// items can be moved in again safely.
	Create(ctx context.Context, it *Item, webhook bool) (created bool, err error)
	// Get returns the whole item, or ErrNotFound.
	Get(ctx context.Context, id string) (*Item, error)
	// List returns items newest first (without Request) and the cursor of
	// the next page ("" at the end).
	List(ctx context.Context, f Filter) (items []*Item, next string, err error)
	// Resolve moves a pending item to approved or rejected, appending
	// r.Attempts first. ErrNotFound, or ErrAlreadyResolved when it is no
	// longer pending. It returns the resolved item.
	Resolve(ctx context.Context, id string, r Resolve) (*Item, error)
	// AppendAttempts adds attempts to a pending item (ErrAlreadyResolved
	// otherwise) and returns it.
	AppendAttempts(ctx context.Context, id string, atts []Attempt) (*Item, error)
	// Export calls fn for each item matching f, newest resolution first,
	// streaming rather than loading every item.
	Export(ctx context.Context, f ExportFilter, fn func(*Item) error) error
	// Pending counts pending items per route.
	Pending(ctx context.Context) (map[string]int, error)
	// DeleteResolvedBefore deletes resolved items resolved before t; pending
	// items are never deleted.
	DeleteResolvedBefore(ctx context.Context, t time.Time) (int, error)
	// ClaimDeliveries returns up to limit webhook deliveries due at now and
	// hides them from other claimers until now+lease.
	ClaimDeliveries(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]Delivery, error)
	// FinishDelivery deletes a delivery (done) or schedules its next try.
	FinishDelivery(ctx context.Context, id string, done bool, retryAt time.Time) error
	// DeleteDeliveriesBefore deletes webhook deliveries created before t,
	// oldest first, in batches (each its own transaction, as retention's),
	// whether or not a worker would post them: deliveries past the delivery
	// window are given up anyway, and those of a webhook removed from the
	// config are claimed by no worker at all.
	DeleteDeliveriesBefore(ctx context.Context, t time.Time) (int, error)
	// RecentDedupe returns the dedupe windows of items created at or after
	// since that are still open at now (Until after now), oldest first
	// (created, then id), at most limit. Items answer whatever their
	// status: the window is short and the client learns the status from
	// GET /v1/reviews/{id}. Every process sharing the store polls it to
	// learn the others' needs_review verdicts, so no request waits on the
	// store for them; it must be an indexed range read.
	RecentDedupe(ctx context.Context, since, now time.Time, limit int) ([]DedupeRecord, error)
	Close() error
}

// Dedupe lets an identical repeat of the request that made an item get the
// same 422 again, on any replica sharing the store, without an upstream
// call (review.dedupe_window). Create stores it with the item.
type Dedupe struct {
	// Key identifies the request (client key, edge, route, body bytes,
	// prompt and contract sha256), hashed by the proxy; opaque here.
	Key string `json:"key"`
	// Until is when the window ends: the verdict time plus the window.
	Until time.Time `json:"until"`
	// Answer is what the proxy needs to give the client the 422 it was
	// given again; opaque here. Versions before commit c9cbfa8 stored the
	// whole 422 body (about 1.1 KB, most of it a copy of the attempts'
	// reports); the proxy now stores a few bytes and renders the 422 from
	// the record's route, contract and attempts (docs/review.md).
	Answer json.RawMessage `json:"answer"`
}

// DedupeRecord is an open dedupe window with the item it belongs to: the
// item's route, contract name and attempts as stored (a JSON array of
// Attempt, rerun attempts included), from which the proxy renders the
// answer.
type DedupeRecord struct {
	ID        string
	CreatedAt time.Time
	Route     string
	Contract  string
	Attempts  json.RawMessage
	Dedupe
}

// Filter selects items for List. Empty strings match everything.
type Filter struct {
	Status   Status
	Route    string
	Contract string
	Rule     string // any attempt has a violation with this rule
	Limit    int    // 1..500; 0 means DefaultLimit
	Cursor   string
}

// List limits.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// ExportFilter selects items for Export.
type ExportFilter struct {
	Status Status    // "" = any
	Route  string    // "" = any
	Since  time.Time // resolved (or, for pending, created) at or after; zero = any
}

// Resolve is a resolution request.
type Resolve struct {
	Status     Status // approved or rejected
	At         time.Time
	Resolution Resolution
	Attempts   []Attempt // appended before resolving (a rerun's attempts)
	Webhook    bool      // enqueue review.resolved in the same transaction
}

// Delivery is one pending webhook POST.
type Delivery struct {
	ID        string
	Type      WebhookEvent
	ReviewID  string
	Body      []byte
	CreatedAt time.Time
	Tries     int
}

// WebhookEvent is a webhook delivery's type (its X-Contractd-Event).
type WebhookEvent string

// Webhook event types.
const (
	EventCreated  WebhookEvent = "review.created"
	EventResolved WebhookEvent = "review.resolved"
)

// WebhookBody is the JSON a delivery posts: {type, review} with the list
// form of the item (no request).
func WebhookBody(typ WebhookEvent, it *Item) []byte {
	lf := *it
	lf.Request = nil
	b, _ := json.Marshal(struct {
		Type   WebhookEvent `json:"type"`
		Review *Item        `json:"review"`
	}{typ, &lf})
	return b
}

// cursor encodes a position in newest-first order: (created, id).
func encodeCursor(created int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(created, 10) + ":" + id))
}

func decodeCursor(c string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", ErrBadCursor
	}
	ns, id, ok := strings.Cut(string(b), ":")
	if !ok {
		return 0, "", ErrBadCursor
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return 0, "", ErrBadCursor
	}
	return n, id, nil
}

// CheckFilter normalises f.Limit and reports a limit out of range.
func CheckFilter(f *Filter) error {
	if f.Limit == 0 {
		f.Limit = DefaultLimit
	}
	if f.Limit < 1 || f.Limit > MaxLimit {
		return fmt.Errorf("limit must be 1..%d", MaxLimit)
	}
	if f.Status != "" && !f.Status.Valid() {
		return fmt.Errorf("unknown status %q", f.Status)
	}
	return nil
}

// onePage trims a List read of limit+1 rows to limit, and gives the cursor
// of the next page when there was more.
func onePage(items []*Item, limit int) ([]*Item, string) {
	if len(items) <= limit {
		return items, ""
	}
	items = items[:limit]
	last := items[len(items)-1]
	return items, encodeCursor(last.CreatedAt.UnixNano(), last.ID)
}

// inBatches runs batch, one DELETE of at most size rows committed on its
// own, until one deletes fewer than size, and returns how many rows they
// deleted in all: retention's and the outbox purge's pass on both
// backends. It stops at the first error; the batches before it stay
// deleted and the next pass goes on from there.
func inBatches(size int, batch func() (int, error)) (int, error) {
	total := 0
	for {
		n, err := batch()
		total += n
		if err != nil || n < size {
			return total, err
		}
	}
}

// resolvedInBatches is DeleteResolvedBefore's pass: inBatches for each
// resolved status in turn (a retention statement takes one status, so it
// walks the status index in order).
func resolvedInBatches(size int, batch func(Status) (int, error)) (int, error) {
	total := 0
	for _, st := range []Status{StatusApproved, StatusRejected} {
		n, err := inBatches(size, func() (int, error) { return batch(st) })
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
