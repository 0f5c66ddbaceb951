package audit_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/internal/testkit"
	"golang.org/x/sys/unix"
)

func sample(id string) *audit.Event {
	out := `{"intent":"<b>billing</b> & more"}`
	return &audit.Event{
		Time:        time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC),
		RequestID:   id,
		Route:       "classify",
		Outcome:     audit.OutcomeValid,
		Status:      200,
		DurationMS:  12.5,
		Prompt:      &audit.Ref{Name: "classify", SHA256: strings.Repeat("a", 64)},
		Contract:    &audit.Ref{Name: "classify_v1", SHA256: strings.Repeat("b", 64)},
		InputSHA256: strings.Repeat("c", 64),
		Attempts: []audit.Attempt{{
			Attempt: 1, Temperature: 0.7, FinishReason: "stop", UpstreamStatus: 200, LatencyMS: 10.25,
			Usage:        audit.Usage{PromptTokens: 11, CompletionTokens: 7, TotalTokens: 18},
			Violations:   []contracts.Violation{{Kind: "policy", Path: "/intent", Rule: "label", Message: "not a label"}},
			OutputSHA256: strings.Repeat("d", 64), Output: &out, Tries: 3,
		}},
		Usage:  audit.Usage{PromptTokens: 11, CompletionTokens: 7, TotalTokens: 18},
		Budget: &audit.Budget{MaxTotalTokens: 1000, Used: 18},
	}
}

// fileSink opens the file sink on path; the test fails when it does not
// open.
func fileSink(tb testing.TB, path string) audit.Sink {
	tb.Helper()
	s, err := audit.New("file", path)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestEventJSON: the line's field names are the documented audit format
// that log pipelines parse, so none may be renamed; output and input
// appear only when set (include_content); transport tries are not written;
// HTML characters are not escaped; one line, newline-terminated.
func TestEventJSON(t *testing.T) {
	var buf bytes.Buffer
	s := audit.NewWriter(&buf)
	if err := s.Write(sample("req_1")); err != nil {
		t.Fatal(err)
	}
	ev := sample("req_2")
	ev.Attempts[0].Output = nil
	ev.ErrorCode = "contract_violation"
	ev.Input = json.RawMessage(`{"subject":"s"}`)
	if err := s.Write(ev); err != nil {
		t.Fatal(err)
	}
	raw := buf.String()
	lines := strings.Split(strings.TrimSuffix(raw, "\n"), "\n")
	if !strings.HasSuffix(raw, "\n") || len(lines) != 2 {
		t.Fatalf("want 2 newline-terminated lines, got %q", raw)
	}
	if !strings.Contains(lines[0], `<b>billing</b> & more`) {
		t.Errorf("HTML escaped: %s", lines[0])
	}
	var m1, m2 map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m1); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &m2); err != nil {
		t.Fatal(err)
	}
	base := []string{"attempts", "budget", "contract", "duration_ms", "event", "input_sha256", "outcome", "prompt", "request_id",
		"route", "status", "time", "usage"}
	if got := keys(m1); !reflect.DeepEqual(got, base) {
		t.Errorf("event keys %v, want %v", got, base)
	}
	with := append(append([]string{}, base...), "error_code", "input")
	sort.Strings(with)
	if got := keys(m2); !reflect.DeepEqual(got, with) {
		t.Errorf("event keys %v, want %v", got, with)
	}
	attemptKeys := []string{"attempt", "finish_reason", "latency_ms", "output_sha256", "shortened", "temperature",
		"upstream_status", "usage", "violations"}
	a1 := m1["attempts"].([]any)[0].(map[string]any)
	a2 := m2["attempts"].([]any)[0].(map[string]any)
	if got := keys(a2); !reflect.DeepEqual(got, attemptKeys) {
		t.Errorf("attempt keys %v, want %v", got, attemptKeys)
	}
	withOut := append(append([]string{}, attemptKeys...), "output")
	sort.Strings(withOut)
	if got := keys(a1); !reflect.DeepEqual(got, withOut) {
		t.Errorf("attempt keys %v, want %v", got, withOut)
	}
	if m1["time"] != "2026-01-02T03:04:05.000006Z" || m1["duration_ms"] != 12.5 || a1["latency_ms"] != 10.25 {
		t.Errorf("time/durations: %v %v %v", m1["time"], m1["duration_ms"], a1["latency_ms"])
	}
	if got := keys(m1["prompt"].(map[string]any)); !reflect.DeepEqual(got, []string{"name", "sha256"}) {
		t.Errorf("prompt keys %v", got)
	}
	if got := keys(m1["budget"].(map[string]any)); !reflect.DeepEqual(got, []string{"max_total_tokens", "used"}) {
		t.Errorf("budget keys %v", got)
	}
	if got := keys(m1["usage"].(map[string]any)); !reflect.DeepEqual(got, []string{"completion_tokens", "prompt_tokens", "total_tokens"}) {
		t.Errorf("usage keys %v", got)
	}
	if got := keys(a1["violations"].([]any)[0].(map[string]any)); !reflect.DeepEqual(got, []string{"kind", "message", "path", "rule"}) {
		t.Errorf("violation keys %v", got)
	}
	if strings.Contains(raw, "ries") {
		t.Errorf("transport tries were written: %s", raw)
	}
}

func TestUsageAdd(t *testing.T) {
	got := audit.Usage{1, 2, 3}.Add(audit.Usage{10, 20, 30})
	if got != (audit.Usage{11, 22, 33}) {
		t.Errorf("Add = %+v", got)
	}
}

// TestFileSinkAppends: the file sink appends to what the file holds, one
// whole line per event, and each line is in the file (handed to the OS)
// when Write returns: another descriptor reads it at once.
func TestFileSinkAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, []byte(`{"request_id":"earlier"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := fileSink(t, path)
	for i := range 3 {
		id := fmt.Sprintf("req_%d", i)
		if err := s.Write(sample(id)); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if !strings.HasSuffix(string(b), "\n") || len(lines) != i+2 || !strings.Contains(lines[i+1], `"request_id":"`+id+`"`) {
			t.Fatalf("after Write %d the file holds %q", i, b)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	b, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(b), `{"request_id":"earlier"}`+"\n") {
		t.Errorf("existing content not kept: %q", b)
	}
	if err := s.Write(sample("late")); err == nil {
		t.Error("Write after Close succeeded")
	}
}

func TestFileSinkCreatesPrivateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.jsonl")
	s := fileSink(t, path)
	defer s.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("audit file mode %v: readable by others", fi.Mode().Perm())
	}
	if _, err := audit.New("file", filepath.Join(t.TempDir(), "missing-dir", "a.jsonl")); err == nil {
		t.Error("opening a file in a missing directory succeeded")
	}
}

// TestFileSinkConcurrentWriters: many goroutines on one sink, and two
// sinks on the same file (as two processes would), writing events far
// larger than a pipe buffer: every line is whole, none is lost.
func TestFileSinkConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	s1 := fileSink(t, path)
	s2 := fileSink(t, path)
	const goroutines, each = 16, 40
	big := json.RawMessage(`"` + strings.Repeat("x", 96<<10) + `"`)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			sink := s1
			if g%2 == 1 {
				sink = s2
			}
			for i := range each {
				ev := sample(fmt.Sprintf("req_%d_%d", g, i))
				if i%3 == 0 {
					ev.Input = big
				}
				if err := sink.Write(ev); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(s1.Close(), s2.Close()); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			if len(line) != 0 {
				t.Fatalf("unterminated last line of %d bytes", len(line))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var ev audit.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("interleaved or torn line (%d bytes): %v", len(line), err)
		}
		if seen[ev.RequestID] {
			t.Fatalf("duplicate %s", ev.RequestID)
		}
		seen[ev.RequestID] = true
	}
	if len(seen) != goroutines*each {
		t.Fatalf("%d events in the file, want %d", len(seen), goroutines*each)
	}
}

// TestCloseFsyncs: Close syncs the file before closing it. /dev/null
// refuses fsync (EINVAL), so a Close that syncs reports it.
func TestCloseFsyncs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("relies on Linux refusing fsync on /dev/null")
	}
	s := fileSink(t, "/dev/null")
	if err := s.Write(sample("req_1")); err != nil {
		t.Fatal(err)
	}
	err := s.Close()
	if err == nil || !strings.Contains(err.Error(), "sync") {
		t.Fatalf("Close = %v, want the fsync error", err)
	}
	if err := s.Write(sample("req_2")); err == nil {
		t.Error("the file stayed open after a failed sync")
	}
}

// TestDiscards: only sink none says it drops events, behind a Switch too,
// and a Switch says so no longer once reopened elsewhere.
func TestDiscards(t *testing.T) {
	none, err := audit.New(audit.SinkNone, "")
	if err != nil {
		t.Fatal(err)
	}
	if !audit.Discards(none) {
		t.Error("sink none: Discards false")
	}
	if audit.Discards(audit.NewWriter(io.Discard)) {
		t.Error("a writer sink: Discards true")
	}
	sw, err := audit.NewSwitch(audit.SinkNone, "")
	if err != nil {
		t.Fatal(err)
	}
	if !audit.Discards(sw) {
		t.Error("Switch on none: Discards false")
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if _, err := sw.Reopen(audit.SinkFile, path); err != nil {
		t.Fatal(err)
	}
	if audit.Discards(sw) {
		t.Error("Switch reopened on a file: Discards true")
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestNoneSink(t *testing.T) {
	dir := t.TempDir()
	s, err := audit.New("none", filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.Write(sample("req_1")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("sink none created %v", ents)
	}
}

func TestStdoutSink(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	for _, name := range []audit.SinkKind{"stdout", ""} { // "" is the default
		s, err := audit.New(name, "")
		if err != nil {
			os.Stdout = old
			t.Fatal(err)
		}
		if err := s.Write(sample("req_" + string(name))); err != nil {
			t.Error(err)
		}
		if err := s.Close(); err != nil { // never closes stdout
			t.Error(err)
		}
	}
	os.Stdout = old
	w.Close()
	b, _ := io.ReadAll(r)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"request_id":"req_stdout"`) || !strings.Contains(lines[1], `"request_id":"req_"`) {
		t.Errorf("stdout got %q", b)
	}
}

func TestUnknownSink(t *testing.T) {
	if _, err := audit.New("syslog", ""); err == nil || !strings.Contains(err.Error(), "syslog") {
		t.Errorf("New(syslog) = %v", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriterSinkError(t *testing.T) {
	if err := audit.NewWriter(failWriter{}).Write(sample("req_1")); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Write = %v, want the writer's error", err)
	}
}

// BenchmarkFileSinkWrite: what one audit line costs on the request path.
func BenchmarkFileSinkWrite(b *testing.B) {
	s := fileSink(b, filepath.Join(b.TempDir(), "audit.jsonl"))
	defer s.Close()
	ev := sample("req_bench")
	for b.Loop() {
		if err := s.Write(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSwitchReopen: writers keep writing while the switch moves from one
// file to another and to none: every event written before the move to
// none is in exactly one of the files, whole; an unchanged target does not
// reopen; a bad target keeps the current sink.
func TestSwitchReopen(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	s, err := audit.NewSwitch("file", a)
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := s.Reopen("file", a); changed || err != nil {
		t.Fatalf("same target: changed %v, %v", changed, err)
	}
	if _, err := s.Reopen("file", filepath.Join(dir, "missing", "x.jsonl")); err == nil {
		t.Fatal("a file in a missing directory opened")
	}
	var mu sync.Mutex
	written := map[string]bool{}
	stop := testkit.Repeat(8, func(g, i int) bool {
		id := fmt.Sprintf("req_%d_%d", g, i)
		if err := s.Write(sample(id)); err != nil {
			t.Error(err)
			return false
		}
		mu.Lock()
		written[id] = true
		mu.Unlock()
		return true
	})
	// Until lines went to each file: a fixed sleep left a empty on a
	// loaded machine (the writers had not run yet).
	waitWritten := func(n int) {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			mu.Lock()
			k := len(written)
			mu.Unlock()
			if k > n {
				return
			}
		}
	}
	waitWritten(0)
	if changed, err := s.Reopen("file", b); !changed || err != nil {
		t.Fatalf("to b: changed %v, %v", changed, err)
	}
	mu.Lock()
	n := len(written)
	mu.Unlock()
	waitWritten(n + 32) // past the writes in flight at the switch
	stop()
	if _, err := s.Reopen("none", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(sample("after")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	perFile := map[string]int{}
	for _, p := range []string{a, b} {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
			var ev audit.Event
			if err := json.Unmarshal(line, &ev); err != nil {
				t.Fatalf("%s: torn line %q: %v", p, line, err)
			}
			seen[ev.RequestID]++
			perFile[p]++
		}
	}
	if perFile[a] == 0 || perFile[b] == 0 {
		t.Errorf("lines per file %v: want both files used", perFile)
	}
	for id := range written {
		if seen[id] != 1 {
			t.Errorf("%s is in the files %d times", id, seen[id])
		}
	}
	if len(seen) != len(written) {
		t.Errorf("%d lines in the files, %d written", len(seen), len(written))
	}
}

// TestSwitchFollow: Follow does nothing while audit.path names the file
// being written; once the file is moved away it opens a new one at the
// path, and the moved file keeps what was written before; a path that
// cannot be opened keeps the current sink; after Close it opens nothing.
func TestSwitchFollow(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "audit.jsonl")
	s, err := audit.NewSwitch(audit.SinkFile, p)
	if err != nil {
		t.Fatal(err)
	}
	write := func(id string) {
		t.Helper()
		if err := s.Write(sample(id)); err != nil {
			t.Fatal(err)
		}
	}
	follow := func(want bool) {
		t.Helper()
		path, opened, err := s.Follow()
		if path != p || opened != want || err != nil {
			t.Fatalf("Follow: %q, opened %v, %v; want %q, opened %v", path, opened, err, p, want)
		}
	}
	ids := func(path string) string {
		t.Helper()
		var got []string
		for _, line := range strings.Split(strings.TrimSuffix(readAll(t, path), "\n"), "\n") {
			var ev audit.Event
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatalf("%s: line %q: %v", path, line, err)
			}
			got = append(got, ev.RequestID)
		}
		return strings.Join(got, " ")
	}
	write("a")
	follow(false)
	if err := os.Rename(p, p+".1"); err != nil {
		t.Fatal(err)
	}
	write("b") // moved, not yet followed: to the moved file
	follow(true)
	follow(false)
	write("c")
	if got := ids(p + ".1"); got != "a b" {
		t.Errorf("moved file: %s, want a b", got)
	}
	if got := ids(p); got != "c" {
		t.Errorf("audit.path: %s, want c", got)
	}

	// The directory gone: the file cannot be opened again, the lines go
	// on to the open (unlinked) file, and Follow says why each time.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, opened, err := s.Follow(); opened || err == nil {
		t.Fatalf("Follow with the directory gone: opened %v, %v", opened, err)
	}
	write("d")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, opened, err := s.Follow(); opened || err != nil {
		t.Fatalf("Follow after Close: opened %v, %v", opened, err)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file at audit.path after Close: %v", err)
	}
}

func readAll(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCloseDoesNotWaitForAStuckWrite: a write that does not return (here
// into a FIFO whose reader reads nothing) holds up neither a reload's
// Reopen nor Close: each returns after CloseWait with ErrCloseDeferred,
// the new sink takes the next lines at once, and the stuck line is not
// cut: the old file is closed once it returns. Before, Close waited for
// the write however long it took: a reload hung (and with it every later
// reload), and so did serve's exit after the drain.
func TestCloseDoesNotWaitForAStuckWrite(t *testing.T) {
	dir := t.TempDir()
	fifo, next := filepath.Join(dir, "audit.fifo"), filepath.Join(dir, "next.jsonl")
	r := testkit.StuckFIFO(t, fifo)
	rfd := int(r.Fd())
	s, err := audit.NewSwitch(audit.SinkFile, fifo)
	if err != nil {
		t.Fatal(err)
	}
	big := sample("stuck")
	big.Input = json.RawMessage(`"` + strings.Repeat("x", 64<<10) + `"`) // more than the pipe holds
	stuck := make(chan error, 1)
	go func() { stuck <- s.Write(big) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if n, err := unix.IoctlGetInt(rfd, unix.TIOCINQ); err == nil && n == 4096 {
			break // the pipe is full: the write is stuck
		}
		if time.Now().After(deadline) {
			t.Fatal("the pipe never filled")
		}
	}

	type result struct {
		changed bool
		err     error
	}
	reopened := make(chan result, 1)
	start := time.Now()
	go func() { c, err := s.Reopen(audit.SinkFile, next); reopened <- result{c, err} }()
	select {
	case res := <-reopened:
		if !res.changed || !errors.Is(res.err, audit.ErrCloseDeferred) {
			t.Fatalf("Reopen: changed %v, %v; want true, ErrCloseDeferred", res.changed, res.err)
		}
		if took := time.Since(start); took > audit.CloseWait+2*time.Second {
			t.Errorf("Reopen took %v, want about CloseWait (%v)", took, audit.CloseWait)
		}
	case <-time.After(audit.CloseWait + 5*time.Second):
		t.Fatal("Reopen did not return: it waits for the stuck write")
	}
	if err := s.Write(sample("after")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, next); !strings.Contains(got, `"request_id":"after"`) {
		t.Errorf("the line after the reopen is not in the new file: %q", got)
	}

	// The reader reads again: the stuck line arrives whole, then EOF (the
	// old sink closed its file once the write returned).
	if err := unix.SetNonblock(rfd, false); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-stuck; err != nil {
		t.Errorf("the stuck write: %v", err)
	}
	var ev audit.Event
	if err := json.Unmarshal(got, &ev); err != nil || ev.RequestID != "stuck" {
		t.Errorf("the FIFO held %d bytes, not the stuck line whole: %v", len(got), err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
