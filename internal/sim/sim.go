package sim

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contractd/contractd/retry"
)

// Options configure a simulator.
type Options struct {
	// Seed makes every answer reproducible: the same seed and the same
	// request body always give the same reply.
	Seed int64
	// FailureRate is the chance (0..1) that a request in auto mode at a
	// temperature above 0 gets a failure mode.
	FailureRate float64
	// ColdFactor scales FailureRate at temperature 0 (the retry attempt):
	// 0.2 means five times fewer failures.
	ColdFactor float64
	// ErrorRate is the chance that an auto-mode request gets an HTTP 500
	// (drawn before FailureRate; transport errors, not contract failures).
	ErrorRate float64
	// Latency is added to every reply; Jitter adds a seeded 0..Jitter.
	Latency, Jitter time.Duration
	// Weights of the failure modes in auto mode (DefaultWeights when nil).
	Weights map[Mode]float64
	// Catalog knows the contracts (NewCatalog when nil: schemas from
	// requests only).
	Catalog *Catalog
}

// Sim answers chat completion requests. Safe for concurrent use.
type Sim struct {
	opt Options
	cat atomic.Pointer[Catalog] // opt.Catalog, or the one SetCatalog swapped in

	// counts caches the token counts of message texts: system prompts
	// repeat on every request and counting them dominates the
	// simulator's CPU time (it must stay cheap next to contractd in
	// benchmarks).
	countsMu sync.Mutex
	counts   map[[32]byte]int
}

// maxCounts bounds the token count cache.
const maxCounts = 8192

// count counts text's tokens with the model's tokenizer, cached.
func (s *Sim) count(c retry.Counter, model, text string) int {
	if len(text) < 256 {
		return c.Count(text)
	}
	key := sha256.Sum256([]byte(retry.EncodingFor(model) + "\x00" + text))
	s.countsMu.Lock()
	n, ok := s.counts[key]
	s.countsMu.Unlock()
	if ok {
		return n
	}
	n = c.Count(text)
	s.countsMu.Lock()
	if s.counts == nil || len(s.counts) >= maxCounts {
		s.counts = map[[32]byte]int{}
	}
	s.counts[key] = n
	s.countsMu.Unlock()
	return n
}

// New returns a simulator.
func New(opt Options) *Sim {
	if opt.Catalog == nil {
		opt.Catalog = NewCatalog()
	}
	if opt.Weights == nil {
		opt.Weights = DefaultWeights
	}
	s := &Sim{opt: opt}
	s.cat.Store(opt.Catalog)
	return s
}

// SetCatalog swaps in c (a reloaded config's) for the requests that
// arrive from now on.
func (s *Sim) SetCatalog(c *Catalog) { s.cat.Store(c) }

// Warm loads the tokenizers usage is counted with, so the first request
// does not pay for it.
func Warm() {
	for _, m := range []string{"gpt-4o-mini", "gpt-4"} {
		retry.CounterFor(m).Count("warm up")
	}
}

// Request is the part of a chat completion request the simulator reads.
type Request struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	Temperature         *float64        `json:"temperature"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	ResponseFormat      *ResponseFormat `json:"response_format"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// SimMode forces a mode (see package doc). contractd forwards unknown
	// client fields byte-for-byte, so clients can set it through the proxy.
	SimMode string `json:"sim_mode"`
}

// Message is a chat message; Content is a string or a list of parts.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Text is the message's text (parts of type text joined).
func (m Message) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) == nil {
		var sb strings.Builder
		for _, p := range parts {
			if p.Type == "text" || p.Type == "input_text" {
				sb.WriteString(p.Text)
			}
		}
		return sb.String()
	}
	return ""
}

// ResponseFormat is OpenAI's response_format.
type ResponseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// Reply is the simulator's answer to one request.
type Reply struct {
	Status   int     // 200, or an HTTP error status (429, 500)
	Content  *string // nil: JSON null (refusals)
	Refusal  string
	Finish   string
	Usage    Usage
	Mode     Mode   // the mode applied (never auto)
	Contract string // the contract answered ("schema" for a request-only schema, "" for plain chat)
	Model    string
	ID       string
	Latency  time.Duration
}

// Usage is token usage, counted with the model's tokenizer when known.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// maxGenTries bounds the search for a valid instance.
const maxGenTries = 40

// Complete answers a request. body is the raw request body: its bytes
// (with the seed) seed the PRNG, so the same body always gets the same
// reply. header is the X-Sim-Mode header value ("" when absent).
func (s *Sim) Complete(body []byte, req *Request, header string) (*Reply, error) {
	h := sha256.New()
	var sb [8]byte
	binary.BigEndian.PutUint64(sb[:], uint64(s.opt.Seed))
	h.Write(sb[:])
	h.Write(body)
	sum := h.Sum(nil)
	rng := rand.New(rand.NewPCG(binary.BigEndian.Uint64(sum[0:8]), binary.BigEndian.Uint64(sum[8:16])))
	latRng := rand.New(rand.NewPCG(binary.BigEndian.Uint64(sum[16:24]), binary.BigEndian.Uint64(sum[24:32])))

	temp := 1.0
	if req.Temperature != nil {
		temp = *req.Temperature
	}
	forced := req.SimMode
	if forced == "" {
		forced = header
	}
	if forced == "" {
		if i := strings.LastIndexByte(req.Model, '+'); i >= 0 {
			if _, _, err := ParseMode(req.Model[i+1:]); err == nil {
				forced = req.Model[i+1:]
			}
		}
	}
	mode, hotOnly, err := ParseMode(forced)
	if err != nil {
		return nil, err
	}
	if hotOnly && temp <= 0 {
		mode = ModeValid
	}

	var system, lastUser string
	var texts []string
	for _, m := range req.Messages {
		t := m.Text()
		texts = append(texts, t)
		switch m.Role {
		case "system", "developer":
			if system != "" {
				system += "\n"
			}
			system += t
		case "user":
			lastUser = t
		}
	}
	var rs json.RawMessage
	jsonWanted := false
	if rf := req.ResponseFormat; rf != nil {
		jsonWanted = rf.Type == "json_object" || rf.Type == "json_schema"
		if rf.JSONSchema != nil {
			rs = rf.JSONSchema.Schema
		}
	}
	scope := system
	if scope == "" {
		scope = strings.Join(texts, "\n")
	}
	k := s.cat.Load().Find(rs, scope)

	rep := &Reply{Status: 200, Model: req.Model, ID: fmt.Sprintf("chatcmpl-sim-%x", sum[:12])}
	if rep.Model == "" {
		rep.Model = "sim-1"
	}
	rep.Latency = s.opt.Latency
	if s.opt.Jitter > 0 {
		rep.Latency += time.Duration(latRng.Int64N(int64(s.opt.Jitter) + 1))
	}

	if mode == ModeAuto {
		mode = ModeValid
		p := s.opt.FailureRate
		if temp <= 0 {
			p *= s.opt.ColdFactor
		}
		switch {
		case s.opt.ErrorRate > 0 && rng.Float64() < s.opt.ErrorRate:
			mode = ModeHTTP500
		case rng.Float64() < p:
			mode = "" // drawn below, among the modes that apply
		}
	}

	tc := newTextCtx(system, lastUser)
	var out output
	if k == nil {
		if mode == "" {
			mode = pickWeighted(rng, s.opt.Weights, func(m Mode) bool {
				return m == ModeTruncated || m == ModeRefusal || m == ModeEmpty || (jsonWanted && (m == ModeFence || m == ModeProse))
			})
		}
		out = plainReply(rng, tc, mode, jsonWanted)
	} else {
		rep.Contract = k.Name
		if rep.Contract == "" {
			rep.Contract = "schema"
		}
		in := s.instance(rng, k, tc)
		if mode == "" {
			mode = pickWeighted(rng, s.opt.Weights, in.applicable)
		}
		for try := 0; try < 8 && !in.applicable(mode); try++ {
			// Another valid instance may have what the mode breaks (an
			// evidence snippet in a non-empty list…).
			in = s.instance(rng, k, tc)
		}
		if mode == ModeWrongLabel && !in.applicable(mode) && in.siteOf(siteEnum) {
			// No label in any instance (an empty list of actions): break
			// an enum value instead.
		} else if !in.applicable(mode) {
			// A forced mode this contract cannot show (no labels, no
			// evidence…): fall back to a schema failure that always can.
			switch {
			case in.applicable(ModeMissingRequired):
				mode = ModeMissingRequired
			default:
				mode = ModeTrailingComma
			}
		}
		out = in.apply(rng, mode)
	}
	rep.Mode = mode
	if out.status != 0 {
		rep.Status = out.status
		return rep, nil
	}
	rep.Content, rep.Refusal, rep.Finish = out.content, out.refusal, out.finish

	counter := retry.CounterFor(req.Model)
	rep.Usage.PromptTokens = retry.CountMessages(countFunc(func(t string) int { return s.count(counter, req.Model, t) }), texts)
	completion := out.refusal
	if out.content != nil {
		completion = *out.content
	}
	rep.Usage.CompletionTokens = max(counter.Count(completion), 1)
	if out.finish == "length" {
		if lim := limit(req); lim > 0 {
			rep.Usage.CompletionTokens = lim
		}
	}
	rep.Usage.TotalTokens = rep.Usage.PromptTokens + rep.Usage.CompletionTokens
	return rep, nil
}

type countFunc func(string) int

func (f countFunc) Count(s string) int { return f(s) }

func limit(req *Request) int {
	if req.MaxCompletionTokens != nil {
		return *req.MaxCompletionTokens
	}
	if req.MaxTokens != nil {
		return *req.MaxTokens
	}
	return 0
}

// instance generates a valid instance of k's schema for this request:
// candidates are drawn until one passes the contract as the simulator
// knows it (schema, and policies when the config was loaded).
func (s *Sim) instance(rng *rand.Rand, k *Contract, tc *textCtx) *instance {
	tc.sources = k.sources(tc.lastUser)
	subj := subject(tc.system, tc.lastUser, tc.sources)
	g := &generator{rng: rng, doc: k.doc, hints: k.hints, text: tc, pOptional: 0.6}
	var v any
	for try := 0; try < maxGenTries; try++ {
		v = g.generate()
		if len(k.check(string(encodeJSON(v)), subj)) == 0 {
			break
		}
	}
	return &instance{value: v, sites: g.sites, hints: k.hints, doc: k.doc, sources: tc.sources, text: tc}
}

func pickWeighted(rng *rand.Rand, w map[Mode]float64, ok func(Mode) bool) Mode {
	total := 0.0
	for _, m := range FailureModes {
		if ok(m) {
			total += w[m]
		}
	}
	if total <= 0 {
		return ModeTrailingComma
	}
	x := rng.Float64() * total
	for _, m := range FailureModes {
		if !ok(m) || w[m] <= 0 {
			continue
		}
		if x < w[m] {
			return m
		}
		x -= w[m]
	}
	return ModeTrailingComma
}

// plainReply answers a request with no contract: chat text, or a small
// JSON object when JSON was asked for.
func plainReply(rng *rand.Rand, tc *textCtx, m Mode, jsonWanted bool) output {
	body := tc.paragraph(rng)
	if jsonWanted {
		o := newObj()
		o.Set("answer", body)
		in := &instance{value: o, doc: &schemaDoc{root: map[string]any{}}, text: tc}
		switch m {
		case ModeFence, ModeProse, ModeTruncated, ModeRefusal, ModeEmpty, ModeTrailingComma, ModeDuplicateKey, ModeHTTP429, ModeHTTP500:
			return in.apply(rng, m)
		}
		return output{content: text(string(encodeJSON(o))), finish: "stop"}
	}
	switch m {
	case ModeRefusal:
		return output{refusal: "I'm sorry, but I can't help with that request.", finish: "stop"}
	case ModeEmpty:
		return output{content: text(""), finish: "stop"}
	case ModeTruncated:
		r := []rune(body)
		return output{content: text(string(r[:len(r)/2])), finish: "length"}
	case ModeHTTP429:
		return output{status: 429}
	case ModeHTTP500:
		return output{status: 500}
	}
	return output{content: text(body), finish: "stop"}
}
