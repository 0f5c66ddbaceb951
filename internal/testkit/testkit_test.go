package testkit_test

import (
	"context"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/internal/testkit"
)

func TestUpstreamRecordsAndScripts(t *testing.T) {
	up := testkit.NewUpstream(t, func(w http.ResponseWriter, r *http.Request, c *testkit.Call) {
		if c.N == 1 {
			testkit.Reply(w, 503, nil)
			return
		}
		testkit.Reply(w, 200, testkit.Completion{ID: "x", Model: "m", Content: "hi", PromptTokens: 2, CompletionTokens: 1}.JSON())
	})
	for i, want := range []int{503, 200} {
		req, _ := http.NewRequest(http.MethodPost, up.URL()+"/chat/completions",
			strings.NewReader(`{"model":"m","temperature":0.5,"messages":[{"role":"user","content":"q"}]}`))
		testkit.SetHeaders(req.Header, "Authorization: Bearer k", "X-Drop: v", "X-Drop:")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("call %d: status %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	calls := up.Calls()
	if up.Hits() != 2 || len(calls) != 2 || up.Peak() != 1 {
		t.Fatalf("hits %d calls %d peak %d", up.Hits(), len(calls), up.Peak())
	}
	c := calls[1]
	if c.N != 2 || c.Path != "/v1/chat/completions" || c.Method != http.MethodPost || c.Temperature() != 0.5 ||
		c.Messages()[0]["content"] != "q" || c.Header.Get("Authorization") != "Bearer k" || c.Header.Get("X-Drop") != "" {
		t.Errorf("call recorded as %+v", c)
	}
	up.SetQuiet(true)
	resp, err := http.Post(up.URL(), "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if up.Hits() != 3 || len(up.Calls()) != 2 {
		t.Errorf("quiet: hits %d calls %d", up.Hits(), len(up.Calls()))
	}
}

func TestUpstreamHang(t *testing.T) {
	var up *testkit.Upstream
	up = testkit.NewUpstream(t, func(w http.ResponseWriter, r *http.Request, c *testkit.Call) { up.Hang(r) })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, up.URL(), nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("a hung upstream answered")
	}
	up.WaitCanceled(t, 1, 2*time.Second)
	up.Close()
	up.Close() // twice is fine
	select {
	case <-up.Done():
	default:
		t.Error("Done not closed by Close")
	}
}

func TestCompletionJSON(t *testing.T) {
	got := string(testkit.Completion{ID: "chatcmpl-1", Model: "m-1", Fingerprint: "fp", Content: `{"a":1}`,
		Finish: "length", Logprobs: true, PromptTokens: 3, CompletionTokens: 4}.JSON())
	want := `{"choices":[{"finish_reason":"length","index":0,"logprobs":null,"message":{"content":"{\"a\":1}","role":"assistant"}}],` +
		`"created":1700000000,"id":"chatcmpl-1","model":"m-1","object":"chat.completion","system_fingerprint":"fp",` +
		`"usage":{"completion_tokens":4,"prompt_tokens":3,"total_tokens":7}}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if plain := string(testkit.Completion{Model: "m"}.JSON()); strings.Contains(plain, "logprobs") ||
		strings.Contains(plain, "system_fingerprint") || !strings.Contains(plain, `"finish_reason":"stop"`) {
		t.Errorf("defaults: %s", plain)
	}
}

func TestAuditSinks(t *testing.T) {
	var s testkit.AuditSink
	_ = s.Write(&audit.Event{RequestID: "req_1"})
	if ev := s.WaitEvent(t, "req_1"); ev.RequestID != "req_1" || !strings.Contains(s.Raw(), `"req_1"`) || len(s.Events()) != 1 {
		t.Errorf("AuditSink: %+v %s", ev, s.Raw())
	}
	var b testkit.SyncBuffer
	w := audit.NewWriter(&b)
	_ = w.Write(&audit.Event{RequestID: "req_2"})
	b.Write([]byte("not json\n"))
	if evs := b.WaitAuditEvents(t, 1); len(evs) != 1 || evs[0].RequestID != "req_2" {
		t.Errorf("SyncBuffer: %+v", evs)
	}
}

// A SinkWriter takes what a handler writes through ResponseController
// (deadlines, flushes) without an error, as a connection's writer does,
// and an in-memory JSONResponse reads back as sent.
func TestSinkWriterAndJSONResponse(t *testing.T) {
	w := testkit.NewSinkWriter()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
			t.Errorf("SetReadDeadline: %v", err)
		}
		if err := rc.SetWriteDeadline(time.Now().Add(time.Second)); err != nil {
			t.Errorf("SetWriteDeadline: %v", err)
		}
		w.Header().Set("X-A", "1")
		w.WriteHeader(201)
		_, _ = w.Write([]byte("hello"))
		if err := rc.Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
	})
	req, _ := http.NewRequest(http.MethodPost, "/", nil)
	h.ServeHTTP(w, req)
	if w.Status != 201 || w.N != 5 || w.H.Get("X-A") != "1" {
		t.Errorf("after a request: %d, %d bytes, %v", w.Status, w.N, w.H)
	}
	w.Reset()
	if w.Status != 0 || w.N != 0 || len(w.H) != 0 || w.H == nil {
		t.Errorf("after Reset: %d, %d bytes, %v", w.Status, w.N, w.H)
	}
	resp := testkit.JSONResponse(req, []byte(`{"a":1}`))
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" ||
		resp.ContentLength != 7 || string(body) != `{"a":1}` || resp.Request != req {
		t.Errorf("JSONResponse: %+v %s", resp, body)
	}
}

func TestOr(t *testing.T) {
	if testkit.Or("", "d") != "d" || testkit.Or("v", "d") != "v" || testkit.Or(0, 4096) != 4096 || testkit.Or(7, 4096) != 7 {
		t.Error("Or")
	}
}

// TestOnlyTestsImport: testkit is test support; no non-test file of the
// module may import it or its subpackages.
func TestOnlyTestsImport(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	const self = "github.com/contractd/contractd/internal/testkit"
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.HasPrefix(p, filepath.Join(root, "internal", "testkit")+string(filepath.Separator)) {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == self || strings.HasPrefix(path, self+"/") {
				t.Errorf("%s imports %s: only tests may", p, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The addresses FreeAddrs gives at once are all different.
func TestFreeAddrsDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, a := range testkit.FreeAddrs(t, 200) {
		if seen[a] {
			t.Fatalf("%s given twice", a)
		}
		seen[a] = true
	}
}
