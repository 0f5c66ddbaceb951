package proxy

import (
	"encoding/json"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/contractd/contractd/internal/jsonlog"
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

// The request line is the same whether the handler writes it from its
// fields (serve's, jsonlog.RequestHandler) or is given its record (any
// other): slog's line for a 200 and a 422, but for the time, request id and
// duration, which differ between two requests.
func TestRequestLineFieldsOrRecord(t *testing.T) {
	vary := regexp.MustCompile(`"time":"[^"]*"|"request_id":"[^"]*"|"duration_ms":[0-9.e+-]+`)
	for _, answer := range []string{validAnswer, invalidAnswer} {
		var lines [2]string
		for i, newHandler := range []func(io.Writer) slog.Handler{
			func(w io.Writer) slog.Handler { return jsonlog.New(w, nil) },
			func(w io.Writer) slog.Handler { return slog.NewJSONHandler(w, nil) },
		} {
			h := newHarness(t, always(answer), cfg{})
			logs := &testkit.SyncBuffer{}
			h.srv.Logger = slog.New(newHandler(logs))
			if _, ok := h.srv.Logger.Handler().(jsonlog.RequestHandler); ok != (i == 0) {
				t.Fatalf("handler %d: RequestHandler %v", i, ok)
			}
			id := wantRequestID(t, h.post("", `{"model":"free","messages":[`+userHi+`]}`))
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, `"msg":"request",`) && strings.Contains(l, id) {
					lines[i] = vary.ReplaceAllString(l, "")
				}
			}
		}
		if lines[0] == "" || lines[0] != lines[1] {
			t.Fatalf("request lines differ:\nfields: %s\nrecord: %s", lines[0], lines[1])
		}
	}
}
