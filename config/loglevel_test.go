package config

import (
	"log/slog"
	"testing"
)

// TestLogLevel: server.log_level compiles to its slog.Level, in any case
// ("" is info); another value is a problem at its key.
func TestLogLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{"": slog.LevelInfo, "debug": slog.LevelDebug, "info": slog.LevelInfo, "WARN": slog.LevelWarn, "Error": slog.LevelError} {
		rt, err := LoadBytes("contractd.yaml", []byte("server: {log_level: \""+in+"\"}\n"))
		if err != nil {
			t.Fatalf("log_level %q: %v", in, err)
		}
		if rt.Server.LogLevel != want {
			t.Errorf("log_level %q: %v, want %v", in, rt.Server.LogLevel, want)
		}
	}
	wantProblem(t, problemsOf(t, "server: {log_level: verbose}\n"+base, nil), `server.log_level: unknown level "verbose" (debug, info, warn, error)`)
}
