package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// offlineConfig serves no traffic: it is for validate, check and render.
// The upstream is never called (port 9 on loopback is discard).
func offlineConfig() string {
	return renderConfig(cfgOpts{upstream: "http://127.0.0.1:9/v1"})
}

func TestVersion(t *testing.T) {
	t.Parallel()
	out, errOut, code := runCLI(t, "", "version")
	if code != 0 || errOut != "" {
		t.Fatalf("version: exit %d, stderr %q", code, errOut)
	}
	want := regexp.MustCompile(`^contractd \S+\n$`)
	if builtBy == "TestMain" {
		want = regexp.MustCompile(`^contractd ` + regexp.QuoteMeta(testVersion) + `\n$`)
	}
	if !want.MatchString(out) {
		t.Errorf("version printed %q, want %v", out, want)
	}
}

// problemLine is the "location: message", the location starting with
// the config file.
func problemLine(file string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(file) + `(:\d+)?: \S.*: \S.*$`)
}

func TestValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	t.Run("valid config: exit 0, silent", func(t *testing.T) {
		cfg := writeConfig(t, t.TempDir(), offlineConfig())
		out, errOut, code := runCLI(t, "", "validate", "-c", cfg)
		if code != 0 || out != "" || errOut != "" {
			t.Fatalf("exit %d\nstdout %q\nstderr %q", code, out, errOut)
		}
	})

	t.Run("missing default config: exit 1", func(t *testing.T) {
		// No -c and no CONTRACTD_CONFIG: ./contractd.yaml, missing in the
		// process's empty working directory, is a problem.
		out, _, code := runCLI(t, "", "validate")
		if code != 1 || !strings.Contains(out, "contractd.yaml") {
			t.Fatalf("exit %d, stdout %q", code, out)
		}
	})

	t.Run("problems: exit 1, one location: message line each on stdout", func(t *testing.T) {
		text := offlineConfig()
		// a dangling contract reference
		text = strings.Replace(text, "    contract: sentiment_v1\n    temperature: 0.7\n    max_output_tokens: 200\n  - name: review-always-bad",
			"    contract: no_such_contract\n    temperature: 0.7\n    max_output_tokens: 200\n  - name: review-always-bad", 1)
		// a bad regex and a policy path the schema cannot match
		text = strings.Replace(text, "      labels: [{path: /sentiment, set: sentiment}]",
			"      labels: [{path: /sentiment, set: sentiment}, {path: /nowhere, set: sentiment}]\n      forbidden: [{name: bad, path: /summary, pattern: \"(unclosed\"}]", 1)
		// a template that does not render with example_input
		text = strings.Replace(text, "Review: {{ .Input.text }}", "Review: {{ .Input.text }} {{ .Nope }}", 1)
		cfg := filepath.Join(dir, "problems.yaml")
		writeFile(t, cfg, text)
		out, errOut, code := runCLI(t, "", "validate", "-c", cfg)
		if code != 1 {
			t.Fatalf("exit %d, want 1\nstdout %s\nstderr %s", code, out, errOut)
		}
		lines := scanLines(out)
		re := problemLine(cfg)
		for _, l := range lines {
			if !re.MatchString(l) {
				t.Errorf("stdout line %q is not %q", l, re)
			}
		}
		for _, want := range []string{`no_such_contract`, `(unclosed`, `/nowhere`, `Nope`} {
			if !strings.Contains(out, want) {
				t.Errorf("no problem line mentions %q:\n%s", want, out)
			}
		}
		if len(lines) < 4 {
			t.Errorf("%d problem lines, want one per problem (4):\n%s", len(lines), out)
		}
		if strings.Contains(errOut, "no_such_contract") {
			t.Errorf("problems went to stderr:\n%s", errOut)
		}
	})

	t.Run("unknown key: exit 1", func(t *testing.T) {
		cfg := filepath.Join(dir, "unknown.yaml")
		writeFile(t, cfg, strings.Replace(offlineConfig(), "  request_timeout: 20s\n", "  request_timeout: 20s\n  request_timout: 20s\n", 1))
		out, _, code := runCLI(t, "", "validate", "-c", cfg)
		if code != 1 || !problemLine(cfg).MatchString(strings.TrimSpace(out)) || !strings.Contains(out, "request_timout") {
			t.Fatalf("exit %d, stdout %q", code, out)
		}
	})

	t.Run("remote $ref: exit 1", func(t *testing.T) {
		cfg := filepath.Join(dir, "ref.yaml")
		writeFile(t, cfg, strings.Replace(offlineConfig(), "        summary: {type: string, maxLength: 200}",
			"        summary: {$ref: \"https://example.com/summary.schema.json\"}", 1))
		out, _, code := runCLI(t, "", "validate", "-c", cfg)
		if code != 1 || !strings.Contains(out, "example.com") {
			t.Fatalf("exit %d, stdout %q", code, out)
		}
	})

	t.Run("warnings only: exit 0, warning: lines on stderr", func(t *testing.T) {
		text := strings.Replace(offlineConfig(), "      additionalProperties: false\n      properties:\n        sentiment",
			"      properties:\n        sentiment", 1) // the contract allows extra keys
		text = strings.Replace(text, "contracts:\n", `  - name: unused_prompt
    example_input: "hello"
    system: "Never used."
contracts:
`, 1)
		cfg := filepath.Join(dir, "warnings.yaml")
		writeFile(t, cfg, text)
		out, errOut, code := runCLI(t, "", "validate", "-c", cfg)
		if code != 0 || out != "" {
			t.Fatalf("exit %d, stdout %q (want 0 and nothing)\nstderr %s", code, out, errOut)
		}
		lines := scanLines(errOut)
		if len(lines) != 2 {
			t.Errorf("%d warning lines, want 2:\n%s", len(lines), errOut)
		}
		re := regexp.MustCompile(`^warning: ` + regexp.QuoteMeta(cfg) + `(:\d+)?: \S.*: \S.*$`)
		for _, l := range lines {
			if !re.MatchString(l) {
				t.Errorf("stderr line %q is not %q", l, re)
			}
		}
		if !strings.Contains(errOut, "unused_prompt") || !strings.Contains(errOut, "additionalProperties") {
			t.Errorf("warnings do not name the unused prompt and the open schema:\n%s", errOut)
		}
	})

	t.Run("validate does not need the upstream key", func(t *testing.T) {
		// Offline: api_key_env is checked by serve, not by validate.
		cfg := writeConfig(t, t.TempDir(), offlineConfig())
		cmdOut, errOut, code := runCLIEnv(t, map[string]string{"PATH": baseEnv()["PATH"]}, "validate", "-c", cfg)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, cmdOut)
		}
		// ...but says that serve will refuse without it (it said nothing,
		// and the serve after a passing validate stopped at start).
		if !strings.Contains(errOut, "warning: "+cfg+`: upstream "fake": environment variable OPENAI_API_KEY (api_key_env) is not set here: serve refuses to start without it`) {
			t.Errorf("stderr does not warn of the unset upstream key:\n%s", errOut)
		}
	})
}

type checkResult struct {
	Valid      bool `json:"valid"`
	Violations []struct {
		Kind, Path, Rule, Message string
	} `json:"violations"`
	Evidence []struct {
		Path       string `json:"path"`
		Start, End int
		SHA256     string `json:"sha256"`
	} `json:"evidence"`
}

func decodeCheck(t *testing.T, out string) checkResult {
	t.Helper()
	var r checkResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("check output is not JSON: %v\n%s", err, out)
	}
	if r.Violations == nil || r.Evidence == nil {
		t.Errorf("violations and evidence must be lists:\n%s", out)
	}
	return r
}

func TestCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	text := strings.Replace(offlineConfig(), "      labels: [{path: /sentiment, set: sentiment}]",
		"      labels: [{path: /sentiment, set: sentiment}]\n      prompt_leak: true", 1)
	text = strings.Replace(text, "        summary: {type: string, maxLength: 200}",
		"        summary: {type: string, maxLength: 200}\n        quote: {type: string}", 1)
	text = strings.Replace(text, "      prompt_leak: true", "      prompt_leak: true\n      evidence: [{path: /quote, source: /text}]", 1)
	cfg := writeConfig(t, dir, text)
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, content)
		return p
	}
	valid := file("valid.json", goodContent)
	input := file("input.json", `{"text": "Ünïcode first. The delivery was fast and the food was great."}`)

	t.Run("valid: exit 0", func(t *testing.T) {
		out, errOut, code := runCLI(t, "", "check", "-c", cfg, "--contract", "sentiment_v1", valid)
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
		if r := decodeCheck(t, out); !r.Valid || len(r.Violations) != 0 {
			t.Errorf("result %+v", r)
		}
	})

	t.Run("valid from stdin, flags after the file", func(t *testing.T) {
		out, _, code := runCLI(t, goodContent, "check", "-", "-c", cfg, "--contract", "sentiment_v1")
		if code != 0 || !decodeCheck(t, out).Valid {
			t.Fatalf("exit %d\n%s", code, out)
		}
	})

	t.Run("evidence with --input", func(t *testing.T) {
		out, _, code := runCLI(t, `{"sentiment":"positive","summary":"Fast.","quote":"delivery was fast"}`,
			"check", "-c", cfg, "--contract", "sentiment_v1", "--input", input, "-")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		r := decodeCheck(t, out)
		// "Ünïcode first. The " is 19 code points (more bytes).
		if len(r.Evidence) != 1 || r.Evidence[0].Path != "/quote" || r.Evidence[0].Start != 19 || r.Evidence[0].End != 36 ||
			r.Evidence[0].SHA256 != "858b6fd5606893b6866122beaba0eb2a92eabbcb546c48a3aa60d495b3073dbf" {
			t.Errorf("evidence %+v", r.Evidence)
		}
		out, _, code = runCLI(t, `{"sentiment":"positive","summary":"Fast.","quote":"delivery was slow"}`,
			"check", "-c", cfg, "--contract", "sentiment_v1", "--input", input, "-")
		if r := decodeCheck(t, out); code != 1 || r.Valid || len(r.Violations) != 1 || r.Violations[0].Rule != "evidence_not_found" {
			t.Errorf("exit %d, %+v", code, r)
		}
	})

	t.Run("invalid: exit 1 with the violations", func(t *testing.T) {
		for _, c := range []struct{ output, kind, rule, path string }{
			{`{"sentiment":"ecstatic","summary":"x"}`, "policy", "label", "/sentiment"},
			{`{"sentiment":"positive"}`, "schema", "required", ""},
			{`{"sentiment":"positive","summary":"x","extra":1}`, "schema", "additionalProperties", "/extra"},
			{"Sure! " + goodContent, "parse", "prose_around_json", ""},
			{"```json\n" + goodContent + "\n```", "parse", "markdown_fence", ""},
			{"", "parse", "empty_output", ""},
		} {
			out, errOut, code := runCLI(t, c.output, "check", "-c", cfg, "--contract", "sentiment_v1", "-")
			if code != 1 {
				t.Errorf("%q: exit %d, want 1\n%s%s", c.output, code, out, errOut)
				continue
			}
			r := decodeCheck(t, out)
			if r.Valid || len(r.Violations) == 0 {
				t.Errorf("%q: %+v", c.output, r)
				continue
			}
			v := r.Violations[0]
			if v.Kind != c.kind || v.Rule != c.rule || v.Path != c.path || v.Message == "" {
				t.Errorf("%q: first violation %+v, want kind %s rule %s path %q", c.output, v, c.kind, c.rule, c.path)
			}
		}
	})

	t.Run("prompt_leak is judged with --route only", func(t *testing.T) {
		leak := `{"sentiment":"positive","summary":"I will classify the sentiment of one customer review. Allowed values: positive, negative, neutral."}`
		out, _, code := runCLI(t, leak, "check", "-c", cfg, "--route", "review-sentiment", "-")
		r := decodeCheck(t, out)
		if code != 1 || len(r.Violations) != 1 || r.Violations[0].Rule != "prompt_leak" || r.Violations[0].Path != "/summary" {
			t.Errorf("--route: exit %d, %+v", code, r)
		}
		out, _, code = runCLI(t, leak, "check", "-c", cfg, "--contract", "sentiment_v1", "-")
		if code != 0 || !decodeCheck(t, out).Valid {
			t.Errorf("--contract: exit %d\n%s", code, out)
		}
	})

	t.Run("usage: exit 2", func(t *testing.T) {
		for name, args := range map[string][]string{
			"unknown contract":  {"check", "-c", cfg, "--contract", "nope", valid},
			"unknown route":     {"check", "-c", cfg, "--route", "nope", valid},
			"unreadable output": {"check", "-c", cfg, "--contract", "sentiment_v1", filepath.Join(dir, "missing.json")},
			"unreadable input":  {"check", "-c", cfg, "--contract", "sentiment_v1", "--input", filepath.Join(dir, "missing.json"), valid},
			"no contract":       {"check", "-c", cfg, valid},
			"both":              {"check", "-c", cfg, "--contract", "sentiment_v1", "--route", "review-sentiment", valid},
			"two outputs":       {"check", "-c", cfg, "--contract", "sentiment_v1", valid, valid},
			"unknown flag":      {"check", "-c", cfg, "--contract", "sentiment_v1", "--frobnicate", valid},
			"missing config":    {"check", "-c", filepath.Join(dir, "missing.yaml"), "--contract", "sentiment_v1", valid},
		} {
			out, errOut, code := runCLI(t, "", args...)
			if code != 2 {
				t.Errorf("%s: exit %d, want 2\nstdout %s\nstderr %s", name, code, out, errOut)
			}
			if out != "" {
				t.Errorf("%s: printed a result on stdout: %s", name, out)
			}
			if errOut == "" {
				t.Errorf("%s: no message on stderr", name)
			}
		}
	})

	t.Run("contracts-only config", func(t *testing.T) {
		// a config may hold contracts (and labels) alone, for check.
		only := file("contracts-only.yaml", `labels:
  - name: sentiment
    values: [positive, negative, neutral]
contracts:
  - name: mini
    schema: {type: object, required: [sentiment], additionalProperties: false, properties: {sentiment: {type: string}}}
    policies:
      labels: [{path: /sentiment, set: sentiment}]
`)
		out, errOut, code := runCLI(t, `{"sentiment":"neutral"}`, "check", "-c", only, "--contract", "mini")
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
		if out, _, code := runCLI(t, "", "validate", "-c", only); code != 0 {
			t.Errorf("validate: exit %d\n%s", code, out)
		}
	})
}

// renderedBody is the part of `contractd render` output the tests read.
type renderedBody struct {
	Model    string `json:"model"`
	Messages []struct {
		Role, Content string
	} `json:"messages"`
	Temperature *float64 `json:"temperature"`
	MaxTokens   int      `json:"max_tokens"`
	Stream      *bool    `json:"stream"`
}

func TestRender(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, offlineConfig())
	decode := func(t *testing.T, out string) (renderedBody, map[string]any) {
		t.Helper()
		var b renderedBody
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &b); err != nil {
			t.Fatalf("render output is not JSON: %v\n%s", err, out)
		}
		_ = json.Unmarshal([]byte(out), &m)
		return b, m
	}
	const example = "The delivery was fast and the food was great."

	t.Run("attempt 1 from example_input", func(t *testing.T) {
		out, errOut, code := runCLI(t, "", "render", "-c", cfg, "--route", "review-sentiment")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
		b, m := decode(t, out)
		if b.Model != "fake-good" || b.Temperature == nil || *b.Temperature != 0.7 || b.MaxTokens != 200 || b.Stream == nil || *b.Stream {
			t.Errorf("body %s", out)
		}
		if len(b.Messages) != 2 || b.Messages[0].Role != "system" || b.Messages[1].Role != "user" {
			t.Fatalf("messages %s", out)
		}
		sys := b.Messages[0].Content
		const schema = `{"type":"object","required":["sentiment","summary"],"additionalProperties":false,"properties":{"sentiment":{"type":"string"},"summary":{"type":"string","maxLength":200}}}`
		want := "Classify the sentiment of one customer review. Allowed values: positive, negative, neutral.\n" +
			"Reply with one JSON object that matches this schema and nothing else:\n" + schema + "\n"
		if sys != want {
			t.Errorf("system prompt\n got %q\nwant %q", sys, want)
		}
		if b.Messages[1].Content != "Review: "+example+"\n" {
			t.Errorf("user message %q", b.Messages[1].Content)
		}
		if _, ok := m["response_format"]; ok {
			t.Errorf("response_format none must be removed: %s", out)
		}
	})

	t.Run("attempt 2: temperature 0, shortened", func(t *testing.T) {
		out, errOut, code := runCLI(t, "", "render", "-c", cfg, "--route", "review-sentiment", "--attempt", "2")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
		b, _ := decode(t, out)
		if b.Temperature == nil || *b.Temperature != 0 || !regexp.MustCompile(`"temperature": 0\b`).MatchString(out) {
			t.Errorf("temperature 0 must be sent explicitly: %s", out)
		}
		if len(b.Messages) != 2 {
			t.Fatalf("messages %s", out)
		}
		u := b.Messages[1].Content
		if !strings.HasPrefix(u, "Review: The delivery") || len(u) >= len("Review: "+example+"\n") {
			t.Errorf("attempt 2's user message %q is not the shortened input", u)
		}
	})

	t.Run("--input: an input object and a request body", func(t *testing.T) {
		obj := filepath.Join(dir, "input.json")
		writeFile(t, obj, `{"text": "Cold soup."}`)
		out, errOut, code := runCLI(t, "", "render", "-c", cfg, "--route", "review-sentiment", "--input", obj)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
		if b, _ := decode(t, out); len(b.Messages) != 2 || b.Messages[1].Content != "Review: Cold soup.\n" {
			t.Errorf("body %s", out)
		}
		req := filepath.Join(dir, "request.json")
		writeFile(t, req, `{"model":"x","top_p":0.25,"max_tokens":5,"messages":[{"role":"user","content":"{\"text\":\"Warm bread.\"}"}]}`)
		out, errOut, code = runCLI(t, "", "render", "-c", cfg, "--route", "review-sentiment", "--input", req)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
		b, m := decode(t, out)
		if len(b.Messages) != 2 || b.Messages[1].Content != "Review: Warm bread.\n" || b.Model != "fake-good" || b.MaxTokens != 200 || m["top_p"] != 0.25 {
			t.Errorf("body %s", out)
		}
	})

	t.Run("--input: a Responses API request body", func(t *testing.T) {
		chat := filepath.Join(dir, "chat-request.json")
		writeFile(t, chat, `{"model":"x","top_p":0.25,"messages":[{"role":"user","content":"{\"text\":\"Warm bread.\"}"}]}`)
		want, errOut, code := runCLI(t, "", "render", "-c", cfg, "--route", "review-sentiment", "--input", chat)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
		resp := filepath.Join(dir, "responses-request.json")
		writeFile(t, resp, `{"model":"x","top_p":0.25,"store":true,"max_output_tokens":5,"text":{"format":{"type":"json_object"}},"input":[{"role":"user","content":[{"type":"input_text","text":"{\"text\":\"Warm bread.\"}"}]}]}`)
		for _, args := range [][]string{{}, {"--api", "responses"}} {
			out, errOut, code := runCLI(t, "", append([]string{"render", "-c", cfg, "--route", "review-sentiment", "--input", resp}, args...)...)
			if code != 0 {
				t.Fatalf("%v: exit %d\n%s", args, code, errOut)
			}
			if out != want {
				t.Errorf("%v: the Responses request renders\n%s\nthe chat one\n%s", args, out, want)
			}
		}
		bad := filepath.Join(dir, "responses-tools.json")
		writeFile(t, bad, `{"model":"x","input":"hi","tools":[{"type":"web_search"}]}`)
		if out, errOut, code := runCLI(t, "", "render", "-c", cfg, "--route", "review-sentiment", "--input", bad); code != 1 || out != "" || !strings.Contains(errOut, "tools") {
			t.Errorf("tools: exit %d\nstdout %s\nstderr %s", code, out, errOut)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for name, args := range map[string][]string{
			"unknown route": {"render", "-c", cfg, "--route", "nope"},
			"no route":      {"render", "-c", cfg},
			"no attempt 3":  {"render", "-c", cfg, "--route", "review-sentiment", "--attempt", "3"},
		} {
			out, errOut, code := runCLI(t, "", args...)
			if code == 0 || out != "" || errOut == "" {
				t.Errorf("%s: exit %d\nstdout %s\nstderr %s", name, code, out, errOut)
			}
		}
	})
}

// runCLIEnv is runCLI with a given environment.
func runCLIEnv(t *testing.T, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	d := startProcess(t, env, args...)
	code := d.wait(20 * time.Second)
	return d.stdout.String(), d.stderr.String(), code
}

// sigintIgnoredAtStart: this process was started with SIGINT ignored (read
// once: Notify and Stop change what signal.Ignored reports).
var sigintIgnoredAtStart = signal.Ignored(os.Interrupt)

// TestInterruptStopsOfflineTools: `contractd check --contract NAME` with no
// OUTPUT reads stdin, so a user who forgot the file sits at a silent
// prompt; Ctrl-C (SIGINT) and SIGTERM were caught for every command (only
// serve and replay drain on them) and ignored, so check waited for EOF.
// They now end check, validate, render and schema as they end any tool.
func TestInterruptStopsOfflineTools(t *testing.T) {
	t.Parallel()
	// A shell starts a background job (go test ... &) with SIGINT ignored,
	// and check would inherit that and, rightly, keep it ignored. A signal
	// this process catches is back at its default in the child (exec resets
	// caught signals), so check starts as it does from a terminal.
	if sigintIgnoredAtStart {
		caught := make(chan os.Signal, 1)
		signal.Notify(caught, os.Interrupt)
		defer signal.Stop(caught)
	}
	cfg := writeConfig(t, t.TempDir(), offlineConfig())
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(binPath, "check", "-c", cfg, "--contract", "sentiment_v1")
			cmd.Env = envList(baseEnv())
			stdin, err := cmd.StdinPipe() // never written nor closed: check waits on it
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond) // loaded, reading stdin
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					t.Fatalf("check after %v: %v, want killed by the signal", sig, err)
				}
				if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != sig {
					t.Errorf("check after %v: %v (stderr?), want killed by the signal", sig, err)
				}
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("check still reading stdin 5s after %v", sig)
			}
		})
	}
}
