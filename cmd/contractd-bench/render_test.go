package main

import (
	"strings"
	"testing"
	"time"
)

// TestRenderEdgeNotMeasured: with -edge-pairs 0 no Responses/chat pair
// runs, and the report said the edge target was met at a ratio of 0.000,
// and then printed the edge's table as rows of zeros.
func TestRenderEdgeNotMeasured(t *testing.T) {
	cells := []cell{{}}
	cells[0].direct.Concurrency = 1
	out := render(options{}, cells, "bin", "0 0 0", "0 0 0", time.Second, 0)
	if strings.Contains(out, "Responses edge CPU per request over chat's (median over median)") || !strings.Contains(out, "Responses edge CPU per request over chat's: not measured (-edge-pairs 0") {
		t.Errorf("edge target line with no pairs:\n%s", out)
	}
	if strings.Contains(out, "| concurrency | pairs |") || !strings.Contains(out, "The Responses API edge: not measured in this run (-edge-pairs 0).") {
		t.Errorf("edge table with no pairs:\n%s", out)
	}
	cells[0].pairs, cells[0].cpuPerReqPaired, cells[0].respCPUPerReq = 4, 100*time.Microsecond, 105*time.Microsecond
	out = render(options{pairs: 4}, cells, "bin", "0 0 0", "0 0 0", time.Second, 0)
	if !strings.Contains(out, "worst concurrency: 1.050 at 1 (target <= 1.10): met") {
		t.Errorf("edge target line with pairs:\n%s", out)
	}
	if !strings.Contains(out, "| 1 | 4 | 100 µs | 105 µs | 1.050 |") || !strings.Contains(out, ", 4 pairs per run;") {
		t.Errorf("edge table with pairs:\n%s", out)
	}
}
