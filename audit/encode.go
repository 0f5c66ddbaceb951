package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/internal/jsonstr"
)

// appendEvent appends ev's audit line (with its newline) to b: the bytes
// json.Encoder with SetEscapeHTML(false) writes for an Event, field for
// field, without reflection. Every request writes one; TestAppendEvent
// holds it to encoding/json's output.
func appendEvent(b []byte, ev *Event) ([]byte, error) {
	b = jsonstr.AppendField(b, `{"event":`, string(ev.Event))
	b = append(b, `,"time":`...)
	var err error
	if b, err = appendTime(b, ev.Time); err != nil {
		return b, err
	}
	b = jsonstr.AppendField(b, `,"request_id":`, ev.RequestID)
	b = jsonstr.AppendField(b, `,"route":`, ev.Route)
	if ev.API != "" {
		b = jsonstr.AppendField(b, `,"api":`, ev.API)
	}
	b = jsonstr.AppendField(b, `,"outcome":`, string(ev.Outcome))
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(ev.Status), 10)
	if b, err = appendFloatField(b, `,"duration_ms":`, ev.DurationMS); err != nil {
		return b, err
	}
	b = append(b, `,"prompt":`...)
	b = appendRef(b, ev.Prompt)
	b = append(b, `,"contract":`...)
	b = appendRef(b, ev.Contract)
	b = jsonstr.AppendField(b, `,"input_sha256":`, ev.InputSHA256)
	b = append(b, `,"attempts":`...)
	if ev.Attempts == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range ev.Attempts {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendAttempt(b, &ev.Attempts[i]); err != nil {
				return b, err
			}
		}
		b = append(b, ']')
	}
	b = append(b, `,"usage":`...)
	b = ev.Usage.AppendJSON(b)
	b = append(b, `,"budget":`...)
	if ev.Budget == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"max_total_tokens":`...)
		b = strconv.AppendInt(b, int64(ev.Budget.MaxTotalTokens), 10)
		b = append(b, `,"used":`...)
		b = strconv.AppendInt(b, int64(ev.Budget.Used), 10)
		b = append(b, '}')
	}
	if ev.ErrorCode != "" {
		b = jsonstr.AppendField(b, `,"error_code":`, ev.ErrorCode)
	}
	if ev.Deduplicated {
		b = append(b, `,"deduplicated":true`...)
	}
	if ev.ReviewID != "" {
		b = jsonstr.AppendField(b, `,"review_id":`, ev.ReviewID)
	}
	if len(ev.Input) > 0 {
		b = append(b, `,"input":`...)
		// As encoding/json writes a RawMessage: checked and compacted.
		buf := bytes.NewBuffer(b)
		if err := json.Compact(buf, ev.Input); err != nil {
			return b, err
		}
		b = buf.Bytes()
	}
	return append(b, "}\n"...), nil
}

func appendRef(b []byte, r *Ref) []byte {
	if r == nil {
		return append(b, "null"...)
	}
	b = jsonstr.AppendField(b, `{"name":`, r.Name)
	b = jsonstr.AppendField(b, `,"sha256":`, r.SHA256)
	return append(b, '}')
}

// AppendJSON appends u's JSON as encoding/json writes it (the audit line
// and the proxy's answer both write usage).
func (u Usage) AppendJSON(b []byte) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
	return append(b, '}')
}

func appendAttempt(b []byte, a *Attempt) ([]byte, error) {
	var err error
	b = append(b, `{"attempt":`...)
	b = strconv.AppendInt(b, int64(a.Attempt), 10)
	if b, err = appendFloatField(b, `,"temperature":`, a.Temperature); err != nil {
		return b, err
	}
	b = append(b, `,"shortened":`...)
	b = strconv.AppendBool(b, a.Shortened)
	b = jsonstr.AppendField(b, `,"finish_reason":`, a.FinishReason)
	b = append(b, `,"upstream_status":`...)
	b = strconv.AppendInt(b, int64(a.UpstreamStatus), 10)
	if b, err = appendFloatField(b, `,"latency_ms":`, a.LatencyMS); err != nil {
		return b, err
	}
	b = append(b, `,"usage":`...)
	b = a.Usage.AppendJSON(b)
	b = append(b, `,"violations":`...)
	b = appendViolations(b, a.Violations)
	b = jsonstr.AppendField(b, `,"output_sha256":`, a.OutputSHA256)
	if a.Output != nil {
		b = jsonstr.AppendField(b, `,"output":`, *a.Output)
	}
	return append(b, '}'), nil
}

func appendViolations(b []byte, vs []contracts.Violation) []byte {
	if vs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range vs {
		v := &vs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonstr.AppendField(b, `{"kind":`, v.Kind)
		b = jsonstr.AppendField(b, `,"path":`, v.Path)
		b = jsonstr.AppendField(b, `,"rule":`, v.Rule)
		b = jsonstr.AppendField(b, `,"message":`, v.Message)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendTime is time.Time's MarshalJSON.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, errors.New("audit: event time year outside of range [0,9999]")
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

// appendFloatField appends key (as jsonstr.AppendField) and f as
// encoding/json writes a float64 (ES6 number formatting); NaN and
// infinities are an error there too.
func appendFloatField(b []byte, key string, f float64) ([]byte, error) {
	b = append(b, key...)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, errors.New("audit: unsupported value: " + strconv.FormatFloat(f, 'g', -1, 64))
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-09 → e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}
