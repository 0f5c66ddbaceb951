package e2e

import (
	"net"
	"strings"
	"testing"
	"time"
)

// serve whose listen address is taken exits 1 with one error line naming
// the config key and the address once: "server.listen 127.0.0.1:N: bind:
// address already in use". Before it said "listen 127.0.0.1:N: listen tcp
// 127.0.0.1:N: bind: address already in use" (the address twice, no key),
// and the admin listener's clash read the same.
func TestListenAddressInUse(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"listen", "admin_listen"} {
		t.Run(key, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			addr := ln.Addr().String()
			up := newUpstream(t, byModel)
			cfg := renderConfig(cfgOpts{upstream: up.URL()})
			if key == "listen" {
				cfg = edited(t, cfg, "listen: 127.0.0.1:0", "listen: "+addr)
			} else {
				cfg = edited(t, cfg, "admin_listen: 127.0.0.1:0", "admin_listen: "+addr)
			}
			d := startProcess(t, baseEnv(), "serve", "-c", writeConfig(t, t.TempDir(), cfg))
			if code := d.wait(20 * time.Second); code != 1 {
				t.Fatalf("exit %d, want 1", code)
			}
			l, ok := d.logLine(time.Second, msgIs("serve failed"))
			want := "server." + key + " " + addr + ": bind: address already in use"
			if e, _ := l["error"].(string); !ok || e != want {
				t.Errorf("serve failed line %v, want error %q", l, want)
			}
			if strings.Count(d.stderr.String(), "review store unavailable") > 0 {
				t.Errorf("a failed start logged the review store as unavailable:\n%s", d.stderr)
			}
		})
	}
}
