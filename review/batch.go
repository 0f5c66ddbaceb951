package review

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/contractd/contractd/internal/panics"
)

// batcher group-commits Create: a few writer goroutines each take every
// item waiting at that moment and store them with one commit. Under load
// many needs_review answers share one transaction (one log write, one
// round trip) instead of queueing for one each; alone, an item is its own
// batch and waits for nothing else.
type batcher struct {
	reqs    chan createReq
	closed  chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
	timeout time.Duration
	// commit stores the batch in one transaction and reports, per item,
	// whether it was created (false: the id existed). On an error nothing
	// of the batch may be stored.
	commit func(ctx context.Context, batch []createReq) ([]bool, error)
	// between, when set, runs in the writer between batches: idle when no
	// item is waiting, so store upkeep that must not overlap a commit
	// delays none; busy after a batch, for upkeep that is overdue.
	between func(idle bool)
}

type createReq struct {
	it      *Item
	webhook bool
	res     chan createRes
}

type createRes struct {
	created bool
	err     error
}

// maxBatch bounds one group commit.
const maxBatch = 128

var errClosed = errors.New("review store closed")

func newBatcher(writers int, timeout time.Duration, commit func(context.Context, []createReq) ([]bool, error)) *batcher {
	return newBatcherBetween(writers, timeout, commit, nil)
}

func newBatcherBetween(writers int, timeout time.Duration, commit func(context.Context, []createReq) ([]bool, error), between func(idle bool)) *batcher {
	b := &batcher{reqs: make(chan createReq), closed: make(chan struct{}), timeout: timeout, commit: commit, between: between}
	b.wg.Add(writers)
	for range writers {
		go b.writer()
	}
	return b
}

// create hands the item to a writer and returns once the transaction
// holding it committed.
func (b *batcher) create(ctx context.Context, it *Item, webhook bool) (bool, error) {
	req := createReq{it: it, webhook: webhook, res: make(chan createRes, 1)}
	select {
	case b.reqs <- req:
	case <-b.closed:
		return false, errClosed
	case <-ctx.Done():
		return false, ctx.Err()
	}
	select {
	case r := <-req.res:
		return r.created, r.err
	case <-ctx.Done():
		// It may still commit; a caller that spools it instead is safe
		// because creating an existing id is a no-op.
		return false, ctx.Err()
	}
}

// close stops the writers once their batches are answered.
func (b *batcher) close() {
	b.once.Do(func() { close(b.closed) })
	b.wg.Wait()
}

func (b *batcher) writer() {
	defer b.wg.Done()
	for {
		var first createReq
		if b.between != nil {
			select {
			case first = <-b.reqs:
			default:
				b.between(true)
			}
		}
		if first.res == nil {
			select {
			case first = <-b.reqs:
			case <-b.closed:
				return
			}
		}
		batch := []createReq{first}
	more:
		for len(batch) < maxBatch {
			select {
			case r := <-b.reqs:
				batch = append(batch, r)
			default:
				break more
			}
		}
		b.commitBatch(batch)
		// A panic in between (store upkeep: a WAL checkpoint) is left to
		// end the process: no item is held then (each of the batch was
		// answered), but this package has no log to report it in, and a
		// writer that swallowed it silently would hide the bug.
		if b.between != nil {
			b.between(false)
		}
	}
}

func (b *batcher) commitBatch(batch []createReq) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	created, err := b.safeCommit(ctx, batch)
	if err != nil && len(batch) > 1 {
		// One bad item must not fail the others: retry each alone.
		for _, r := range batch {
			c, err := b.safeCommit(ctx, []createReq{r})
			r.res <- createRes{err == nil && c[0], err}
		}
		return
	}
	for i, r := range batch {
		r.res <- createRes{err == nil && created[i], err}
	}
}

// safeCommit is commit with a panic turned into a *panics.Error for the
// items of the batch. The writer holds items whose callers wait for an
// answer: a panic left to end the writer would end the process with them
// unanswered (the clients told nothing, their items nowhere). Answered
// with the error, each caller spools its item (ReviewQueue.save), which
// loses none: the commit's transaction is rolled back by its deferred
// Rollback, and an item it did commit before the panic is not stored
// twice, since creating an id that exists is a no-op.
func (b *batcher) safeCommit(ctx context.Context, batch []createReq) (created []bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			created, err = nil, panics.New(p)
		}
	}()
	return b.commit(ctx, batch)
}
