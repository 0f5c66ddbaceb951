package review

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// Spool is the fallback for items the store could not take: one JSON line
// per item, appended and fsynced before the client is answered, and moved
// into the store by Drain once it accepts writes again.
type Spool struct {
	Path string
	// mu guards the file: Append, and Drain's read and its removal of
	// what it moved. Drain's store calls run without it: a store that
	// hangs held every 422 being spooled meanwhile for as long as the
	// store's deadline (up to 15 s for a 422 that had waited 5 s for its
	// own write), for the write that had already failed.
	mu sync.Mutex
	// draining lets one Drain run at a time (serve's retry loop and
	// Close's last drain).
	draining sync.Mutex
}

// spoolLine is an item with what its JSON shape leaves out but the store
// needs once the item moves in.
type spoolLine struct {
	*Item
	Dedupe *Dedupe `json:"dedupe,omitempty"`
}

func decodeLine(line []byte) (*Item, error) {
	var l spoolLine
	l.Item = &Item{}
	if err := json.Unmarshal(line, &l); err != nil {
		return nil, err
	}
	l.Item.Dedupe = l.Dedupe
	return l.Item, nil
}

// Append writes it as one line and fsyncs the file.
func (s *Spool) Append(it *Item) error {
	b, err := json.Marshal(spoolLine{Item: it, Dedupe: it.Dedupe})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.OpenFile(s.Path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("review spool: %w", err)
	}
	// kill -9 during a write of more than a page can leave a torn last
	// line without its newline (the kernel stops between pages): the next
	// line appended to it, by the next process, was glued to it, and that
	// item, acknowledged to its client, could neither be found nor moved
	// in. Start on a line of its own.
	torn, err := tornTail(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("review spool: %w", err)
	}
	if torn {
		b = append([]byte{'\n'}, b...)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("review spool: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("review spool: %w", err)
	}
	return f.Close()
}

// tornTail reports whether f is not empty and does not end with a newline.
func tornTail(f *os.File) (bool, error) {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return false, err
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], fi.Size()-1); err != nil {
		return false, err
	}
	return last[0] != '\n', nil
}

// Drain moves every spooled item into st and removes them from the spool
// when all went in; items appended meanwhile stay for the next drain.
// Items already in the store (a crash between insert and removal) are
// skipped by Create. It returns the number of items moved in; on a store
// error the spool is left whole for the next try. onCreated is called for
// each item newly stored. Append is not held up while the store answers
// (or hangs until ctx's or the store's deadline).
func (s *Spool) Drain(ctx context.Context, st Store, webhook bool, onCreated func(*Item)) (int, error) {
	s.draining.Lock()
	defer s.draining.Unlock()
	s.mu.Lock()
	b, err := os.ReadFile(s.Path)
	s.mu.Unlock()
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("review spool: %w", err)
	}
	n := 0
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		it, err := decodeLine(line)
		if err != nil {
			// A torn last line from a crash mid-append was never
			// acknowledged to a client (the fsync had not returned).
			continue
		}
		created, err := st.Create(ctx, it, webhook)
		if err != nil {
			return n, err
		}
		if created {
			n++
			if onCreated != nil {
				onCreated(it)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.removeFirst(int64(len(b))); err != nil {
		return n, fmt.Errorf("review spool: %w", err)
	}
	return n, nil
}

// removeFirst removes the spool's first size bytes, those Drain moved in;
// s.mu is held. Only Append writes meanwhile, at the end: the file is
// removed when nothing was appended, else replaced by what was, through a
// new file fsynced and renamed over it. A crash leaves the old spool or the
// new one, never less: the items moved in again are skipped by Create.
func (s *Spool) removeFirst(size int64) error {
	b, err := os.ReadFile(s.Path)
	if err != nil {
		return err
	}
	if int64(len(b)) <= size {
		return os.Remove(s.Path)
	}
	tmp := s.Path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b[size:]); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, s.Path)
}

// Pending reports whether the spool holds anything.
func (s *Spool) Pending() bool {
	st, err := os.Stat(s.Path)
	return err == nil && st.Size() > 0
}

// Get finds id in the spool (for a client polling an item not yet moved).
// Any key holder can poll any id while the store is down, so a line is
// decoded only when it holds id as encoded JSON, and the file is read
// without the lock Append takes: a poll never holds up the 422s being
// spooled. A line being appended meanwhile may be missed; it has not been
// acknowledged to its client yet.
func (s *Spool) Get(id string) (*Item, bool) {
	needle, err := json.Marshal(id)
	if err != nil {
		return nil, false
	}
	f, err := os.Open(s.Path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024*1024)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), needle) {
			continue
		}
		if it, err := decodeLine(sc.Bytes()); err == nil && it.ID == id {
			return it, true
		}
	}
	return nil, false
}
