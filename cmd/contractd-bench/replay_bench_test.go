package main

// Replay benchmarks (docs/benchmarks.md, "Replay"): offline re-judging of
// an audit of the benchmark contract's 1.5 KB outputs, per core, against
// the judge alone as the baseline; and the peak RSS of the real binary
// replaying 10k and 1M audit lines (memory must not grow with the input).
//
//	make bench-replay

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/proxy"
	"github.com/contractd/contractd/replay"
)

// replayConfig is the benchmark config with the audit keeping content.
func replayConfig(upstreamURL string) string {
	return strings.Replace(configYAML("127.0.0.1:0", "127.0.0.1:0", upstreamURL, "info"),
		"audit:\n  sink: none\n", "audit:\n  sink: none\n  include_content: true\n", 1)
}

// auditLine is one real audit line: a request served in process with
// include_content, writing the benchmark output as attempt 1.
func auditLine(tb testing.TB) []byte {
	tb.Helper()
	rt, err := config.LoadBytes("bench.yaml", []byte(replayConfig("http://mock.invalid/v1")))
	if err != nil {
		tb.Fatal(err)
	}
	var buf testkit.SyncBuffer
	caller := proxy.NewCaller(func(*config.Upstream) string { return "" })
	caller.Client = &http.Client{Transport: memTransport{newMockUpstream()}}
	srv := proxy.NewServer(rt, caller, audit.NewWriter(&buf), nil)
	rec := httptest.NewRecorder()
	srv.Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(requestBody(""))))
	line := []byte(strings.TrimSpace(buf.String()))
	if rec.Code != 200 || !bytes.Contains(line, []byte(`"output":"{`)) {
		tb.Fatalf("HTTP %d, audit %s", rec.Code, line)
	}
	return line
}

// writeAudit writes n copies of line, each with its own request id.
func writeAudit(tb testing.TB, path string, line []byte, n int) int64 {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	i := bytes.Index(line, []byte(`"request_id":"req_`)) + len(`"request_id":"req_`)
	pre, post := line[:i], line[i+24:] // 24 hex digits
	for k := range n {
		w.Write(pre)
		fmt.Fprintf(w, "%024x", k)
		w.Write(post)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	st, _ := f.Stat()
	f.Close()
	return st.Size()
}

// BenchmarkReplayJudge is the baseline: serving's judge alone on the
// benchmark output, the subject already built (what replay cannot avoid).
func BenchmarkReplayJudge(b *testing.B) {
	rt, _ := config.LoadBytes("bench.yaml", []byte(replayConfig("http://mock.invalid/v1")))
	route := rt.Routes["triage"]
	subj, aerr := proxy.RequestSubject(route, requestBody(""))
	if aerr != nil {
		b.Fatal(aerr)
	}
	b.ReportAllocs()
	cpu := testkit.ProcessCPU()
	for b.Loop() {
		if v := proxy.Judge(route.Contract, benchOutput, "stop", false, &subj); !v.Valid {
			b.Fatal(v.Violations)
		}
	}
	b.ReportMetric(float64(b.N)/(testkit.ProcessCPU()-cpu).Seconds(), "outputs/cpu-s")
}

// BenchmarkReplayOffline is `contractd replay --audit` in process over
// 10,000 real audit lines with one worker: at -cpu 1 the outputs/s figure
// is per core (reading, decoding, rebuilding the subject, judging,
// reporting all share the one core).
func BenchmarkReplayOffline(b *testing.B) {
	dir := b.TempDir()
	rt, err := config.LoadBytes(filepath.Join(dir, "bench.yaml"), []byte(replayConfig("http://mock.invalid/v1")))
	if err != nil {
		b.Fatal(err)
	}
	const lines = 10000
	file := filepath.Join(dir, "audit.jsonl")
	size := writeAudit(b, file, auditLine(b), lines)
	b.SetBytes(size)
	b.ReportAllocs()
	runtime.GC()
	cpu := testkit.ProcessCPU()
	for b.Loop() {
		s, err := replay.Audit(context.Background(), replay.Options{Runtime: rt, Workers: 1, Out: io.Discard, Err: io.Discard}, []string{file})
		if err != nil || s.Total.StillValid != lines {
			b.Fatalf("%v %+v", err, s)
		}
	}
	b.ReportMetric(float64(b.N*lines)/(testkit.ProcessCPU()-cpu).Seconds(), "outputs/cpu-s")
}

// selfCPU is the CPU time (user + system) this process has used: on a
// shared machine, outputs per CPU-second is the per-core figure that
// other load does not distort the way wall time is.

// BenchmarkReplayBinary runs the real binary over 10k and 1M-line audits
// (generated in a temp dir, deleted after) and reports its peak RSS and
// outputs per CPU-second: flat memory means the 1M run peaks where the 10k
// run does. The cpu=1 cases run with GOMAXPROCS=1 and --workers 1, the
// per-core figure of the binary as users run it.
func BenchmarkReplayBinary(b *testing.B) {
	dir := b.TempDir()
	bin := testkit.BuildContractd(b)
	cfg := filepath.Join(dir, "contractd.yaml")
	if err := os.WriteFile(cfg, []byte(replayConfig("http://mock.invalid/v1")), 0o600); err != nil {
		b.Fatal(err)
	}
	line := auditLine(b)
	for _, n := range []int{10_000, 1_000_000} {
		file := filepath.Join(dir, fmt.Sprintf("audit-%d.jsonl", n))
		var size int64
		for _, oneCPU := range []bool{true, false} {
			name := fmt.Sprintf("lines=%d", n)
			if oneCPU {
				name = "cpu=1/" + name
			}
			b.Run(name, func(b *testing.B) {
				if size == 0 { // written once, on first use
					size = writeAudit(b, file, line, n)
				}
				var rss int64
				var heapStart, heapLive int // MB, from gctrace
				var elapsed, cpu time.Duration
				for b.Loop() {
					args := []string{"replay", "-c", cfg, "--audit", file}
					cmd := exec.Command(bin, args...)
					// gctrace prints each GC's heap sizes: the live heap after
					// collection is what must not grow with the input (RSS
					// also holds GOGC's headroom and what the OS has not
					// taken back yet).
					cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1")
					if oneCPU {
						cmd.Args = append(cmd.Args, "--workers", "1")
						cmd.Env = append(cmd.Env, "GOMAXPROCS=1")
					}
					var out, trace bytes.Buffer
					cmd.Stdout, cmd.Stderr = &out, &trace
					start := time.Now()
					if err := cmd.Run(); err != nil {
						b.Fatalf("replay: %v\n%s%s", err, out.String(), trace.String())
					}
					for _, m := range gcHeapRE.FindAllStringSubmatch(trace.String(), -1) {
						var start, live int
						fmt.Sscan(m[1], &start)
						fmt.Sscan(m[3], &live)
						heapStart, heapLive = max(heapStart, start), max(heapLive, live)
					}
					elapsed += time.Since(start)
					if !strings.Contains(out.String(), "no regression") {
						b.Fatalf("output:\n%s", out.String())
					}
					ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
					rss = max(rss, ru.Maxrss) // KiB on Linux
					cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
				}
				b.ReportMetric(float64(rss)/1024, "peak-RSS-MiB")
				b.ReportMetric(float64(heapStart), "peak-heap-MB")
				b.ReportMetric(float64(heapLive), "peak-live-heap-MB")
				b.ReportMetric(float64(size)/(1<<20), "input-MiB")
				b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "outputs/s")
				b.ReportMetric(float64(n*b.N)/cpu.Seconds(), "outputs/cpu-s")
			})
		}
		os.Remove(file)
	}
}

// gcHeapRE reads "A->B->C MB" of a gctrace line: heap at GC start, at GC
// end, and live.
var gcHeapRE = regexp.MustCompile(`(\d+)->(\d+)->(\d+) MB`)
