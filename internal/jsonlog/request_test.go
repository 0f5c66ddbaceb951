package jsonlog

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// request writes l through HandleRequest and l.Record() through
// slog.JSONHandler, and fails when their bytes differ.
func request(t testing.TB, l Request) {
	t.Helper()
	var want, got bytes.Buffer
	ctx := context.Background()
	errRef := slog.NewJSONHandler(&want, nil).Handle(ctx, l.Record())
	err := New(&got, nil).HandleRequest(ctx, l)
	sameLine(t, "HandleRequest", want.String(), got.String(), errRef, err)
}

// The request line written from its fields is slog's line for its record,
// byte for byte: with and without error_code, audit_failed and trace ids,
// awkward strings, every float form JSON has, odd levels and times (those
// outside years 0-9999, and durations JSON cannot hold, go through Handle).
func TestRequestMatchesSlog(t *testing.T) {
	now := time.Now()
	base := Request{Time: now, Level: slog.LevelInfo, RequestID: "req_0123456789abcdef01234567", Route: "triage",
		Outcome: "passthrough", Status: 200, Attempts: 1, DurationMS: 0.412}
	request(t, base)
	failed := base
	failed.Outcome, failed.Status, failed.Attempts, failed.ErrorCode, failed.Level = "upstream_error", 502, 0, "upstream_error", slog.LevelWarn
	request(t, failed)
	lost := failed
	lost.AuditFailed = true
	request(t, lost)
	traced := lost
	traced.Traced = true
	copy(traced.TraceID[:], "\x4b\xf9\x2f\x35\x77\xb3\x4d\xa6\xa3\xce\x92\x9d\x0e\x0e\x47\x36")
	copy(traced.SpanID[:], "\x00\xf0\x67\xaa\x0b\xa9\x02\xb7")
	request(t, traced)

	for _, f := range []float64{0, math.Copysign(0, -1), 1e-6, 9.99e-7, 1e21, 1e20, 5e-324, 1.0 / 3, math.Inf(1), math.NaN()} {
		l := base
		l.DurationMS = f
		request(t, l)
	}
	for _, tm := range []time.Time{{}, time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", -5*3600-1800)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)} {
		l := base
		l.Time = tm
		request(t, l)
	}

	rng := rand.New(rand.NewPCG(3, 4))
	rs := awkwardStrings(rng)
	for range 3000 {
		l := Request{Time: now.Add(time.Duration(rng.Int64N(1e15))), Level: slog.Level(rng.IntN(20) - 6),
			RequestID: rs(), Route: rs(), Outcome: rs(), Status: rng.IntN(1000) - 100, Attempts: rng.IntN(5),
			DurationMS: rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20)), AuditFailed: rng.IntN(2) == 0, Traced: rng.IntN(2) == 0}
		if rng.IntN(2) == 0 {
			l.ErrorCode = rs()
		}
		for i := range l.TraceID {
			l.TraceID[i] = byte(rng.IntN(256))
		}
		for i := range l.SpanID {
			l.SpanID[i] = byte(rng.IntN(256))
		}
		request(t, l)
	}
}

// A request line and lines through slog's path, written at once, never
// interleave; a write error is returned.
func TestRequestLinesWhole(t *testing.T) {
	var buf bytes.Buffer
	h := New(&buf, nil)
	l := slog.New(h).With("request_id", "req_x")
	done := make(chan struct{})
	go func() {
		for range 300 {
			l.Info("other", "k", "v")
		}
		close(done)
	}()
	for range 300 {
		_ = h.HandleRequest(context.Background(), Request{Time: time.Now(), RequestID: "req_y", Route: strings.Repeat("r", 300), DurationMS: 0.5})
	}
	<-done
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 600 {
		t.Fatalf("%d lines, want 600", len(lines))
	}
	for _, line := range lines {
		if !strings.HasPrefix(line, `{"time":"`) || !strings.HasSuffix(line, `"duration_ms":0.5}`) && !strings.HasSuffix(line, `"k":"v"}`) {
			t.Fatalf("broken line %q", line)
		}
	}
	if err := New(failWriter{}, nil).HandleRequest(context.Background(), Request{Time: time.Now()}); err == nil {
		t.Fatal("no error from a failing writer")
	}
}

func FuzzRequestMatchesSlog(f *testing.F) {
	f.Add("req_0123456789abcdef01234567", "triage", "valid", "", 0.412, int64(200), true)
	f.Add("\u2028\xff\"", "\x00<>&\\", "", "code", 1e-7, int64(-1), false)
	f.Fuzz(func(t *testing.T, id, route, outcome, code string, d float64, n int64, flag bool) {
		request(t, Request{Time: time.Unix(0, n), Level: slog.Level(n % 13), RequestID: id, Route: route, Outcome: outcome,
			Status: int(n), Attempts: int(n % 7), DurationMS: d, ErrorCode: code, AuditFailed: flag, Traced: !flag,
			TraceID: [16]byte{byte(n), 1, 2}, SpanID: [8]byte{byte(n >> 8), 9}})
	})
}

// The line's time is formatted from the last line's second and zone when
// it falls in the same second and Location: lines written one after
// another through one handler, across seconds, zones (a DST change
// included when the zone database is there), fractions with trailing
// zeros and none, are slog's lines byte for byte, through both paths.
func TestLineTimesMatchSlog(t *testing.T) {
	now := time.Now()
	sec := now.Truncate(time.Second)
	east := time.FixedZone("east", 5*3600+30*60)
	west := time.FixedZone("west", -(3*3600 + 15*60 + 7))
	times := []time.Time{now, now.Add(1), sec, sec.Add(100 * time.Millisecond), sec.Add(time.Second - 1),
		sec.Add(time.Second), sec.Add(time.Second).In(east), sec.Add(time.Second + 5).In(east), now.In(west), now.UTC(), now,
		sec.Add(-time.Hour), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(0, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 500, time.UTC), time.Date(1969, 12, 31, 23, 59, 59, 500, west), now}
	if ny, err := time.LoadLocation("America/New_York"); err == nil {
		change := time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC) // 02:00 EST becomes 03:00 EDT
		times = append(times, change.Add(-time.Second).In(ny), change.Add(-1).In(ny), change.In(ny), change.Add(1).In(ny))
	}
	var got bytes.Buffer
	h := New(&got, nil)
	ctx := context.Background()
	for i, tm := range times {
		for _, viaRecord := range []bool{false, true} {
			l := Request{Time: tm, Level: slog.LevelInfo, RequestID: "req_1", Route: "r", Outcome: "valid", Status: 200, Attempts: 1, DurationMS: 1.5}
			var want bytes.Buffer
			_ = slog.NewJSONHandler(&want, nil).Handle(ctx, l.Record())
			got.Reset()
			if viaRecord {
				_ = h.Handle(ctx, l.Record())
			} else {
				_ = h.HandleRequest(ctx, l)
			}
			if got.String() != want.String() {
				t.Errorf("time %d (%v), through Handle %v:\n got %s\nwant %s", i, tm, viaRecord, got.String(), want.String())
			}
		}
	}
}
