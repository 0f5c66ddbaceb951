package testkit

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
)

// AuditSink is an audit.Sink that keeps events in memory, plus each event
// as the JSON line a writer sink would have written.
type AuditSink struct {
	mu  sync.Mutex
	evs []audit.Event
	raw bytes.Buffer
}

var _ audit.Sink = (*AuditSink)(nil)

func (m *AuditSink) Write(ev *audit.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.evs = append(m.evs, *ev)
	b, _ := json.Marshal(ev)
	m.raw.Write(append(b, '\n'))
	return nil
}

func (m *AuditSink) Close() error { return nil }

// WriteResolved keeps review_resolved lines in Raw.
func (m *AuditSink) WriteResolved(ev *audit.ResolvedEvent) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, _ := json.Marshal(ev)
	m.raw.Write(append(b, '\n'))
	return nil
}

// Events returns the events written so far.
func (m *AuditSink) Events() []audit.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]audit.Event(nil), m.evs...)
}

// Raw is every event written so far as JSON lines.
func (m *AuditSink) Raw() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.raw.String()
}

// WaitEvent waits up to 3s for the event of request id ("": any event)
// and returns it (handlers write it before the response completes, but a
// client that hung up does not wait).
func (m *AuditSink) WaitEvent(t testing.TB, id string) audit.Event {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		for _, ev := range m.Events() {
			if id == "" || ev.RequestID == id {
				return ev
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no audit event for request %q", id)
	return audit.Event{}
}

// SyncBuffer is a goroutine-safe bytes.Buffer: the destination of a
// server's logs or of an audit writer sink.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// AuditEvents decodes the audit lines written so far (lines that are not
// an audit event are skipped).
func (s *SyncBuffer) AuditEvents() []audit.Event {
	var evs []audit.Event
	for _, l := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		if l == "" {
			continue
		}
		var ev audit.Event
		if json.Unmarshal([]byte(l), &ev) == nil {
			evs = append(evs, ev)
		}
	}
	return evs
}

// WaitAuditEvents waits up to 3s until n audit events were written.
func (s *SyncBuffer) WaitAuditEvents(t testing.TB, n int) []audit.Event {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		evs := s.AuditEvents()
		if len(evs) >= n || time.Now().After(deadline) {
			if len(evs) < n {
				t.Fatalf("%d audit events, want %d", len(evs), n)
			}
			return evs
		}
		time.Sleep(5 * time.Millisecond)
	}
}
