package proxy

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/internal/testkit"
)

// panicMarker is in the panic's value: it must reach neither the log
// (it stands for request text or a key) nor the client.
const panicMarker = "panic-detail-7f3a: upstream client state"

// panickingTransport stands for a bug anywhere below the pipeline: the
// upstream call panics in the request's goroutine.
type panickingTransport struct{}

func (panickingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	panic(panicMarker)
}

// A panic while a request is handled, on a contract route and on a
// passthrough route, answers 500 server_error/internal_error with no
// detail (not a dropped connection), writes the audit line and the
// request's metrics once, and logs the panic with its stack and the
// request id. (Before: net/http recovered it, the client saw EOF, and
// neither an audit line nor a metric recorded the request.)
func TestPanicAnswers500AndIsRecorded(t *testing.T) {
	for _, c := range []struct{ name, path, body string }{
		{"contract route", "", `{"model":"free","messages":[` + userHi + `]}`},
		{"passthrough route", "/r/raw-fast/v1/chat/completions", `{"model":"x","messages":[` + userHi + `]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, always(validAnswer), cfg{})
			logs := &testkit.SyncBuffer{}
			h.srv.Logger = slog.New(slog.NewJSONHandler(logs, nil))
			tel := &doneEvents{}
			h.srv.Telemetry = tel
			orig := h.caller.Client.Transport
			h.caller.Client.Transport = panickingTransport{}

			r := h.post(c.path, c.body)
			wantError(t, r, http.StatusInternalServerError, typeServer, CodeInternal, nil)
			if strings.Contains(string(r.Body), "panic-detail") || strings.Contains(string(r.Body), "goroutine") {
				t.Errorf("the 500 shows internal detail: %s", r.Body)
			}
			id := wantRequestID(t, r)

			ev := h.sink.waitEvent(t, id)
			if ev.Outcome != audit.OutcomeRejected || ev.Status != 500 || ev.ErrorCode != string(CodeInternal) {
				t.Errorf("audit outcome %q status %d error_code %q, want rejected 500 internal_error", ev.Outcome, ev.Status, ev.ErrorCode)
			}
			if n := len(h.sink.Events()); n != 1 {
				t.Errorf("%d audit events, want 1", n)
			}
			tel.mu.Lock()
			if len(tel.evs) != 1 || tel.evs[0].RequestID != id || tel.evs[0].Outcome != audit.OutcomeRejected || tel.evs[0].Status != 500 {
				t.Errorf("metrics saw %+v, want the one rejected 500", tel.evs)
			}
			tel.mu.Unlock()

			var line string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, `"msg":"panic serving request"`) {
					if line != "" {
						t.Errorf("the panic is logged twice")
					}
					line = l
				}
			}
			switch {
			case line == "":
				t.Fatalf("no panic line in the log:\n%s", logs)
			case !strings.Contains(line, `"level":"ERROR"`) || !strings.Contains(line, `"request_id":"`+id+`"`):
				t.Errorf("panic line without ERROR level or the request id: %s", line)
			case strings.Contains(line, "panic-detail"):
				// The value may hold request or model text or a key
				// (docs/security.md): its type and a description stand
				// for it.
				t.Errorf("the panic's value reached the log: %s", line)
			case !strings.Contains(line, `"panic_type":"string"`) || !strings.Contains(line, `"panic":"value withheld (`):
				t.Errorf("panic line without the value's type and description: %s", line)
			case !strings.Contains(line, "panickingTransport.RoundTrip"):
				t.Errorf("panic line without the stack of the panic: %s", line)
			}
			if strings.Contains(logs.String(), upstreamKey) || strings.Contains(logs.String(), clientKey) {
				t.Errorf("a key reached the log")
			}

			// The server goes on serving.
			h.caller.Client.Transport = orig
			if r := h.post(c.path, c.body); r.Status != 200 {
				t.Errorf("after the panic: status %d %s", r.Status, r.Body)
			}
		})
	}
}
