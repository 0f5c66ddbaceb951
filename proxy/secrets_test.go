package proxy

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
)

// hexKey is an upstream key of no recognisable shape (as Azure's 32 hex
// characters are): only the exact-key replacement can redact it.
const hexKey = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"

// keyPiece reports the longest piece of key (from its start, 6 bytes or
// more) that s holds, or "".
func keyPiece(s, key string) string {
	for n := len(key); n >= 6; n-- {
		if strings.Contains(s, key[:n]) {
			return key[:n]
		}
	}
	return ""
}

// An upstream message that echoes the upstream key near its 300-byte cut
// (contract routes) or a relayed error body that holds it across the
// 1 MiB cut (passthrough) must not reach the client or the logs with a
// piece of the key: the cut came before the redaction, which then no
// longer found the whole key.
func TestUpstreamKeyAcrossTheCutIsRedacted(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		pad              int // bytes before the key in the upstream's message or body
	}{
		{"contract chat", "", `{"model":"free","messages":[` + userHi + `]}`, 300 - 12},
		{"contract responses", respPath, `{"model":"free","input":"hi"}`, 300 - 20},
		{"passthrough", "", `{"model":"raw-fast"}`, maxErrorBody - 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
				key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
				if tc.pad > 1000 {
					// A relayed body: the key sits across the read limit.
					reply(w, 401, []byte(strings.Repeat(" ", tc.pad)+key+` {"error":{"message":"bad key"}}`))
					return
				}
				reply(w, 401, []byte(`{"error":{"message":"`+strings.Repeat("x", tc.pad)+key+` is not a valid key"}}`))
			}, cfg{})
			h.caller.Keys = func(u *config.Upstream) string { return hexKey }
			var logs testkit.SyncBuffer
			h.srv.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			r := h.post(tc.path, tc.body)
			if r.Status < 400 {
				t.Fatalf("status %d", r.Status)
			}
			if p := keyPiece(string(r.Body), hexKey); p != "" {
				t.Errorf("the client's %d answer holds %q of the upstream key", r.Status, p)
			}
			if p := keyPiece(logs.String(), hexKey); p != "" {
				t.Errorf("the logs hold %q of the upstream key", p)
			}
		})
	}
}
