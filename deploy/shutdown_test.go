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
	b, err := os.ReadFile(filepath.Join("..", "proxy", "reviews.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^const closeDrainTimeout = ([0-9]+) \* time\.Second$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("proxy/reviews.go: no `const closeDrainTimeout = N * time.Second`; update this reader")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return time.Duration(n) * time.Second
}
