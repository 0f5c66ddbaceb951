package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/contractd/contractd/internal/jsonlog"
	"github.com/contractd/contractd/telemetry"
)

// TestRequestLogs: every log line the proxy writes is JSON with a
// request_id; each request's summary line also carries the trace_id and
// span_id of its server span.
func TestRequestLogs(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	res := runScenarios(t, h)
	spans := h.waitSpans(len(res))

	summary := map[string]map[string]any{}
	lines := strings.Split(strings.TrimSpace(h.logs.String()), "\n")
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, line)
		}
		rid, _ := m["request_id"].(string)
		if !requestIDRe.MatchString(rid) {
			t.Errorf("log line without a request_id: %s", line)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := m[k]; !ok {
				t.Errorf("log line without %s: %s", k, line)
			}
		}
		if m["msg"] == "request" {
			summary[rid] = m
		}
	}
	for _, sc := range scenarioOrder {
		r := res[sc]
		m, ok := summary[r.ID]
		if !ok {
			t.Errorf("%s: no request log line for %s", sc, r.ID)
			continue
		}
		srv := serverSpan(t, spans, r.ID)
		if m["trace_id"] != srv.SpanContext.TraceID().String() || m["span_id"] != srv.SpanContext.SpanID().String() {
			t.Errorf("%s: log trace %v/%v, server span %s/%s", sc, m["trace_id"], m["span_id"], srv.SpanContext.TraceID(), srv.SpanContext.SpanID())
		}
		if m["status"] != float64(r.Status) {
			t.Errorf("%s: log status %v, response %d", sc, m["status"], r.Status)
		}
	}
	// The upstream failure also logs its cause, with the request id.
	found := false
	for _, line := range lines {
		if strings.Contains(line, `"msg":"request failed"`) && strings.Contains(line, res["fail"].ID) {
			found = true
		}
	}
	if !found {
		t.Errorf("no 'request failed' line for the upstream failure")
	}
}

func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	h := telemetry.LogHandler(slog.NewJSONHandler(&buf, nil))
	if telemetry.LogHandler(h) != h {
		t.Error("LogHandler wraps twice")
	}
	log := slog.New(h).With("request_id", "req_x").WithGroup("g")
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	log.InfoContext(ctx, "with span", "a", 1)
	log.InfoContext(context.Background(), "without span", "a", 2)

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines %q", lines)
	}
	var with, without map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &with)
	_ = json.Unmarshal([]byte(lines[1]), &without)
	g, _ := with["g"].(map[string]any)
	if with["request_id"] != "req_x" || g == nil || g["trace_id"] != sc.TraceID().String() || g["span_id"] != sc.SpanID().String() {
		t.Errorf("with span: %s", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") || without["request_id"] != "req_x" {
		t.Errorf("without span: %s", lines[1])
	}
}

// The request line handed to the log handler as its fields
// (jsonlog.RequestHandler) gets the trace ids of a traced context exactly
// as its record does through Handle: the same bytes whether the handler
// below writes the fields itself (serve's) or is given the record (slog's).
func TestLogHandlerRequestLine(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, TraceFlags: trace.FlagsSampled})
	l := jsonlog.Request{Time: time.Now(), Level: slog.LevelInfo, RequestID: "req_1", Route: "hop", Outcome: "passthrough",
		Status: 200, Attempts: 1, DurationMS: 0.25}
	for _, ctx := range []context.Context{context.Background(), trace.ContextWithSpanContext(context.Background(), sc)} {
		var want, fields, record bytes.Buffer
		if err := telemetry.LogHandler(slog.NewJSONHandler(&want, nil)).Handle(ctx, l.Record()); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			buf *bytes.Buffer
			h   slog.Handler
		}{{&fields, jsonlog.New(&fields, nil)}, {&record, slog.NewJSONHandler(&record, nil)}} {
			rh, ok := telemetry.LogHandler(c.h).(jsonlog.RequestHandler)
			if !ok {
				t.Fatal("telemetry.LogHandler is not a jsonlog.RequestHandler")
			}
			if err := rh.HandleRequest(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		if fields.String() != want.String() || record.String() != want.String() {
			t.Fatalf("lines differ:\nHandle:                %q\nHandleRequest (fields): %q\nHandleRequest (record): %q", want.String(), fields.String(), record.String())
		}
		if traced := strings.Contains(want.String(), `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"}`); traced != trace.SpanContextFromContext(ctx).IsValid() {
			t.Fatalf("trace ids: %q", want.String())
		}
	}
}
