package review

import "sync"

// Notifier wakes waiters when an item is resolved, so a long-poll holds no
// store query. The in-process Hub serves one replica; a shared store can
// plug in its own (e.g. PostgreSQL LISTEN/NOTIFY) behind this interface.
type Notifier interface {
	// Subscribe returns a channel closed when id is next resolved, and a
	// cancel func the waiter must call when it stops waiting.
	Subscribe(id string) (<-chan struct{}, func())
	// Notify wakes every waiter of id.
	Notify(id string)
}

// Hub is the in-process Notifier.
type Hub struct {
	mu      sync.Mutex
	waiters map[string]map[*waiter]struct{}
}

type waiter struct{ ch chan struct{} }

// NewHub returns an empty Hub.
func NewHub() *Hub { return &Hub{waiters: map[string]map[*waiter]struct{}{}} }

func (h *Hub) Subscribe(id string) (<-chan struct{}, func()) {
	w := &waiter{ch: make(chan struct{})}
	h.mu.Lock()
	set := h.waiters[id]
	if set == nil {
		set = map[*waiter]struct{}{}
		h.waiters[id] = set
	}
	set[w] = struct{}{}
	h.mu.Unlock()
	return w.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if set, ok := h.waiters[id]; ok {
			delete(set, w)
			if len(set) == 0 {
				delete(h.waiters, id)
			}
		}
	}
}

func (h *Hub) Notify(id string) {
	h.mu.Lock()
	set := h.waiters[id]
	delete(h.waiters, id)
	h.mu.Unlock()
	for w := range set {
		close(w.ch)
	}
}

// Waiting is the number of ids with waiters (for tests).
func (h *Hub) Waiting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waiters)
}

// IDs lists the ids being waited for, so a notifier that may have missed
// events (a reconnect) can check them.
func (h *Hub) IDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.waiters))
	for id := range h.waiters {
		out = append(out, id)
	}
	return out
}
