package replay

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/contractd/contractd/audit"
)

// Verdict is a judgement of an output: the old one it was stored with, or
// the new one the current config gives it.
type Verdict string

// Old verdicts of a stored output.
const (
	OldValid    Verdict = "valid"    // an attempt the contract accepted
	OldInvalid  Verdict = "invalid"  // an attempt with violations
	OldApproved Verdict = "approved" // a reviewer's (or rerun's) approved output
)

// Record is one stored request (an audit event, an export line or a review
// item) with the outputs it holds.
type Record struct {
	ID      string
	Route   string
	Time    time.Time
	Input   jsontext.Value // the stored input; nil without content
	Request []byte         // the client's body (review items only)
	Outcome audit.Outcome  // needs_review for review items, outcomeApproved for export lines
	Outputs []Stored
	// NotReplayable counts outputs the source only knows by their hash
	// (an audit written without include_content).
	NotReplayable int
}

// Stored is one stored output and how it was judged then.
type Stored struct {
	Attempt int     // 0 for an approved output
	Output  string  // the model's text, or the approved JSON
	Finish  string  // finish_reason of the attempt
	Refused bool    // the attempt carried a model_refusal violation
	Old     Verdict // OldValid, OldInvalid or OldApproved
}

// outcomeApproved is the outcome of an export line: a needs_review
// request a reviewer approved.
const outcomeApproved audit.Outcome = "approved"

// ErrNotRecord marks a line that is well-formed JSON but carries no outputs
// to judge (a review_resolved event, a passthrough request…).
var ErrNotRecord = errors.New("no stored outputs")

// line is the union of an audit request event and an export line; fields
// absent from one shape stay zero.
type line struct {
	Event     audit.EventKind `json:"event"`
	Time      *time.Time      `json:"time"`
	RequestID *string         `json:"request_id"`
	Route     string          `json:"route"`
	Outcome   audit.Outcome   `json:"outcome"`
	Attempts  []lineAttempt   `json:"attempts"`
	Input     jsontext.Value  `json:"input"`
	// Export lines (GET /admin/reviews/export).
	ID         *string        `json:"id"`
	Output     jsontext.Value `json:"output"`
	ResolvedAt *time.Time     `json:"resolved_at"`
}

type lineAttempt struct {
	Attempt      int             `json:"attempt"`
	FinishReason string          `json:"finish_reason"`
	Violations   []lineViolation `json:"violations"`
	OutputSHA256 string          `json:"output_sha256"`
	Output       *string         `json:"output"`
}

type lineViolation struct {
	Rule string `json:"rule"`
}

// ParseLine reads one line of an audit file (written with
// include_content: true) or of a review export (one {id, route, contract,
// input, output, resolved_at} per line). Blank lines and events without
// outputs give ErrNotRecord; anything unreadable an error saying why.
func ParseLine(b []byte) (*Record, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, ErrNotRecord
	}
	if b[0] != '{' {
		if isTextLogLine(b) {
			return nil, ErrNotRecord
		}
		return nil, errors.New("not a JSON object")
	}
	var l line
	if err := jsonv2.Unmarshal(b, &l); err != nil {
		if isLogLine(b) {
			return nil, ErrNotRecord // serve's request line: "attempts" is a count
		}
		return nil, fmt.Errorf("not a readable JSON line: %s", shortErr(err))
	}
	switch {
	case l.RequestID != nil:
		if l.Event != "" && l.Event != audit.EventRequest {
			return nil, ErrNotRecord
		}
		return auditRecord(&l)
	case l.ID != nil && l.Output != nil:
		return exportRecord(&l)
	case l.Event != "":
		return nil, ErrNotRecord // review_resolved and any later event kind
	case isLogLine(b):
		return nil, ErrNotRecord
	}
	return nil, errors.New("neither an audit event nor a review export line")
}

// isLogLine reports whether b is one of contractd's own JSON log lines
// (log/slog: string "level" and "msg" members, which no audit event or
// export line has). With audit.sink: stdout the audit is collected with
// the logs (kubectl logs, journalctl -o cat), so a file made from them
// holds both: the log lines are skipped like other lines without
// outputs, not reported as unreadable.
func isLogLine(b []byte) bool {
	var l struct {
		Level jsontext.Value `json:"level"`
		Msg   jsontext.Value `json:"msg"`
	}
	if jsonv2.Unmarshal(b, &l) != nil {
		return false
	}
	return l.Level.Kind() == '"' && l.Msg.Kind() == '"'
}

// isTextLogLine reports whether b is a log line in slog's text form
// (CONTRACTD_LOG_FORMAT=text): time=… level=… msg=….
func isTextLogLine(b []byte) bool {
	return bytes.HasPrefix(b, []byte("time=")) && bytes.Contains(b, []byte(" level=")) && bytes.Contains(b, []byte(" msg="))
}

func auditRecord(l *line) (*Record, error) {
	r := &Record{ID: *l.RequestID, Route: l.Route, Outcome: l.Outcome}
	if l.Time != nil {
		r.Time = *l.Time
	}
	if hasValue(l.Input) {
		r.Input = l.Input
	}
	for _, a := range l.Attempts {
		if a.Output == nil {
			if a.OutputSHA256 != "" {
				r.NotReplayable++ // judged then, but its text was not kept
			}
			continue // an upstream failure: no output at all
		}
		s := Stored{Attempt: a.Attempt, Output: *a.Output, Finish: a.FinishReason, Old: OldValid}
		if len(a.Violations) > 0 {
			s.Old = OldInvalid
		}
		for _, v := range a.Violations {
			if v.Rule == "model_refusal" {
				s.Refused = true
			}
		}
		r.Outputs = append(r.Outputs, s)
	}
	if len(r.Outputs) > 0 && r.Input == nil {
		// Outputs without the input they answered cannot be judged the
		// way serving judged them (evidence, prompt rendering).
		r.NotReplayable += len(r.Outputs)
		r.Outputs = nil
	}
	if len(r.Outputs) == 0 && r.NotReplayable == 0 {
		return nil, ErrNotRecord
	}
	return r, nil
}

func exportRecord(l *line) (*Record, error) {
	r := &Record{ID: *l.ID, Route: l.Route, Outcome: outcomeApproved}
	if l.ResolvedAt != nil {
		r.Time = *l.ResolvedAt
	}
	if hasValue(l.Input) {
		r.Input = l.Input
	}
	if !hasValue(l.Output) {
		return nil, ErrNotRecord // a rejected item exported: nothing approved
	}
	out := string(l.Output)
	if l.Output.Kind() == '"' {
		// An approved output given as a string holding the JSON.
		if err := jsonv2.Unmarshal(l.Output, &out); err != nil {
			return nil, fmt.Errorf("output: %s", shortErr(err))
		}
	}
	if r.Input == nil {
		r.NotReplayable = 1
		return r, nil
	}
	r.Outputs = []Stored{{Output: out, Old: OldApproved}}
	return r, nil
}

func hasValue(v jsontext.Value) bool { return len(v) > 0 && v.Kind() != 'n' }

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}
