package replay

import (
	"errors"
	"strings"
	"testing"
)

// TestParseLineAcrossVersions: a request line as the first contractd
// release wrote it (no "event", "api" or "error_code") and one from a later
// version with members this one does not know are both read; a later
// event kind is skipped, not reported as unreadable.
func TestParseLineAcrossVersions(t *testing.T) {
	first := `{"time":"2026-11-21T10:00:00Z","request_id":"req_old","route":"r","outcome":"valid","status":200,"duration_ms":12.5,` +
		`"prompt":{"name":"p","sha256":"aa"},"contract":{"name":"k","sha256":"bb"},"input_sha256":"cc",` +
		`"attempts":[{"attempt":1,"temperature":0.7,"shortened":false,"finish_reason":"stop","upstream_status":200,"latency_ms":3,"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2},"violations":[{"kind":"schema","path":"/a","rule":"type","message":"m"}],"output_sha256":"dd","output":"{\"a\":\"x\"}"},` +
		`{"attempt":2,"temperature":0,"shortened":true,"finish_reason":"stop","upstream_status":200,"latency_ms":3,"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2},"violations":null,"output_sha256":"ee","output":"{\"a\":1}"}],` +
		`"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4},"budget":null,"input":{"x":"y"}}`
	rec, err := ParseLine([]byte(first))
	if err != nil || rec.ID != "req_old" || len(rec.Outputs) != 2 || rec.Outputs[0].Old != OldInvalid || rec.Outputs[1].Old != OldValid || rec.Outputs[1].Attempt != 2 {
		t.Fatalf("first release's line: %+v %v", rec, err)
	}
	later := strings.Replace(first, `{"time"`, `{"event":"request","api":"responses","tenant":{"id":7},"time"`, 1)
	later = strings.Replace(later, `"output":"{\"a\":1}"}`, `"output":"{\"a\":1}","cached":true}`, 1)
	if rec, err := ParseLine([]byte(later)); err != nil || len(rec.Outputs) != 2 {
		t.Fatalf("later line with unknown members: %+v %v", rec, err)
	}
	kind := strings.Replace(later, `"event":"request"`, `"event":"request_summary"`, 1)
	if _, err := ParseLine([]byte(kind)); !errors.Is(err, ErrNotRecord) {
		t.Fatalf("a later event kind: %v, want ErrNotRecord", err)
	}
}

// TestItemLineOneLine: an id or route that is empty or holds spaces or
// control characters (an export line is anyone's JSON) is quoted, so each
// item stays one line of the same fields.
func TestItemLineOneLine(t *testing.T) {
	it := &Item{ID: "req_1\nreq_2#approved triage approved -> valid", Route: "", Old: OldApproved, New: NewUnjudged, Reason: `route "" is not in the config`}
	got := ItemLine(it)
	want := `"req_1\nreq_2#approved triage approved -> valid" "" approved -> unjudged: route "" is not in the config`
	if got != want {
		t.Fatalf("ItemLine:\n got %s\nwant %s", got, want)
	}
	if got := ItemLine(&Item{ID: "req_9#1", Route: "triage", Old: OldValid, New: NewValid}); got != "req_9#1 triage valid -> valid" {
		t.Fatalf("plain ItemLine: %s", got)
	}
}
