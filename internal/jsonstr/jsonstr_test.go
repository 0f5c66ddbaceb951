package jsonstr

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// reference is what encoding/json writes for s with HTML escaping off.
func reference(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func FuzzAppendMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "plain", `q"b\s`, "\x00\x1f\b\f\n\r\t", "\u2028\u2029", "bad \xff utf8 \xc3", "<a&b>", "é日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Append([]byte("x"), s), append([]byte("x"), reference(s)...); !bytes.Equal(got, want) {
			t.Fatalf("Append(%q) = %s, encoding/json %s", s, got, want)
		}
	})
}

// slogReference is what log/slog's JSONHandler writes for s: a record's
// message, alone on its line.
func slogReference(s string) []byte {
	var b bytes.Buffer
	h := slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.LevelKey {
			return slog.Attr{}
		}
		return a
	}})
	_ = h.Handle(context.Background(), slog.NewRecord(time.Time{}, slog.LevelInfo, s, 0))
	return bytes.TrimPrefix(bytes.TrimSuffix(b.Bytes(), []byte("}\n")), []byte(`{"msg":`))
}

func FuzzAppendSlogMatchesSlog(f *testing.F) {
	for _, s := range []string{"", "plain", `q"b\s`, "\x00\x1f\b\f\n\r\t\x7f", "\u2028\u2029", "bad \xff utf8 \xc3", "<a&b>", "é日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := AppendSlog([]byte("x"), s), append([]byte("x"), slogReference(s)...); !bytes.Equal(got, want) {
			t.Fatalf("AppendSlog(%q) = %s, log/slog %s", s, got, want)
		}
	})
}
