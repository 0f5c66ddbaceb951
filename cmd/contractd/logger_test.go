package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// The level comes from server.log_level, overridden by CONTRACTD_LOG_LEVEL;
// lines are JSON by default.
func TestNewLoggerLevels(t *testing.T) {
	for _, tt := range []struct {
		config, env string
		debug, info bool
	}{
		{"", "", false, true},
		{"debug", "", true, true},
		{"warn", "", false, false},
		{"warn", "debug", true, true},
		{"", "error", false, false},
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
			t.Errorf("config %q env %q: debug logged %v", tt.config, tt.env, got)
		}
		if got := strings.Contains(out, `"msg":"i"`); got != tt.info {
			t.Errorf("config %q env %q: info logged %v", tt.config, tt.env, got)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Errorf("not a JSON line: %q", line)
			}
		}
	}
}
