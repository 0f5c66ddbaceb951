package proxy

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/contractd/contractd/internal/testkit"
)

// The request log line carries error_code only when the client got an
// error, as the audit line does: a 200's line has no "error_code":"".
func TestRequestLogErrorCode(t *testing.T) {
	for _, c := range []struct {
		name, answer string
		status       float64
		code         any // nil: the key is absent
	}{
		{"200", validAnswer, 200, nil},
		{"422", invalidAnswer, 422, "contract_violation"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, always(c.answer), cfg{})
			logs := &testkit.SyncBuffer{}
			h.srv.Logger = slog.New(slog.NewJSONHandler(logs, nil))
			r := h.post("", `{"model":"free","messages":[`+userHi+`]}`)
			id := wantRequestID(t, r)
			var line map[string]any
			for _, l := range strings.Split(logs.String(), "\n") {
				var m map[string]any
				if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" && m["request_id"] == id {
					line = m
				}
			}
			if line == nil {
				t.Fatalf("no request line for %s:\n%s", id, logs)
			}
			code, has := line["error_code"]
			if line["status"] != c.status || (c.code == nil && has) || (c.code != nil && code != c.code) {
				t.Errorf("request line %v: want status %v, error_code %v (nil: absent)", line, c.status, c.code)
			}
		})
	}
}
