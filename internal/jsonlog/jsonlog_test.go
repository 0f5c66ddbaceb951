package jsonlog

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// both logs r through slog.JSONHandler and through Handler and fails
// when their bytes differ.
func both(t testing.TB, level slog.Leveler, r slog.Record) {
	t.Helper()
	var want, got bytes.Buffer
	ctx := context.Background()
	ref := slog.NewJSONHandler(&want, &slog.HandlerOptions{Level: level})
	h := New(&got, level)
	if ref.Enabled(ctx, r.Level) != h.Enabled(ctx, r.Level) {
		t.Fatalf("Enabled(%v): slog %v, Handler %v", r.Level, ref.Enabled(ctx, r.Level), h.Enabled(ctx, r.Level))
	}
	errRef, err := ref.Handle(ctx, r.Clone()), h.Handle(ctx, r.Clone())
	sameLine(t, "Handler", want.String(), got.String(), errRef, err)
}

// awkwardStrings returns random strings of up to 11 pieces, each plain or
// one that JSON escapes or slog and encoding/json write apart: quotes,
// control bytes, DEL, HTML characters, multibyte runes, invalid and cut
// UTF-8, U+2028 and U+2029.
func awkwardStrings(rng *rand.Rand) func() string {
	alphabet := []string{"a", "Z", "0", " ", `"`, `\`, "\n", "\t", "\x00", "\x1b", "\x7f", "<", "&", "é", "日", "🙂", "\xff", "\u2028", "\u2029", "\xe2\x80", "…"}
	return func() string {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
}

// sameLine fails when what slog.JSONHandler wrote (want, errRef) and what
// this package's fn wrote (got, err) differ, in their bytes or in whether
// they failed.
func sameLine(t testing.TB, fn, want, got string, errRef, err error) {
	t.Helper()
	if (errRef == nil) != (err == nil) {
		t.Fatalf("errors differ: slog %v, %s %v", errRef, fn, err)
	}
	if got != want {
		t.Fatalf("line differs:\n%-14s %q\n%-14s %q", "slog:", want, fn+":", got)
	}
}

// The request line, and records with every kind of attribute and awkward
// strings, numbers, levels and times, come out exactly as slog's JSON
// handler writes them (the fast path, and the fallback for the rest).
func TestJSONHandlerMatchesSlog(t *testing.T) {
	now := time.Now()
	req := slog.NewRecord(now, slog.LevelInfo, "request", 0)
	req.AddAttrs(slog.String("request_id", "req_0123456789abcdef01234567"), slog.String("route", "triage"),
		slog.String("outcome", "success"), slog.Int("status", 200), slog.Int("attempts", 1),
		slog.Float64("duration_ms", 0.412),
		slog.String("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736"), slog.String("span_id", "00f067aa0ba902b7"))
	both(t, nil, req)
	// A request that failed: its line carries error_code (a 200's has none).
	failed := slog.NewRecord(now, slog.LevelInfo, "request", 0)
	failed.AddAttrs(slog.String("request_id", "req_0123456789abcdef01234567"), slog.String("route", "triage"),
		slog.String("outcome", "needs_review"), slog.Int("status", 422), slog.Int("attempts", 2),
		slog.Float64("duration_ms", 22.307), slog.String("error_code", "contract_violation"))
	both(t, nil, failed)

	strs := []string{"", "plain", `quote " and \ backslash`, "tab\tnl\ncr\r", "\x00\x01\x1f\x7f", "bs\bff\f", "<html>&amp;'",
		"é ü 日本語 🙂", "bad \xff utf8 \xc3", "\u2028line\u2029para", strings.Repeat("long ", 5000), "\xed\xa0\x80 surrogate"}
	floats := []float64{0, math.Copysign(0, -1), 0.412, -1.5, 1e-6, 9.99e-7, 1e-7, 1.5e-10, 1e20, 1e21, 1.7976931348623157e308,
		5e-324, 123456789.123, 1.0 / 3, math.Inf(1), math.Inf(-1), math.NaN()}
	levels := []slog.Level{slog.LevelDebug - 3, slog.LevelDebug, slog.LevelInfo, slog.LevelInfo + 2, slog.LevelWarn, slog.LevelError, slog.LevelError + 7}
	times := []time.Time{{}, now, time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", -5*3600-1800)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, s := range strs {
		r := slog.NewRecord(now, slog.LevelInfo, s, 0)
		r.AddAttrs(slog.String(s+"k", s), slog.String("v", s))
		both(t, nil, r)
	}
	for _, f := range floats {
		r := slog.NewRecord(now, slog.LevelWarn, "float", 0)
		r.AddAttrs(slog.Float64("f", f), slog.Int("after", 1))
		both(t, nil, r)
	}
	for _, l := range levels {
		for _, minLevel := range []slog.Leveler{nil, slog.LevelDebug, slog.LevelError} {
			both(t, minLevel, slog.NewRecord(now, l, "level", 0))
		}
	}
	for _, tm := range times {
		both(t, nil, slog.NewRecord(tm, slog.LevelInfo, "time", 0))
	}
	// Every other kind of attribute: written by slog itself.
	other := slog.NewRecord(now, slog.LevelInfo, "other", 0)
	other.AddAttrs(slog.Uint64("u", math.MaxUint64), slog.Int64("i", math.MinInt64), slog.Bool("b", true), slog.Bool("f", false),
		slog.Duration("d", 1500*time.Millisecond), slog.Time("t", now), slog.Any("err", errors.New("boom")),
		slog.Any("m", map[string]int{"a": 1}), slog.Group("g", slog.String("x", "y")), slog.Group("empty"),
		slog.Any("lv", logValue{}), slog.String("", "empty key"), slog.Attr{})
	both(t, nil, other)
	for _, a := range []slog.Attr{slog.Uint64("u", 7), slog.Duration("d", -time.Nanosecond), slog.Bool("b", true), slog.String("", "x"), {}} {
		r := slog.NewRecord(now, slog.LevelInfo, "one", 0)
		r.AddAttrs(a)
		both(t, nil, r)
	}

	// Random records of the kinds the fast path writes.
	rng := rand.New(rand.NewPCG(1, 2))
	rs := awkwardStrings(rng)
	for range 3000 {
		r := slog.NewRecord(now.Add(time.Duration(rng.Int64N(1e15))), slog.Level(rng.IntN(20)-6), rs(), 0)
		for range rng.IntN(8) {
			k := rs() + "k"
			switch rng.IntN(6) {
			case 0:
				r.AddAttrs(slog.String(k, rs()))
			case 1:
				r.AddAttrs(slog.Int64(k, rng.Int64()-math.MaxInt64/2))
			case 2:
				r.AddAttrs(slog.Uint64(k, rng.Uint64()))
			case 3:
				r.AddAttrs(slog.Float64(k, math.Float64frombits(rng.Uint64())))
			case 4:
				r.AddAttrs(slog.Float64(k, rng.NormFloat64()*math.Pow(10, float64(rng.IntN(50)-25))))
			case 5:
				r.AddAttrs(slog.Bool(k, rng.IntN(2) == 0), slog.Duration(k, time.Duration(rng.Int64())))
			}
		}
		both(t, nil, r)
	}
}

type logValue struct{}

func (logValue) LogValue() slog.Value { return slog.StringValue("resolved") }

// Loggers derived with With and WithGroup, and the level a reload sets,
// behave as slog's JSON handler's.
func TestJSONHandlerDerivedAndLevel(t *testing.T) {
	var want, got bytes.Buffer
	lv := new(slog.LevelVar)
	ref := slog.New(slog.NewJSONHandler(&want, &slog.HandlerOptions{Level: lv}))
	l := slog.New(New(&got, lv))
	for _, lg := range []*slog.Logger{ref, l} {
		lg.Info("plain", "n", 1)
		lg.With("request_id", "req_1").Warn("request failed", "code", "upstream_error")
		lg.WithGroup("g").Info("grouped", "k", "v")
		lg.Debug("hidden")
		lv.Set(slog.LevelDebug)
		lg.Debug("shown", "f", 2.5)
		lv.Set(slog.LevelError)
		lg.Warn("hidden too")
		lv.Set(slog.LevelInfo)
	}
	// Times differ between the two loggers' calls: compare without them.
	strip := func(s string) string {
		var out []string
		for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
			_, rest, ok := strings.Cut(line, `","level"`)
			if !ok {
				t.Fatalf("no time in %q", line)
			}
			out = append(out, rest)
		}
		return strings.Join(out, "\n")
	}
	if w, g := strip(want.String()), strip(got.String()); w != g {
		t.Fatalf("lines differ:\nslog:\n%s\nHandler:\n%s", w, g)
	}
	if n := strings.Count(got.String(), "\n"); n != 4 {
		t.Fatalf("%d lines, want 4:\n%s", n, got.String())
	}
}

// Lines written at once by many goroutines, through the fast path and
// through derived loggers (slog's path), never interleave.
func TestJSONHandlerLinesWhole(t *testing.T) {
	var buf bytes.Buffer // not safe for concurrent use: the handler's lock is
	l := slog.New(New(&buf, nil))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			lg := l
			if g%2 == 1 {
				lg = l.With("request_id", "req_x")
			}
			for i := range 200 {
				lg.Info("request", "route", strings.Repeat("r", g*50), "i", i, "duration_ms", 0.5)
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 1600 {
		t.Fatalf("%d lines, want 1600", len(lines))
	}
	for _, line := range lines {
		if !strings.HasPrefix(line, `{"time":"`) || !strings.HasSuffix(line, `"duration_ms":0.5}`) {
			t.Fatalf("broken line %q", line)
		}
	}
}

// A write error is returned, as slog's handler returns it.
func TestJSONHandlerWriteError(t *testing.T) {
	h := New(failWriter{}, nil)
	if err := h.Handle(context.Background(), slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)); err == nil {
		t.Fatal("no error from a failing writer")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func FuzzJSONHandlerMatchesSlog(f *testing.F) {
	f.Add("request", "req_0123456789abcdef01234567", 0.412, int64(200), uint64(1))
	f.Add("\u2028\xff\"", "\x00<>&\\", 1e-7, int64(-1), uint64(0))
	f.Fuzz(func(t *testing.T, msg, s string, fl float64, n int64, u uint64) {
		r := slog.NewRecord(time.Unix(0, n), slog.Level(n%13), msg, 0)
		r.AddAttrs(slog.String(s, s), slog.Float64("f", fl), slog.Int64("n", n), slog.Uint64("u", u),
			slog.Bool("b", n%2 == 0), slog.Duration("d", time.Duration(n)))
		both(t, nil, r)
	})
}

// thousandthsAgree fails t when appendThousandths writes f otherwise than
// strconv's shortest form (appendJSONFloat's general path; f is in its
// 'f' range).
func thousandthsAgree(t *testing.T, f float64) bool {
	t.Helper()
	got, ok := appendThousandths(nil, f)
	if ok {
		if want := strconv.FormatFloat(f, 'f', -1, 64); string(got) != want {
			t.Errorf("%v: wrote %s, strconv %s", f, got, want)
		}
	}
	return ok
}

// TestThousandthsAgree: durations of whole microseconds, as milliseconds,
// take the short path and write strconv's digits; other values either
// agree or are left to strconv.
func TestThousandthsAgree(t *testing.T) {
	for _, us := range []int64{0, 1, 9, 10, 100, 999, 1000, 1001, 1500, 12345, 468000, 999999, 1000000, 123456789, 999999999999} {
		if !thousandthsAgree(t, float64(us)/1000) {
			t.Errorf("%d us: not taken by the short path", us)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		thousandthsAgree(t, float64(rng.Int64N(1e12))/1000)
		thousandthsAgree(t, rng.Float64()*1e9)
	}
	for _, f := range []float64{math.Copysign(0, -1), -1, 1e9, 0.0005, 1e-7, 0.1 + 0.2, math.Nextafter(0.468, 1)} {
		thousandthsAgree(t, f)
	}
	if _, ok := appendThousandths(nil, math.Copysign(0, -1)); ok {
		t.Error("-0 taken by the short path (strconv writes -0)")
	}
}

func FuzzThousandthsAgree(f *testing.F) {
	for _, v := range []float64{0, 0.001, 0.468, 12.5, 999999999.999} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) { thousandthsAgree(t, v) })
}
