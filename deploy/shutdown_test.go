package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/contractd/contractd/config"
)

// stopAfterDrain is what contractd may spend after its listeners have
// drained (shutdown_timeout): the review spool's last move into the store,
// the last span export (cmd/contractd's telemetryShutdownTimeout), then the
// audit sink's close waiting for a write in progress (audit.CloseWait).
func stopAfterDrain(t *testing.T, rt *config.Runtime) time.Duration {
	t.Helper()
	return closeDrainTimeout(t, rt) + sourceSeconds(t, filepath.Join("..", "cmd", "contractd", "serve.go"), "telemetryShutdownTimeout") +
		sourceSeconds(t, filepath.Join("..", "audit", "audit.go"), "CloseWait")
}

// sourceSeconds reads `const NAME = N * time.Second` from a Go file.
func sourceSeconds(t *testing.T, file, name string) time.Duration {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^const ` + name + ` = ([0-9]+) \* time\.Second$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no `const %s = N * time.Second`; update this reader", file, name)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return time.Duration(n) * time.Second
}

// closeDrainTimeout is how long contractd's review queue spends, after the
// listeners have drained, on a last move of the spool into the store
// (proxy.closeDrainTimeout; read from the source, since importing proxy
// would pull the product's server dependencies into this module). 0 with
// review.store none.
func closeDrainTimeout(t *testing.T, rt *config.Runtime) time.Duration {
	t.Helper()
	if rt.Review.Store == config.ReviewNone {
		return 0
	}
	return sourceSeconds(t, filepath.Join("..", "proxy", "reviews.go"), "closeDrainTimeout")
}
