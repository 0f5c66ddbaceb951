package deploy

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/contractd/contractd/config"
)

// baselineRSS is contractd's resident memory with nothing in flight, with
// room: 43 MiB idle with a tokenizer loaded (docs/deploy.md, "Sizing").
const baselineRSS = 80 << 20

// heldCopies: a body held in flight costs up to about three times its size
// while a contract route works on it (the body, its text, the upstream
// body; docs/security.md, "Sizing the limits").
const heldCopies = 3

// checkMemory checks a config against the hard memory limit it runs under
// (a container's limit, a unit's MemoryMax): Go's soft limit in force
// (GOMEMLIMIT, else server.memory_limit) is below it, and a full in-flight
// budget fits under it: heldCopies × max_inflight_bytes + baselineRSS.
// Past the hard limit the kernel kills the process, requests in flight
// and all.
func checkMemory(t *testing.T, what string, limit int64, rt *config.Runtime, gomemlimit string) {
	t.Helper()
	if limit <= 0 {
		t.Errorf("%s is not set: memory_limit auto sets no soft limit without a cgroup limit, and nothing bounds the heap", what)
		return
	}
	var soft int64
	var from string
	switch ml := rt.Server.MemoryLimit; {
	case gomemlimit != "":
		n, err := config.ParseSize(gomemlimit)
		if err != nil {
			t.Errorf("GOMEMLIMIT %q: %v", gomemlimit, err)
			return
		}
		soft, from = n, "GOMEMLIMIT"
	case ml.Bytes > 0:
		soft, from = ml.Bytes, "server.memory_limit"
	case ml.Auto:
		soft, from = limit/10*8, "server.memory_limit auto" // as serve computes it
	default:
		t.Errorf("server.memory_limit off under %s %s: garbage may grow the heap to the kill", what, mib(limit))
		return
	}
	if soft >= limit {
		t.Errorf("Go's soft memory limit (%s) %s is not below %s %s", from, mib(soft), what, mib(limit))
	}
	inflight := rt.Server.MaxInflightBytes
	if need := heldCopies*inflight + baselineRSS; need > limit {
		t.Errorf("server.max_inflight_bytes %s: %d× it plus the %s baseline is %s, above %s %s (set max_inflight_bytes to at most %s)",
			mib(inflight), heldCopies, mib(baselineRSS), mib(need), what, mib(limit), mib((limit-baselineRSS)/heldCopies))
	}
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

// systemdBytes reads a unit's byte size (MemoryMax=1G): a number with an
// optional K, M, G or T suffix (powers of 1024); 0 for "" or infinity.
func systemdBytes(v string) (int64, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "infinity" {
		return 0, nil
	}
	mult := int64(1)
	if i := strings.IndexAny(v, "KMGT"); i == len(v)-1 {
		mult = int64(1) << (10 * (1 + strings.IndexByte("KMGT", v[i])))
		v = v[:i]
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a byte size", v)
	}
	return n * mult, nil
}
