package audit

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
)

// encodingJSON is what the sink wrote before appendEvent: the reference.
func encodingJSON(ev *Event) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(ev)
	return b.Bytes(), err
}

// TestAppendEvent: the hand-written encoder writes exactly encoding/json's
// bytes for events of every shape: nil and empty lists, omitted fields,
// strings with escapes, invalid UTF-8 and line separators, floats at the
// format's cut-offs, and raw input with whitespace to compact.
func TestAppendEvent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"", "a", "route-1", `"`, `\`, "\n", "\r\t\b\f", "\x00", "\x1f", "\x7f", "<>&", "é", "日本",
		"\u2028", "\u2029", "\xff", "\xe2\x80", "😀", "\U0010FFFF", " ", "/", "\ufffd"}
	str := func() string {
		var b strings.Builder
		for range rng.IntN(5) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	floats := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 0.2, 1.3, 1e-6, 9.99e-7, 1e-7, 1.5e-9, 1e20, 1e21, 1.7e308, -2.5e-300, 123.456, 0.001, 5e-324}
	flt := func() float64 {
		if rng.IntN(2) == 0 {
			return floats[rng.IntN(len(floats))]
		}
		return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20))
	}
	inputs := []string{`{"model":"m"}`, "{ \"a\" : [1, 2,\n3], \"b\":\"<x>\\u2028\" }", `[]`, `"s"`, `12.50`, "\t{}\n"}
	for i := range 3000 {
		ev := &Event{Event: EventKind(str()), Time: time.Unix(rng.Int64N(1<<34), rng.Int64N(1e9)).UTC(), RequestID: str(), Route: str(),
			Outcome: Outcome(str()), Status: rng.IntN(600) - 1, DurationMS: flt(), InputSHA256: str(), Usage: Usage{rng.IntN(1e6), -rng.IntN(10), rng.IntN(3)}}
		if i%3 == 0 {
			ev.Time = time.Unix(rng.Int64N(1<<34), 0).In(time.FixedZone("x", 3600*(rng.IntN(25)-12)))
		}
		if rng.IntN(2) == 0 {
			ev.API = str()
		}
		if rng.IntN(2) == 0 {
			ev.Prompt = &Ref{Name: str(), SHA256: str()}
		}
		if rng.IntN(2) == 0 {
			ev.Contract = &Ref{Name: str(), SHA256: str()}
		}
		switch rng.IntN(3) {
		case 0:
			ev.Attempts = []Attempt{}
		case 1:
			for j := range rng.IntN(4) {
				a := Attempt{Attempt: j + 1, Temperature: flt(), Shortened: rng.IntN(2) == 0, FinishReason: str(), UpstreamStatus: rng.IntN(600),
					LatencyMS: flt(), Usage: Usage{rng.IntN(100), rng.IntN(100), rng.IntN(200)}, OutputSHA256: str(), Tries: rng.IntN(3)}
				switch rng.IntN(3) {
				case 0:
					a.Violations = []contracts.Violation{}
				case 1:
					for range rng.IntN(3) + 1 {
						a.Violations = append(a.Violations, contracts.Violation{Kind: str(), Path: str(), Rule: str(), Message: str()})
					}
				}
				if rng.IntN(2) == 0 {
					o := str()
					a.Output = &o
				}
				ev.Attempts = append(ev.Attempts, a)
			}
		}
		if rng.IntN(2) == 0 {
			ev.Budget = &Budget{MaxTotalTokens: rng.IntN(1e5), Used: rng.IntN(1e5)}
		}
		if rng.IntN(2) == 0 {
			ev.ErrorCode = str()
		}
		ev.Deduplicated = rng.IntN(2) == 0
		if rng.IntN(2) == 0 {
			ev.ReviewID = str()
		}
		if rng.IntN(2) == 0 {
			ev.Input = json.RawMessage(inputs[rng.IntN(len(inputs))])
		}
		want, werr := encodingJSON(ev)
		got, gerr := appendEvent(nil, ev)
		if (werr != nil) != (gerr != nil) || (werr == nil && !bytes.Equal(got, want)) {
			t.Fatalf("event %d:\n got %s (%v)\nwant %s (%v)", i, got, gerr, want, werr)
		}
	}
}

// TestAppendEventErrors: what encoding/json refuses is refused too.
func TestAppendEventErrors(t *testing.T) {
	for _, ev := range []*Event{
		{DurationMS: math.NaN()},
		{DurationMS: math.Inf(1)},
		{Attempts: []Attempt{{LatencyMS: math.Inf(-1)}}},
		{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Input: json.RawMessage(`{"a":`)},
	} {
		if _, err := encodingJSON(ev); err == nil {
			t.Fatalf("encoding/json accepts %+v", ev)
		}
		if _, err := appendEvent(nil, ev); err == nil {
			t.Errorf("appendEvent accepts what encoding/json refuses: %+v", ev)
		}
	}
}

// BenchmarkAuditWrite is one contract-route event through a writer sink,
// and the same event through encoding/json (what the sink used before).
func BenchmarkAuditWrite(b *testing.B) {
	out := "x"
	ev := &Event{Event: "request", Time: time.Now().UTC(), RequestID: "req_4ade5c6d0c1fa600b01d5098", Route: "classify", API: "chat",
		Outcome: OutcomeValid, Status: 200, DurationMS: 0.527, Prompt: &Ref{"p", strings.Repeat("a", 64)}, Contract: &Ref{"c", strings.Repeat("b", 64)},
		InputSHA256: strings.Repeat("c", 64), Attempts: []Attempt{{Attempt: 1, Temperature: 0.2, FinishReason: "stop", UpstreamStatus: 200, LatencyMS: 0.31,
			Usage: Usage{120, 80, 200}, Violations: []contracts.Violation{}, OutputSHA256: strings.Repeat("d", 64), Output: &out}},
		Usage: Usage{120, 80, 200}}
	b.Run("sink", func(b *testing.B) {
		s := NewWriter(discard{})
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Write(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodingJSON(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
