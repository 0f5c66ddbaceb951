package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/logbuf"
)

// The level comes from server.log_level, overridden by CONTRACTD_LOG_LEVEL;
// lines are JSON by default.
func TestNewLoggerLevels(t *testing.T) {
	for _, tt := range []struct {
		config      slog.Level // as config compiles server.log_level
		env         string
		debug, info bool
	}{
		{slog.LevelInfo, "", false, true},
		{slog.LevelDebug, "", true, true},
		{slog.LevelWarn, "", false, false},
		{slog.LevelWarn, "debug", true, true},
		{slog.LevelInfo, "error", false, false},
		{slog.LevelWarn, "nonsense", false, true},
	} {
		t.Setenv("CONTRACTD_LOG_LEVEL", tt.env)
		t.Setenv("CONTRACTD_LOG_FORMAT", "")
		var buf bytes.Buffer
		lv := new(slog.LevelVar)
		setLevel(lv, tt.config)
		l := newLogger(&buf, lv)
		l.Debug("d")
		l.Info("i")
		out := buf.String()
		if got := strings.Contains(out, `"msg":"d"`); got != tt.debug {
			t.Errorf("config %v env %q: debug logged %v", tt.config, tt.env, got)
		}
		if got := strings.Contains(out, `"msg":"i"`); got != tt.info {
			t.Errorf("config %v env %q: info logged %v", tt.config, tt.env, got)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Errorf("not a JSON line: %q", line)
			}
		}
	}
}

// BenchmarkRequestLine is serve's request line written to a file, line by
// line as before and through the batching writer serve now uses; and,
// batched, through slog's own JSON handler, which serve's handler
// (internal/jsonlog) writes the same bytes as.
func BenchmarkRequestLine(b *testing.B) {
	for _, tt := range []struct {
		name     string
		buffered bool
		slog     bool
	}{{"unbuffered", false, false}, {"batched", true, false}, {"batched-slog-handler", true, true}} {
		b.Run(tt.name, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "contractd.log"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			var w io.Writer = f
			if tt.buffered {
				lw := logbuf.New(f, logbuf.DefaultInterval)
				defer lw.Close()
				w = lw
			}
			lv := new(slog.LevelVar)
			h := newLogger(w, lv).Handler()
			if tt.slog {
				h = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv})
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				r := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
				r.AddAttrs(slog.String("request_id", "req_0123456789abcdef01234567"), slog.String("route", "triage"),
					slog.String("outcome", "success"), slog.Int("status", 200), slog.Int("attempts", 1),
					slog.Float64("duration_ms", 0.412))
				_ = h.Handle(ctx, r)
			}
		})
	}
}
