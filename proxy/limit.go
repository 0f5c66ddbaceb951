package proxy

import (
	"context"
	"sync"

	"github.com/contractd/contractd/config"
)

// semaphores caps concurrent calls per upstream name (max_concurrency).
// Keyed by name so the cap survives reloads that rebuild the Upstream.
type semaphores struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func (s *semaphores) acquire(ctx context.Context, u *config.Upstream) (func(), error) {
	if u.MaxConcurrency <= 0 {
		return func() {}, nil
	}
	s.mu.Lock()
	if s.m == nil {
		s.m = map[string]chan struct{}{}
	}
	ch, ok := s.m[u.Name]
	if !ok || cap(ch) != u.MaxConcurrency {
		ch = make(chan struct{}, u.MaxConcurrency)
		s.m[u.Name] = ch
	}
	s.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
