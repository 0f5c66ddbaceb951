//go:build linux

// Command soaklong is `make soak-long` (scripts/soak-long.sh): a low-rate,
// long-running soak of the contractd binary that looks for anything growing
// without bound (docs/benchmarks.md, "Limits under load").
//
// It starts a fake upstream, a webhook receiver that fails about half the
// deliveries, and one contractd (-mode sqlite) or -replicas contractd on
// PostgreSQL and Redis (-mode replicas, -pg and -redis), with an audit file,
// client keys, a rate limit and a 1m retention. It sends a steady mix at
// -rate events a second (the hot key's bursts and the unknown-name probes
// add requests: about 1.5 x -rate requests in all): valid chat and
// Responses answers, streamed and not, needs_review (422, stored),
// passthrough streams read whole and left mid-stream, clients leaving a slow
// request, long polls that time out and that the client cancels, bursts on
// one key (429), unknown model, route and key names (a new one each time),
// and admin list, get, approve, reject, rerun and export (read whole, and
// left). Every 30 s the config is reloaded, alternately by a file rename
// that renames one route and by SIGHUP.
//
// Every -sample it writes one CSV line per process to OUT/samples.csv:
// goroutines, heap, the heap's next GC target (twice the live heap at the
// last collection), heap kept from the OS, RSS (anonymous and file-backed),
// fds, threads, the sqlite file and its WAL, the spool, the audit file,
// outbox and review rows, Redis keys, PostgreSQL connections, dedupe
// entries and metric series. After the traffic it idles 35 s, samples once
// more, keeps each process's last /metrics scrape (OUT/metrics-N.txt),
// prints a first / @120s / last-under-load / max / idle table, and stops
// each process with SIGQUIT, so its goroutines' stacks end OUT/rN/stderr.log.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

var (
	bin      = flag.String("bin", "bin/contractd", "contractd binary")
	mode     = flag.String("mode", "sqlite", "sqlite | replicas")
	replicas = flag.Int("replicas", 2, "replicas (mode replicas)")
	dur      = flag.Duration("dur", 17*time.Minute, "soak duration")
	rate     = flag.Float64("rate", 25, "requests per second in total")
	outDir   = flag.String("out", "", "output directory (default: a new temporary one)")
	pgDSN    = flag.String("pg", "", "postgres DSN (mode replicas)")
	redisURL = flag.String("redis", "", "redis URL (mode replicas)")
	every    = flag.Duration("sample", 30*time.Second, "sample interval")
)

const goodContent = `{"sentiment":"positive","summary":"Fast delivery and great food."}`

type proc struct {
	i      int
	dir    string
	cfg    string
	listen string
	admin  string
	cmd    *exec.Cmd
}

var (
	gen     atomic.Int64 // reload generation: the dyn route's name
	pending = struct {
		sync.Mutex
		ids []string
	}{}
	counts           sync.Map // outcome -> *atomic.Int64
	hookOK, hookFail atomic.Int64
)

func count(k string) {
	v, _ := counts.LoadOrStore(k, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func main() {
	flag.Parse()
	log.SetFlags(log.Ltime)
	if *mode != "sqlite" && *mode != "replicas" {
		log.Fatalf("-mode %q: sqlite or replicas", *mode)
	}
	if *mode == "replicas" && (*pgDSN == "" || *redisURL == "") {
		log.Fatal("-mode replicas needs -pg and -redis")
	}
	if *outDir == "" {
		d, err := os.MkdirTemp("", "contractd-soak-long-")
		if err != nil {
			log.Fatal(err)
		}
		*outDir = d
	} else if err := os.MkdirAll(*outDir, 0o755); err != nil {
		log.Fatal(err)
	}
	log.Printf("output in %s", *outDir)
	up := startUpstream()
	hook := startHook()
	n := 1
	if *mode == "replicas" {
		n = *replicas
	}
	var ps []*proc
	for i := range n {
		ps = append(ps, startProc(i, up, hook))
	}
	defer func() {
		for _, p := range ps {
			// SIGQUIT: the Go runtime dumps every goroutine's stack to
			// stderr (the log file) and exits.
			p.cmd.Process.Signal(syscall.SIGQUIT)
			done := make(chan struct{})
			go func() { p.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				p.cmd.Process.Kill()
				<-done
			}
		}
	}()
	for _, p := range ps {
		waitReady(p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *dur)
	defer cancel()

	csv, err := os.Create(filepath.Join(*outDir, "samples.csv"))
	if err != nil {
		log.Fatal(err)
	}
	defer csv.Close()
	fmt.Fprintln(csv, header)
	var lines []string
	var sent atomic.Int64
	start := time.Now()
	sample := func() {
		for _, p := range ps {
			line := sampleProc(p, time.Since(start), sent.Load())
			lines = append(lines, line)
			fmt.Fprintln(csv, line)
			log.Println(line)
		}
		csv.Sync()
	}
	sample()

	// Reloads every 30 s: alternately a file rewrite (atomic rename) with
	// a new dyn route name, and a SIGHUP.
	go func() {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for k := 0; ; k++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if k%2 == 0 {
				g := gen.Add(1)
				for _, p := range ps {
					writeCfg(p, up, hook, g)
				}
			} else {
				for _, p := range ps {
					p.cmd.Process.Signal(syscall.SIGHUP)
				}
			}
		}
	}()
	go func() {
		t := time.NewTicker(*every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				sample()
			}
		}
	}()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32, IdleConnTimeout: 20 * time.Second}}
	tick := time.NewTicker(time.Duration(float64(time.Second) / *rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	var seq int64
	inflight := make(chan struct{}, 200)
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
		}
		seq++
		p := ps[int(seq)%len(ps)]
		select {
		case inflight <- struct{}{}:
		default:
			count("skipped_inflight_cap")
			continue
		}
		sent.Add(1)
		wg.Add(1)
		go func(seq int64) {
			defer wg.Done()
			defer func() { <-inflight }()
			one(ctx, client, p, seq)
		}(seq)
	}
	wg.Wait()
	client.CloseIdleConnections()
	time.Sleep(35 * time.Second) // idle: let timers, conns and workers settle
	sample()
	// A last scrape of every process's metrics, kept whole.
	for _, p := range ps {
		b, _ := get("http://" + p.admin + "/metrics")
		os.WriteFile(filepath.Join(*outDir, fmt.Sprintf("metrics-%d.txt", p.i)), b, 0o644)
	}
	var sb strings.Builder
	counts.Range(func(k, v any) bool {
		fmt.Fprintf(&sb, "%s %d\n", k, v.(*atomic.Int64).Load())
		return true
	})
	fmt.Fprintf(&sb, "hook_ok %d\nhook_fail %d\n", hookOK.Load(), hookFail.Load())
	os.WriteFile(filepath.Join(*outDir, "counts.txt"), []byte(sb.String()), 0o644)
	log.Print(sb.String())
	fmt.Print(summary(lines, len(ps)))
	log.Printf("samples in %s", filepath.Join(*outDir, "samples.csv"))
}

const header = "t_s,replica,goroutines,heap_alloc_mb,heap_inuse_mb,next_gc_mb,heap_retained_mb,rss_mb,rss_anon_mb,rss_file_mb," +
	"fds,threads,db_kb,wal_kb,spool_b,audit_kb,outbox_rows,review_rows,redis_keys,pg_conns,dedupe_entries,series,reqs_sent"

// summary is, per process, each column's first sample, the first at or
// after 120 s (past warm-up), the last under load, the maximum and the
// sample after the idle pause. The lines are sampled in order, the last
// round after the pause.
func summary(lines []string, procs int) string {
	cols := strings.Split(header, ",")
	var b strings.Builder
	for i := range procs {
		var rows [][]float64
		for n, l := range lines {
			if n%procs != i {
				continue
			}
			var row []float64
			for _, f := range strings.Split(l, ",") {
				v, _ := strconv.ParseFloat(f, 64)
				row = append(row, v)
			}
			rows = append(rows, row)
		}
		if len(rows) < 3 {
			continue
		}
		warm := rows[0]
		for _, r := range rows {
			if r[0] >= 120 {
				warm = r
				break
			}
		}
		fmt.Fprintf(&b, "replica %d: %d samples over %.0f s\n%-17s %10s %10s %10s %10s %10s\n", i, len(rows), rows[len(rows)-1][0],
			"", "first", "@120s", "last load", "max", "idle")
		for c := 2; c < len(cols) && c < len(warm); c++ {
			mx := rows[0][c]
			for _, r := range rows {
				mx = max(mx, r[c])
			}
			fmt.Fprintf(&b, "%-17s %10g %10g %10g %10g %10g\n", cols[c], rows[0][c], warm[c], rows[len(rows)-2][c], mx, rows[len(rows)-1][c])
		}
	}
	return b.String()
}

// ---------------------------------------------------------------------------
// Traffic.

var keys = []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"}

func chatBody(model string, text string, stream bool) []byte {
	b, _ := json.Marshal(map[string]any{
		"model":    model,
		"stream":   stream,
		"messages": []map[string]string{{"role": "user", "content": `{"text":` + strconv.Quote(text) + `}`}},
	})
	return b
}

func respBody(model, text string, stream bool) []byte {
	b, _ := json.Marshal(map[string]any{"model": model, "stream": stream, "input": `{"text":` + strconv.Quote(text) + `}`})
	return b
}

func do(ctx context.Context, c *http.Client, method, url, key string, body []byte) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.Do(req)
}

func finish(kind string, resp *http.Response, err error) []byte {
	if err != nil {
		count(kind + ":err")
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	count(kind + ":" + strconv.Itoa(resp.StatusCode))
	return b
}

func one(ctx context.Context, c *http.Client, p *proc, seq int64) {
	key := keys[seq%int64(len(keys))]
	api := "http://" + p.listen
	adm := "http://" + p.admin
	text := fmt.Sprintf("review %d: the delivery was fast", seq%5000) // repeats: some dedupe
	r := rand.IntN(100)
	switch {
	case r < 20: // valid chat
		resp, err := do(ctx, c, "POST", api+"/v1/chat/completions", key, chatBody("good", text, false))
		finish("chat_valid", resp, err)
	case r < 26: // valid chat, streamed
		resp, err := do(ctx, c, "POST", api+"/v1/chat/completions", key, chatBody("good", text, true))
		finish("chat_stream", resp, err)
	case r < 30: // Responses API
		resp, err := do(ctx, c, "POST", api+"/v1/responses", key, respBody("good", text, seq%2 == 0))
		finish("responses", resp, err)
	case r < 40: // needs_review, stored
		resp, err := do(ctx, c, "POST", api+"/v1/chat/completions", key, chatBody("bad", fmt.Sprintf("bad %d", seq), seq%3 == 0))
		b := finish("needs_review", resp, err)
		var e struct {
			Error struct {
				Review struct{ ID string } `json:"review"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error.Review.ID != "" {
			pending.Lock()
			pending.ids = append(pending.ids, e.Error.Review.ID+"|"+key)
			if len(pending.ids) > 2000 {
				pending.ids = pending.ids[1000:]
			}
			pending.Unlock()
		}
	case r < 44: // passthrough stream read whole
		resp, err := do(ctx, c, "POST", api+"/v1/chat/completions", key, chatBody("pass", text, true))
		finish("pass_stream", resp, err)
	case r < 49: // passthrough stream, client leaves mid-stream (chat or responses)
		cctx, cancel := context.WithCancel(ctx)
		var body []byte
		path := "/v1/chat/completions"
		if seq%2 == 0 {
			body = chatBody("pass", text, true)
		} else {
			path = "/v1/responses"
			body = respBody("pass", text, true)
		}
		resp, err := do(cctx, c, "POST", api+path, key, body)
		if err != nil {
			count("pass_midstream:err")
			cancel()
			return
		}
		br := bufio.NewReader(resp.Body)
		br.ReadString('\n')
		cancel()
		resp.Body.Close()
		count("pass_midstream:left")
	case r < 53: // contract route, client leaves mid-request (slow upstream)
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		resp, err := do(cctx, c, "POST", api+"/v1/chat/completions", key, chatBody("slow", text, seq%2 == 0))
		finish("slow_left", resp, err)
		cancel()
	case r < 58: // long poll that times out
		if id, k := pick(); id != "" {
			resp, err := do(ctx, c, "GET", api+"/v1/reviews/"+id+"?wait=2s", k, nil)
			finish("poll_timeout", resp, err)
		}
	case r < 62: // long poll the client cancels
		if id, k := pick(); id != "" {
			cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			resp, err := do(cctx, c, "GET", api+"/v1/reviews/"+id+"?wait=50s", k, nil)
			finish("poll_cancel", resp, err)
			cancel()
		}
	case r < 66: // rate limited: a burst on the hot key
		for range 12 {
			resp, err := do(ctx, c, "POST", api+"/v1/chat/completions", "hot", chatBody("good", text, false))
			finish("hot", resp, err)
		}
	case r < 70: // distinct names: unknown model, unknown path route, unknown key
		resp, err := do(ctx, c, "POST", api+"/v1/chat/completions", key, chatBody(fmt.Sprintf("model-%d", seq), text, false))
		finish("unknown_model", resp, err)
		resp, err = do(ctx, c, "POST", api+fmt.Sprintf("/r/route-%d/v1/chat/completions", seq), key, chatBody("x", text, false))
		finish("unknown_route", resp, err)
		resp, err = do(ctx, c, "POST", api+"/v1/chat/completions", fmt.Sprintf("key-%d", seq), chatBody("good", text, false))
		finish("unknown_key", resp, err)
	case r < 74: // the route renamed at each reload
		resp, err := do(ctx, c, "POST", api+"/v1/chat/completions", key, chatBody(fmt.Sprintf("dyn-%d", gen.Load()), text, false))
		finish("dyn", resp, err)
	case r < 80: // approve / reject
		if id, _ := pick(); id != "" {
			if seq%2 == 0 {
				resp, err := do(ctx, c, "POST", adm+"/admin/reviews/"+id+"/approve", "admin", []byte(`{"output":`+goodContent+`,"reviewer":"soak"}`))
				finish("approve", resp, err)
			} else {
				resp, err := do(ctx, c, "POST", adm+"/admin/reviews/"+id+"/reject", "admin", []byte(`{"reviewer":"soak","note":"no"}`))
				finish("reject", resp, err)
			}
		}
	case r < 82:
		if id, _ := pick(); id != "" {
			resp, err := do(ctx, c, "POST", adm+"/admin/reviews/"+id+"/rerun", "admin", nil)
			finish("rerun", resp, err)
		}
	case r < 86:
		resp, err := do(ctx, c, "GET", adm+fmt.Sprintf("/admin/reviews?status=pending&limit=20&route=%s", []string{"bad", "good", fmt.Sprintf("dyn-%d", seq)}[seq%3]), "admin", nil)
		finish("list", resp, err)
	case r < 88:
		if seq%2 == 0 {
			resp, err := do(ctx, c, "GET", adm+"/admin/reviews/export?status=approved&since=1h", "admin", nil)
			finish("export", resp, err)
		} else { // an export the client leaves
			cctx, cancel := context.WithCancel(ctx)
			resp, err := do(cctx, c, "GET", adm+"/admin/reviews/export?status=rejected&since=24h", "admin", nil)
			if err == nil {
				resp.Body.Read(make([]byte, 100))
				resp.Body.Close()
			}
			cancel()
			count("export_left")
		}
	case r < 90:
		if id, _ := pick(); id != "" {
			resp, err := do(ctx, c, "GET", adm+"/admin/reviews/"+id, "admin", nil)
			finish("admin_get", resp, err)
		}
	case r < 92:
		resp, err := do(ctx, c, "GET", api+"/v1/models", key, nil)
		finish("models", resp, err)
	default: // valid chat on a path route
		resp, err := do(ctx, c, "POST", api+"/r/good/v1/chat/completions", key, chatBody("whatever", text, false))
		finish("chat_path", resp, err)
	}
}

func pick() (id, key string) {
	pending.Lock()
	defer pending.Unlock()
	if len(pending.ids) == 0 {
		return "", ""
	}
	s := pending.ids[rand.IntN(len(pending.ids))]
	id, key, _ = strings.Cut(s, "|")
	return id, key
}

// ---------------------------------------------------------------------------
// Fake upstream and webhook receiver.

func listen() (net.Listener, string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	return ln, ln.Addr().String()
}

func startUpstream() string {
	ln, addr := listen()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		content := goodContent
		switch req.Model {
		case "up-bad":
			content = "Sure! The sentiment is positive, I think."
		case "up-slow":
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
				return
			}
		case "up-pass":
			if req.Stream {
				streamSlowly(w, r, func(i int) string {
					return fmt.Sprintf("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"up-pass\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"},\"finish_reason\":null}]}\n\n", i)
				}, "data: [DONE]\n\n")
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": content}}},
			"usage": map[string]int{"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30},
		})
		w.Write(b)
	})
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		streamSlowly(w, r, func(i int) string {
			return fmt.Sprintf("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"delta\":\"w \"}\n\n", i)
		}, "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":10,\"response\":{}}\n\n")
	})
	go http.Serve(ln, mux)
	return "http://" + addr + "/v1"
}

// streamSlowly answers with an event stream as a slow model sends one:
// event(i) for i from 0 to 9, 150 ms apart, then last; it stops when the
// client goes.
func streamSlowly(w http.ResponseWriter, r *http.Request, event func(i int) string, last string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for i := range 10 {
		io.WriteString(w, event(i))
		w.(http.Flusher).Flush()
		select {
		case <-time.After(150 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	io.WriteString(w, last)
}

func startHook() string {
	ln, addr := listen()
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if rand.IntN(2) == 0 {
			hookFail.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		hookOK.Add(1)
	}))
	return "http://" + addr + "/hook"
}

// ---------------------------------------------------------------------------
// contractd processes.

func freeAddr() string {
	ln, addr := listen()
	ln.Close()
	return addr
}

func writeCfg(p *proc, up, hook string, g int64) {
	var review string
	if *mode == "replicas" {
		review = "review:\n  store: postgres\n  dsn_env: CONTRACTD_REVIEW_DSN\n"
	} else {
		review = "review:\n  store: sqlite\n  path: reviews.db\n"
	}
	review += "  retention: 1m\n  dedupe_window: 20s\n  webhook:\n    url: " + hook + "\n    secret_env: CONTRACTD_WEBHOOK_SECRET\n"
	rl := "  rate_limit: {requests_per_second: 5, burst: 8}\n"
	if *mode == "replicas" {
		rl = "  rate_limit: {requests_per_second: 5, burst: 8, store: redis, redis_url_env: CONTRACTD_REDIS_URL}\n"
	}
	route := func(name, model string) string {
		return fmt.Sprintf("  - name: %s\n    upstream: fake\n    model: %s\n    prompt: review\n    contract: sentiment_v1\n    temperature: 0.7\n    max_output_tokens: 200\n", name, model)
	}
	text := `server:
  listen: ` + p.listen + `
  admin_listen: ` + p.admin + `
  request_timeout: 20s
  shutdown_timeout: 5s
  api_keys_env: CONTRACTD_API_KEYS
  admin_keys_env: CONTRACTD_ADMIN_KEYS
` + rl + `
audit:
  sink: file
  path: audit.jsonl

upstreams:
  - name: fake
    base_url: ` + up + `
    api_key_env: OPENAI_API_KEY
    timeout: 10s
    max_retries: 0

labels:
  - name: sentiment
    values: [positive, negative, neutral]

prompts:
  - name: review
    input_schema:
      type: object
      required: [text]
      additionalProperties: false
      properties: {text: {type: string, maxLength: 2000}}
    example_input: {text: "The delivery was fast and the food was great."}
    system: |
      Classify the sentiment of one customer review. Allowed values: {{ join (labels "sentiment") ", " }}.
      Reply with one JSON object that matches this schema and nothing else:
      {{ schema }}
    user: |
      Review: {{ .Input.text }}

contracts:
  - name: sentiment_v1
    schema:
      type: object
      required: [sentiment, summary]
      additionalProperties: false
      properties:
        sentiment: {type: string}
        summary: {type: string, maxLength: 200}
    extraction: strict
    policies:
      labels: [{path: /sentiment, set: sentiment}]

` + review + `
routes:
` + route("good", "up-good") + route("bad", "up-bad") + route("slow", "up-slow") + route(fmt.Sprintf("dyn-%d", g), "up-good") +
		"  - name: pass\n    upstream: fake\n    model: up-pass\n    passthrough: true\n"
	tmp := p.cfg + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.Rename(tmp, p.cfg); err != nil {
		log.Fatal(err)
	}
}

func startProc(i int, up, hook string) *proc {
	dir := filepath.Join(*outDir, fmt.Sprintf("r%d", i))
	os.MkdirAll(dir, 0o755)
	p := &proc{i: i, dir: dir, cfg: filepath.Join(dir, "contractd.yaml"), listen: freeAddr(), admin: freeAddr()}
	writeCfg(p, up, hook, 0)
	logf, err := os.Create(filepath.Join(dir, "stderr.log"))
	if err != nil {
		log.Fatal(err)
	}
	p.cmd = exec.Command(*bin, "serve", "-c", p.cfg)
	p.cmd.Env = append(os.Environ(),
		"CONTRACTD_API_KEYS="+strings.Join(append(keys, "hot"), ","),
		"CONTRACTD_ADMIN_KEYS=admin",
		"CONTRACTD_WEBHOOK_SECRET=whsec-soak",
		"OPENAI_API_KEY=sk-fake",
		"CONTRACTD_REVIEW_DSN="+*pgDSN,
		"CONTRACTD_REDIS_URL="+*redisURL,
	)
	p.cmd.Stderr = logf
	p.cmd.Stdout = logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		log.Fatal(err)
	}
	return p
}

func waitReady(p *proc) {
	for range 300 {
		if b, err := get("http://" + p.admin + "/readyz"); err == nil && b != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	log.Fatalf("replica %d not ready", p.i)
}

func get(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s", resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// ---------------------------------------------------------------------------
// Sampling.

// fsize is p's size in units of div bytes, -1 when there is no such file.
func fsize(p string, div int64) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return -1
	}
	return st.Size() / div
}

func sampleProc(p *proc, since time.Duration, sent int64) string {
	pid := p.cmd.Process.Pid
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	var rssKB, anonKB, fileKB, threads int64
	for _, l := range strings.Split(string(status), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "VmRSS:" {
			rssKB, _ = strconv.ParseInt(f[1], 10, 64)
		}
		if len(f) >= 2 && f[0] == "RssAnon:" {
			anonKB, _ = strconv.ParseInt(f[1], 10, 64)
		}
		if len(f) >= 2 && f[0] == "RssFile:" {
			fileKB, _ = strconv.ParseInt(f[1], 10, 64)
		}
		if len(f) >= 2 && f[0] == "Threads:" {
			threads, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	m, _ := get("http://" + p.admin + "/metrics")
	var series int
	vals := map[string]float64{}
	for _, l := range strings.Split(string(m), "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		series++
		f := strings.Fields(l)
		if len(f) == 2 {
			v, _ := strconv.ParseFloat(f[1], 64)
			vals[f[0]] = v
		}
	}
	outbox, rows := int64(-1), int64(-1)
	rkeys, pgconns := int64(-1), int64(-1)
	if *mode == "replicas" {
		if p.i == 0 {
			rkeys = sqlCount("redis-cli", "-u", *redisURL, "dbsize")
			pgconns = sqlCount("psql", *pgDSN, "-Atc", "select count(*) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()")
			outbox = sqlCount("psql", *pgDSN, "-Atc", "select count(*) from webhook_outbox")
			rows = sqlCount("psql", *pgDSN, "-Atc", "select count(*) from reviews")
		}
	} else {
		db := filepath.Join(p.dir, "reviews.db")
		outbox = sqlCount("sqlite3", db, "select count(*) from webhook_outbox")
		rows = sqlCount("sqlite3", db, "select count(*) from reviews")
	}
	return fmt.Sprintf("%.0f,%d,%.0f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%.0f,%d,%d",
		since.Seconds(), p.i, vals["go_goroutines"], vals["go_memstats_heap_alloc_bytes"]/1e6, vals["go_memstats_heap_inuse_bytes"]/1e6,
		vals["go_memstats_next_gc_bytes"]/1e6, (vals["go_memstats_heap_sys_bytes"]-vals["go_memstats_heap_released_bytes"])/1e6,
		float64(rssKB)/1024, float64(anonKB)/1024, float64(fileKB)/1024, len(fds), threads,
		fsize(filepath.Join(p.dir, "reviews.db"), 1024), fsize(filepath.Join(p.dir, "reviews.db-wal"), 1024),
		fsize(filepath.Join(p.dir, "review-spool.jsonl"), 1), fsize(filepath.Join(p.dir, "audit.jsonl"), 1024),
		outbox, rows, rkeys, pgconns, vals["contractd_dedupe_entries"], series, sent)
}

func sqlCount(args ...string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var cmd *exec.Cmd
	if args[0] == "sqlite3" {
		cmd = exec.CommandContext(ctx, "sqlite3", "-readonly", "-cmd", ".timeout 2000", args[1], args[2])
	} else {
		cmd = exec.CommandContext(ctx, args[0], args[1:]...)
	}
	out, err := cmd.Output()
	if err != nil {
		return -2
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	return n
}
