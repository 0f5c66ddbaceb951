package openaigo_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Fake keys only: the client's (checked by contractd) and the upstream's
// (sent by contractd to the fake upstream).
const (
	clientKey   = "sk-test-e2e-client"
	upstreamKey = "sk-test-e2e-upstream"

	goodRoute = "review-sentiment"
	badRoute  = "review-always-bad"
	text      = "The delivery was fast and the food was great."
	// goodContent is what the fake upstream answers for the model fake-good.
	goodContent = `{"sentiment":"positive","summary":"Fast delivery and great food."}`
)

var binPath string // the contractd binary under test

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	bin, _, cleanup, err := testkit.MainBinary(filepath.Join("..", ".."), "") // the product's module root
	defer cleanup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "openaigo:", err)
		return 1
	}
	binPath = bin
	return m.Run()
}

// upstream is a fake OpenAI upstream; the route's upstream model decides
// the reply, as in the e2e suite's byModel:
//
//	fake-good: a valid sentiment object
//	fake-slow: the same after slowDelay
//	fake-500:  HTTP 500
//	any other: prose, never valid (every attempt fails: needs_review)
func upstream(t *testing.T) *testkit.Upstream {
	return testkit.NewUpstream(t, func(w http.ResponseWriter, r *http.Request, c *testkit.Call) {
		model, _ := c.JSON["model"].(string)
		content := "Sure! The sentiment is positive, I think."
		if model == "fake-raw" && c.JSON["stream"] == true { // a passthrough stream
			w.Header().Set("Content-Type", "text/event-stream")
			for _, d := range []string{`{"role":"assistant","content":""}`, `{"content":"raw "}`, `{"content":"text"}`} {
				fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-raw\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"fake-raw-2024-01-01\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", d)
				w.(http.Flusher).Flush()
			}
			fmt.Fprint(w, "data: {\"id\":\"chatcmpl-raw\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"fake-raw-2024-01-01\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
			return
		}
		switch model {
		case "fake-500":
			testkit.Reply(w, http.StatusInternalServerError, []byte(`{"error":{"message":"boom","type":"server_error","code":null,"param":null}}`))
			return
		case "fake-slow":
			select {
			case <-time.After(slowDelay):
			case <-r.Context().Done():
				return
			}
			content = goodContent
		case "fake-good":
			content = goodContent
		case "fake-raw":
			content = "raw text"
		}
		testkit.Reply(w, http.StatusOK, testkit.Completion{ID: "chatcmpl-fake", Model: model + "-2024-01-01",
			Content: content, PromptTokens: 50, CompletionTokens: 10}.JSON())
	})
}

const slowDelay = 2 * time.Second

// served is contractd in front of a fake upstream.
type served struct {
	up   *testkit.Upstream
	d    *testkit.Daemon
	base string // the API's base URL, ending in /v1
}

// serve starts contractd with the e2e suites' config (../testdata), server
// settings added under server: (YAML lines indented two spaces) and
// routes appended to its routes list.
func serve(t *testing.T, server, routes string) *served {
	t.Helper()
	up := upstream(t)
	b, err := os.ReadFile(filepath.Join("..", "testdata", "contractd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	free := testkit.FreeAddrs(t, 2)
	api, admin := free[0], free[1]
	cfg := strings.ReplaceAll(string(b), "@UPSTREAM@", up.URL())
	for old, new := range map[string]string{
		"  listen: 127.0.0.1:0\n":              "  listen: " + api + "\n",
		"  admin_listen: 127.0.0.1:0\n":        "  admin_listen: " + admin + "\n",
		"  api_keys_env: CONTRACTD_API_KEYS\n": "  api_keys_env: CONTRACTD_API_KEYS\n" + server,
	} {
		if !strings.Contains(cfg, old) {
			t.Fatalf("the e2e config has no %q to edit", old)
		}
		cfg = strings.Replace(cfg, old, new, 1)
	}
	path := filepath.Join(t.TempDir(), "contractd.yaml")
	if err := os.WriteFile(path, []byte(cfg+routes), 0o644); err != nil {
		t.Fatal(err)
	}
	d := testkit.StartDaemon(t, binPath, path, []string{"CONTRACTD_API_KEYS=" + clientKey, "OPENAI_API_KEY=" + upstreamKey}, api, admin)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("contractd log:\n%s", d.Log)
		}
		if strings.Contains(d.Log.String(), clientKey) || strings.Contains(d.Log.String(), upstreamKey) {
			t.Errorf("a key was written to contractd's log")
		}
	})
	return &served{up: up, d: d, base: "http://" + api + "/v1"}
}

// client is the official SDK pointed at contractd, with no retries unless
// opts say otherwise.
func (s *served) client(opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(s.base), option.WithAPIKey(clientKey),
		option.WithMaxRetries(0), option.WithRequestTimeout(20 * time.Second),
	}, opts...)...)
}

// exchanges records every HTTP exchange the SDK makes (each retry too).
type exchanges struct {
	mu   sync.Mutex
	list []exchange
}

type exchange struct {
	at         time.Time
	status     int
	retryCount string // the request's X-Stainless-Retry-Count
	idem       string // the request's Idempotency-Key
	header     http.Header
}

func (x *exchanges) middleware() option.RequestOption {
	return option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(r)
		e := exchange{at: time.Now(), retryCount: r.Header.Get("X-Stainless-Retry-Count"), idem: r.Header.Get("Idempotency-Key")}
		if res != nil {
			e.status, e.header = res.StatusCode, res.Header.Clone()
		}
		x.mu.Lock()
		x.list = append(x.list, e)
		x.mu.Unlock()
		return res, err
	})
}

func (x *exchanges) all() []exchange {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]exchange(nil), x.list...)
}

func ctx20(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// input is the route's input object as the last user message.
func input(s string) string { return `{"text": ` + fmt.Sprintf("%q", s) + `}` }

// routeSchema is the contract schema of the e2e config's routes.
func routeSchema() map[string]any {
	return map[string]any{
		"type":                 "object",
		"required":             []any{"sentiment", "summary"},
		"additionalProperties": false,
		"properties": map[string]any{
			"sentiment": map[string]any{"type": "string"},
			"summary":   map[string]any{"type": "string", "maxLength": 200},
		},
	}
}
