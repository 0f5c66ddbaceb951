// Command contractd-bench is a side-by-side load benchmark (make bench).
//
// In one run it starts an in-process mock upstream on 127.0.0.1 that
// answers a fixed ~1.5 KB nested chat completion, starts contractd (the
// real binary, a subprocess) in front of it on a contract route that
// validates that output (closed objects, enums, bounds, a pattern, a
// labels policy) and a passthrough route, and a bare httputil.ReverseProxy
// in a process of its own (the floor any Go proxy hop pays). For each
// concurrency it drives, interleaved, (a) the mock directly, (b) the bare
// proxy, (c) contractd's passthrough route and (d) its contract route, each
// for a fixed duration. It reports req/s, p50 and p99 of each, the latency
// contractd adds (over direct and over the bare proxy, same run, same
// concurrency), each proxy's CPU time per request and its ratio to the
// bare proxy's, and contractd's peak RSS (VmHWM of /proc/<pid>/status,
// reset before each phase).
//
// Everything is loopback and bounded in time: phases are capped at 60 s,
// concurrency at 512, runs at 10.
//
//	go run ./cmd/contractd-bench [-duration 5s] [-concurrency 1,16,64] [-runs 3] [-out docs/benchmarks.md]
//		[-targets bare,hop] [-edge-pairs 0]   (while iterating on one hop)
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/contractd/contractd/internal/sse"
)

// Targets (docs/benchmarks.md) on the reference 2-core machine.
const (
	targetAddedP50 = 500 * time.Microsecond // at concurrency 16
	targetAddedP99 = 2 * time.Millisecond   // at concurrency 16
	targetRPS      = 2000                   // through contractd, with validation
	targetRSS      = 100 << 20              // peak RSS at concurrency 64
	// CPU per request over the bare proxy's, and the latency
	// the contract route adds over the bare proxy at concurrency 1.
	targetContractCPU = 1.3
	targetHopCPU      = 1.1
	targetBareAddedC1 = 150 * time.Microsecond
	// The Responses edge's CPU per request over the chat edge's.
	targetRespRatio = 1.10
	edgePairs       = 4
	edgePhase       = time.Second
	edgeWarmup      = 200 * time.Millisecond
)

type options struct {
	duration, warmup time.Duration
	concs            []int
	runs             int
	bin              string
	rebuild          bool
	out              string
	logLevel         string
	gogc             string
	logBesideConfig  bool
	// only, when set, limits the measured targets (iterating on one hop);
	// pairs is the number of Responses/chat edge pairs per run.
	only  map[string]bool
	pairs int
}

func main() {
	os.Exit(mainErr())
}

func mainErr() int {
	var o options
	var concs, bareUpstream, bareListen, targets string
	flag.StringVar(&bareUpstream, "bare-proxy", "", "internal: run the bare proxy in front of this upstream URL")
	flag.StringVar(&bareListen, "listen", "", "internal: the bare proxy's listen address")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "measured duration of each phase (max 60s)")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured warm-up before each phase (max 10s)")
	flag.StringVar(&concs, "concurrency", "1,16,64", "comma-separated concurrency levels (each 1..512)")
	flag.IntVar(&o.runs, "runs", 1, "repeat the whole matrix and report medians (max 10)")
	flag.StringVar(&o.bin, "bin", "", "contractd binary (default: bin/contractd, built to a temp dir if missing)")
	flag.BoolVar(&o.rebuild, "build", false, "always build contractd from this tree into a temp dir")
	flag.StringVar(&o.out, "out", "", "also write the results section into this markdown file (e.g. docs/benchmarks.md)")
	flag.StringVar(&o.logLevel, "log-level", "info", "contractd's server.log_level for the run")
	flag.BoolVar(&o.logBesideConfig, "log-beside-config", false, "write contractd's log into the config's directory (measures what that costs)")
	flag.StringVar(&o.gogc, "gogc", "", "GOGC for the contractd process only (default: inherited)")
	flag.StringVar(&targets, "targets", "", "measure only these of direct,bare,hop,contractd (iterating; the report then has gaps)")
	flag.IntVar(&o.pairs, "edge-pairs", edgePairs, "Responses/chat edge pairs per run and concurrency (0: skip; max 10)")
	flag.Parse()
	if bareUpstream != "" {
		fmt.Fprintln(os.Stderr, "contractd-bench: bare proxy:", runBareProxy(bareListen, bareUpstream))
		return 1
	}
	if targets != "" {
		o.only = map[string]bool{}
		for _, t := range strings.Split(targets, ",") {
			switch t = strings.TrimSpace(t); t {
			case "direct", "bare", "hop", "contractd":
				o.only[t] = true
			default:
				fmt.Fprintf(os.Stderr, "contractd-bench: unknown target %q (direct, bare, hop, contractd)\n", t)
				return 2
			}
		}
	}
	if o.pairs < 0 || o.pairs > 10 {
		fmt.Fprintln(os.Stderr, "contractd-bench: -edge-pairs must be in [0, 10]")
		return 2
	}
	for _, s := range strings.Split(concs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 512 {
			fmt.Fprintf(os.Stderr, "contractd-bench: bad concurrency %q (1..512)\n", s)
			return 2
		}
		o.concs = append(o.concs, n)
	}
	if o.duration <= 0 || o.duration > time.Minute || o.warmup < 0 || o.warmup > 10*time.Second || o.runs < 1 || o.runs > 10 {
		fmt.Fprintln(os.Stderr, "contractd-bench: -duration must be in (0, 60s], -warmup in [0, 10s], -runs in [1, 10]")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "contractd-bench:", err)
		return 1
	}
	return 0
}

// cell is one (concurrency, target) result, the median over runs.
type cell struct {
	direct, proxied stats
	// bare is the bare httputil.ReverseProxy process; hop is the same
	// contractd binary on a passthrough route (no contract work).
	bare, hop          stats
	cpuPerReq          time.Duration // contractd's contract route
	bareCPU, hopCPU    time.Duration
	cpuRatio, hopRatio float64 // over bareCPU (median of each run's own ratio)
	// The same contract route through the Responses API edge, measured in
	// alternating pairs of short phases with the chat edge: medians of
	// each edge's CPU per request and of each pair's own ratio.
	resp                           stats // errors only
	respCPUPerReq, cpuPerReqPaired time.Duration
	respRatio                      float64
	pairs                          int
	peakRSS                        int64
	rssSource                      string
	// Set by median: the median of each run's own difference.
	addedP50, addedP99 *time.Duration
	bareAddedP50       *time.Duration // contractd p50 − bare p50
}

func bench(ctx context.Context, o options) error {
	tmp, err := os.MkdirTemp("", "contractd-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	// The mock upstream.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mock := &http.Server{Handler: newMockUpstream(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() { _ = mock.Serve(ln) }()
	defer mock.Close()
	mockURL := "http://" + ln.Addr().String() + "/v1"

	bin, built, err := findOrBuild(o.bin, o.rebuild, tmp)
	if err != nil {
		return err
	}
	binInfo := bin
	if built {
		binInfo = "built from this tree (go build -trimpath ./cmd/contractd)"
	} else if st, err := os.Stat(bin); err == nil {
		binInfo = fmt.Sprintf("%s (built %s)", bin, st.ModTime().Format(time.RFC3339))
	}
	cd, err := startContractd(bin, tmp, mockURL, o.logLevel, o.gogc, o.logBesideConfig)
	if err != nil {
		return err
	}
	defer cd.stop()
	fmt.Fprintf(os.Stderr, "contractd pid %d on %s (mock upstream %s)\n", cd.pid(), cd.api, mockURL)
	bp, err := startBare(mockURL, effectiveGOGC(o))
	if err != nil {
		return err
	}
	defer bp.stop()
	fmt.Fprintf(os.Stderr, "bare proxy pid %d on %s\n", bp.pid(), bp.url)

	maxc := slices.Max(o.concs)
	client := newClient(maxc)
	defer client.CloseIdleConnections()
	body := requestBody("")
	direct := target{Name: "direct", URL: mockURL + "/chat/completions", check: checkContent(benchOutput, false)}
	proxied := target{Name: "contractd", URL: cd.api + "/v1/chat/completions", check: checkContent(benchOutput, true)}
	hop := target{Name: "hop", URL: cd.api + "/r/hop/v1/chat/completions", check: checkContent(benchOutput, false)}
	bare := target{Name: "bare", URL: bp.url + "/v1/chat/completions", check: checkContent(benchOutput, false)}
	responses := target{Name: "responses", URL: cd.api + "/v1/responses", check: checkResponse(benchOutput)}
	respBody := responsesBody("")

	if err := preflight(client, direct, bare, hop, proxied); err != nil {
		return fmt.Errorf("preflight: %w\ncontractd log:\n%s", err, cd.logTail())
	}
	if err := preflightResponses(client, responses); err != nil {
		return fmt.Errorf("preflight: %w\ncontractd log:\n%s", err, cd.logTail())
	}
	fmt.Fprintln(os.Stderr, "preflight ok: direct, bare proxy and passthrough replies, contractd reply (validated, 1 attempt), contractd SSE stream, 422 on an invalid output, Responses edge reply and 422")

	loadBefore := loadAvg()
	started := time.Now()
	results := map[int][]cell{}
	edges := map[int][]edgePair{}
	for r := 0; r < o.runs; r++ {
		for _, c := range o.concs {
			order := []target{direct, bare, hop, proxied}
			if r%2 == 1 {
				order = []target{proxied, hop, bare, direct}
			}
			var cl cell
			cl.direct.Concurrency = c // the report's row key, also when -targets skips direct
			for _, t := range order {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if o.only != nil && !o.only[t.Name] {
					continue
				}
				if o.warmup > 0 {
					run(ctx, client, t, body, c, o.warmup)
				}
				// CPU per request of the process a target runs in.
				measure := func(pid int, cpuPerReq *time.Duration) stats {
					cpu0 := cpuTime(pid)
					st := run(ctx, client, t, body, c, o.duration)
					if st.Requests > 0 {
						*cpuPerReq = (cpuTime(pid) - cpu0) / time.Duration(st.Requests)
					}
					report(st)
					return st
				}
				switch t.Name {
				case "direct":
					cl.direct = run(ctx, client, t, body, c, o.duration)
					report(cl.direct)
					continue
				case "bare":
					cl.bare = measure(bp.pid(), &cl.bareCPU)
					continue
				case "hop":
					cl.hop = measure(cd.pid(), &cl.hopCPU)
					continue
				}
				hwm := resetPeak(cd.pid())
				sampler := sampleRSS(cd.pid(), 20*time.Millisecond)
				cpu0 := cpuTime(cd.pid())
				cl.proxied = run(ctx, client, t, body, c, o.duration)
				cpu := cpuTime(cd.pid()) - cpu0
				sampled := sampler.Stop()
				cl.peakRSS, cl.rssSource = sampled, "sampled VmRSS"
				if v, err := procStatus(cd.pid(), "VmHWM"); err == nil && hwm {
					cl.peakRSS, cl.rssSource = max(v, sampled), "VmHWM"
				}
				if cl.proxied.Requests > 0 {
					cl.cpuPerReq = cpu / time.Duration(cl.proxied.Requests)
				}
				report(cl.proxied)
			}
			// The two edges, in short alternating phases so drift on a
			// shared machine hits both alike.
			for i := 0; i < o.pairs; i++ {
				first, second := proxied, responses
				if (r+i)%2 == 1 {
					first, second = responses, proxied
				}
				var perReq [2]time.Duration
				for j, t := range []target{first, second} {
					tb := body
					if t.Name == "responses" {
						tb = respBody
					}
					run(ctx, client, t, tb, c, edgeWarmup)
					cpu0 := cpuTime(cd.pid())
					st := run(ctx, client, t, tb, c, edgePhase)
					if st.Requests > 0 {
						perReq[j] = (cpuTime(cd.pid()) - cpu0) / time.Duration(st.Requests)
					}
					if st.Errors > 0 {
						cl.resp.Errors += st.Errors
						cl.resp.FirstError = st.FirstError
					}
				}
				chat, resp := perReq[0], perReq[1]
				if first.Name == "responses" {
					chat, resp = resp, chat
				}
				edges[c] = append(edges[c], edgePair{chat: chat, resp: resp})
			}
			if cl.bareCPU > 0 {
				cl.cpuRatio = float64(cl.cpuPerReq) / float64(cl.bareCPU)
				cl.hopRatio = float64(cl.hopCPU) / float64(cl.bareCPU)
			}
			results[c] = append(results[c], cl)
		}
	}
	select {
	case <-cd.exited:
		return fmt.Errorf("contractd exited during the run: %v\n%s", cd.err, cd.logTail())
	case <-bp.exited:
		return fmt.Errorf("the bare proxy exited during the run")
	default:
	}
	lifetimeHWM, _ := procStatus(cd.pid(), "VmHWM")

	var cells []cell
	for _, c := range o.concs {
		cl := median(results[c])
		cl.respCPUPerReq, cl.cpuPerReqPaired, cl.respRatio, cl.pairs = edgeMedians(edges[c])
		cells = append(cells, cl)
	}
	md := render(o, cells, binInfo, loadBefore, loadAvg(), time.Since(started), lifetimeHWM)
	fmt.Print(md)
	if o.out != "" {
		if err := writeSection(o.out, md); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote the results section of %s\n", o.out)
	}
	for _, cl := range cells {
		if n := cl.direct.Errors + cl.bare.Errors + cl.hop.Errors + cl.proxied.Errors + cl.resp.Errors; n > 0 {
			return fmt.Errorf("requests failed during the run (first: %s%s%s%s%s)", cl.direct.FirstError, cl.bare.FirstError, cl.hop.FirstError, cl.proxied.FirstError, cl.resp.FirstError)
		}
	}
	return nil
}

func report(s stats) {
	fmt.Fprintf(os.Stderr, "  c=%-3d %-9s %8.0f req/s  p50 %7.3f ms  p99 %7.3f ms  (%d requests, %d errors)\n",
		s.Concurrency, s.Target, s.RPS, ms(s.P50), ms(s.P99), s.Requests, s.Errors)
	if s.FirstError != "" {
		fmt.Fprintf(os.Stderr, "        first error: %s\n", s.FirstError)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// median takes, per metric, the median over runs (peak RSS: the maximum).
func median(cs []cell) cell {
	if len(cs) == 1 {
		return cs[0]
	}
	pick := func(get func(cell) float64) float64 {
		v := make([]float64, len(cs))
		for i, c := range cs {
			v[i] = get(c)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	d := func(get func(cell) time.Duration) time.Duration {
		return time.Duration(pick(func(c cell) float64 { return float64(get(c)) }))
	}
	out := cs[0]
	out.direct.RPS = pick(func(c cell) float64 { return c.direct.RPS })
	out.proxied.RPS = pick(func(c cell) float64 { return c.proxied.RPS })
	out.direct.P50 = d(func(c cell) time.Duration { return c.direct.P50 })
	out.proxied.P50 = d(func(c cell) time.Duration { return c.proxied.P50 })
	out.direct.P99 = d(func(c cell) time.Duration { return c.direct.P99 })
	out.proxied.P99 = d(func(c cell) time.Duration { return c.proxied.P99 })
	out.cpuPerReq = d(func(c cell) time.Duration { return c.cpuPerReq })
	out.hopCPU = d(func(c cell) time.Duration { return c.hopCPU })
	out.bareCPU = d(func(c cell) time.Duration { return c.bareCPU })
	out.cpuRatio = pick(func(c cell) float64 { return c.cpuRatio })
	out.hopRatio = pick(func(c cell) float64 { return c.hopRatio })
	out.bare.RPS = pick(func(c cell) float64 { return c.bare.RPS })
	out.bare.P50 = d(func(c cell) time.Duration { return c.bare.P50 })
	out.bare.P99 = d(func(c cell) time.Duration { return c.bare.P99 })
	out.hop.RPS = pick(func(c cell) float64 { return c.hop.RPS })
	out.hop.P50 = d(func(c cell) time.Duration { return c.hop.P50 })
	out.hop.P99 = d(func(c cell) time.Duration { return c.hop.P99 })
	// Added latency: the median of each run's own difference, so every
	// difference pairs numbers measured side by side.
	addedP50 := d(func(c cell) time.Duration { return c.proxied.P50 - c.direct.P50 })
	addedP99 := d(func(c cell) time.Duration { return c.proxied.P99 - c.direct.P99 })
	bareAdded := d(func(c cell) time.Duration { return c.proxied.P50 - c.bare.P50 })
	out.addedP50, out.addedP99, out.bareAddedP50 = &addedP50, &addedP99, &bareAdded
	for _, c := range cs[1:] {
		out.peakRSS = max(out.peakRSS, c.peakRSS)
		out.direct.Errors += c.direct.Errors
		out.proxied.Errors += c.proxied.Errors
		out.hop.Errors += c.hop.Errors
		out.bare.Errors += c.bare.Errors
		out.resp.Errors += c.resp.Errors
		out.direct.Requests += c.direct.Requests
		out.proxied.Requests += c.proxied.Requests
	}
	return out
}

// bareAdded is the p50 the contract route adds over the bare proxy.
func (c cell) bareAdded() time.Duration {
	if c.bareAddedP50 != nil {
		return *c.bareAddedP50
	}
	return c.proxied.P50 - c.bare.P50
}

// effectiveGOGC is the GOGC contractd runs with.
func effectiveGOGC(o options) string {
	if o.gogc != "" {
		return o.gogc
	}
	if g := os.Getenv("GOGC"); g != "" {
		return g
	}
	return "400" // contractd serve's default
}

func (c cell) added() (p50, p99 time.Duration) {
	if c.addedP50 != nil {
		return *c.addedP50, *c.addedP99
	}
	return c.proxied.P50 - c.direct.P50, c.proxied.P99 - c.direct.P99
}

func render(o options, cells []cell, binInfo, load0, load1 string, took time.Duration, lifetimeHWM int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Run of %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- Machine: %s\n", machine())
	fmt.Fprintf(&b, "- Load average before / after: %s / %s (other work on the machine shares the cores)\n", load0, load1)
	gogc := os.Getenv("GOGC")
	if o.gogc != "" {
		gogc = o.gogc
	}
	if gogc == "" {
		gogc = "400 (contractd serve's default when GOGC is unset)"
	}
	fmt.Fprintf(&b, "- contractd: %s, log_level %s, GOGC %s, audit sink none, no client keys\n", binInfo, o.logLevel, gogc)
	fmt.Fprintf(&b, "- Phases: %v measured after %v warm-up, per target and concurrency; %d run(s)", o.duration, o.warmup, o.runs)
	if o.runs > 1 {
		b.WriteString(", medians shown (peak RSS: maximum; added latency: median of each run's own difference)")
	}
	fmt.Fprintf(&b, "; %s in all\n", took.Round(time.Second))
	fmt.Fprintf(&b, "- Reply validated: %d-byte nested JSON output in a %d-byte chat completion\n\n", len(benchOutput), len(completionBody(benchOutput)))
	b.WriteString("| concurrency | direct req/s | contractd req/s | ratio | direct p50 | contractd p50 | added p50 | direct p99 | contractd p99 | added p99 | contractd CPU/req | peak RSS |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range cells {
		a50, a99 := c.added()
		fmt.Fprintf(&b, "| %d | %.0f | %.0f | %.2f | %.3f ms | %.3f ms | %+.3f ms | %.3f ms | %.3f ms | %+.3f ms | %d µs | %.1f MiB |\n",
			c.direct.Concurrency, c.direct.RPS, c.proxied.RPS, c.proxied.RPS/max(c.direct.RPS, 1),
			ms(c.direct.P50), ms(c.proxied.P50), ms(a50), ms(c.direct.P99), ms(c.proxied.P99), ms(a99),
			c.cpuPerReq.Microseconds(), float64(c.peakRSS)/(1<<20))
	}
	fmt.Fprintf(&b, "\nErrors: %s. contractd's lifetime peak RSS (VmHWM): %.1f MiB.\n\n", errorsLine(cells), float64(lifetimeHWM)/(1<<20))

	fmt.Fprintf(&b, "The bare proxy: `httputil.ReverseProxy` in a process of its own (this binary with `-bare-proxy`), forwarding to the same mock with no validation, logging or telemetry, GOGC %s like contractd: the floor any Go proxy hop pays. Measured in the same run, interleaved with the other targets. Ratios are CPU time per request over the bare proxy's, the median of each run's own ratio; \"added over bare\" is contractd's p50 minus the bare proxy's, the median of each run's own difference.\n\n", effectiveGOGC(o))
	b.WriteString("| concurrency | bare req/s | bare p50 | bare CPU/req | passthrough CPU/req | passthrough ÷ bare | contract CPU/req | contract ÷ bare | contract req/s ÷ bare | contract added p50 over bare |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range cells {
		fmt.Fprintf(&b, "| %d | %.0f | %.3f ms | %d µs | %d µs | %.2f | %d µs | %.2f | %.2f | %+.3f ms |\n",
			c.direct.Concurrency, c.bare.RPS, ms(c.bare.P50), c.bareCPU.Microseconds(), c.hopCPU.Microseconds(), c.hopRatio,
			c.cpuPerReq.Microseconds(), c.cpuRatio, c.proxied.RPS/max(c.bare.RPS, 1), ms(c.bareAdded()))
	}
	b.WriteString("\n")

	b.WriteString("contractd's passthrough route (`/r/hop/…`, httputil.ReverseProxy inside contractd, no contract work) against the same mock, measured in the same run. \"contract work\" is the contract route minus the passthrough: what validation, prompt injection and the pipeline cost on top of contractd's own hop.\n\n")
	b.WriteString("| concurrency | hop req/s | hop p50 | hop added p50 (hop − direct) | hop p99 | contract work p50 (contractd − hop) | contract work p99 |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range cells {
		fmt.Fprintf(&b, "| %d | %.0f | %.3f ms | %+.3f ms | %.3f ms | %+.3f ms | %+.3f ms |\n",
			c.direct.Concurrency, c.hop.RPS, ms(c.hop.P50), ms(c.hop.P50-c.direct.P50), ms(c.hop.P99),
			ms(c.proxied.P50-c.hop.P50), ms(c.proxied.P99-c.hop.P99))
	}
	b.WriteString("\n")

	edgeMeasured := false
	for _, c := range cells {
		edgeMeasured = edgeMeasured || c.pairs > 0
	}
	if !edgeMeasured {
		// A table of zeros would read as measurements.
		b.WriteString("The Responses API edge: not measured in this run (-edge-pairs 0).\n\n")
	} else {
		fmt.Fprintf(&b, "The Responses API edge: the same contract route and upstream output, the same ticket sent as `input` to `/v1/responses` instead of `messages` to `/v1/chat/completions`. Measured in pairs of %v phases (after %v warm-up each), chat and responses alternating which goes first, %d pairs per run; contractd's CPU time per request of each phase. Shown: the medians of each edge's CPU/req and the median of each pair's own ratio.\n\n", edgePhase, edgeWarmup, o.pairs)
		b.WriteString("| concurrency | pairs | chat CPU/req | responses CPU/req | ratio of medians | median of pair ratios |\n")
		b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, c := range cells {
			fmt.Fprintf(&b, "| %d | %d | %d µs | %d µs | %.3f | %.3f |\n",
				c.direct.Concurrency, c.pairs, c.cpuPerReqPaired.Microseconds(), c.respCPUPerReq.Microseconds(),
				float64(c.respCPUPerReq)/float64(max(c.cpuPerReqPaired, 1)), c.respRatio)
		}
		b.WriteString("\n")
	}

	b.WriteString("Targets:\n\n")
	find := func(n int) (cell, bool) {
		for _, c := range cells {
			if c.direct.Concurrency == n {
				return c, true
			}
		}
		return cell{}, false
	}
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	if c, ok := find(16); ok {
		a50, a99 := c.added()
		fmt.Fprintf(&b, "- added p50 at concurrency 16: %.3f ms (target <= %.1f ms): %s\n", ms(a50), ms(targetAddedP50), verdict(a50 <= targetAddedP50))
		fmt.Fprintf(&b, "- added p99 at concurrency 16: %.3f ms (target <= %.1f ms): %s\n", ms(a99), ms(targetAddedP99), verdict(a99 <= targetAddedP99))
	}
	best := cells[0]
	for _, c := range cells {
		if c.proxied.RPS > best.proxied.RPS {
			best = c
		}
	}
	fmt.Fprintf(&b, "- req/s through contractd with validation: %.0f at concurrency %d (target >= %d): %s\n",
		best.proxied.RPS, best.proxied.Concurrency, targetRPS, verdict(best.proxied.RPS >= targetRPS))
	worst, worstRatio := cells[0], 0.0
	for _, c := range cells {
		if r := float64(c.respCPUPerReq) / float64(max(c.cpuPerReqPaired, 1)); r > worstRatio {
			worst, worstRatio = c, r
		}
	}
	if edgeMeasured {
		fmt.Fprintf(&b, "- Responses edge CPU per request over chat's (median over median), worst concurrency: %.3f at %d (target <= %.2f): %s\n",
			worstRatio, worst.direct.Concurrency, targetRespRatio, verdict(worstRatio <= targetRespRatio))
	} else {
		// -edge-pairs 0: no pair ran, and 0 over 0 is not a pass.
		fmt.Fprintf(&b, "- Responses edge CPU per request over chat's: not measured (-edge-pairs 0; target <= %.2f)\n", targetRespRatio)
	}
	worstCPU, worstHop := cells[0], cells[0]
	for _, c := range cells {
		if c.cpuRatio > worstCPU.cpuRatio {
			worstCPU = c
		}
		if c.hopRatio > worstHop.hopRatio {
			worstHop = c
		}
	}
	fmt.Fprintf(&b, "- contract route CPU per request over the bare proxy's, worst concurrency: %.2f at %d (target <= %.1f): %s\n",
		worstCPU.cpuRatio, worstCPU.direct.Concurrency, targetContractCPU, verdict(worstCPU.cpuRatio <= targetContractCPU))
	fmt.Fprintf(&b, "- passthrough CPU per request over the bare proxy's, worst concurrency: %.2f at %d (target <= %.1f): %s\n",
		worstHop.hopRatio, worstHop.direct.Concurrency, targetHopCPU, verdict(worstHop.hopRatio <= targetHopCPU))
	if c, ok := find(1); ok {
		fmt.Fprintf(&b, "- contract route p50 added over the bare proxy at concurrency 1: %.3f ms (target <= %.2f ms): %s\n",
			ms(c.bareAdded()), ms(targetBareAddedC1), verdict(c.bareAdded() <= targetBareAddedC1))
	}
	if c, ok := find(64); ok {
		fmt.Fprintf(&b, "- peak RSS at concurrency 64: %.1f MiB (%s; target <= 100 MB): %s\n", float64(c.peakRSS)/(1<<20), c.rssSource, verdict(c.peakRSS <= targetRSS))
	}
	return b.String()
}

func errorsLine(cells []cell) string {
	n := 0
	for _, c := range cells {
		n += c.direct.Errors + c.bare.Errors + c.proxied.Errors + c.hop.Errors + c.resp.Errors
	}
	if n == 0 {
		return "none"
	}
	return fmt.Sprint(n)
}

// The generated section sits between these markers in the -out file.
const (
	beginMarker = "<!-- contractd-bench:begin (generated by `go run ./cmd/contractd-bench -out docs/benchmarks.md`) -->"
	endMarker   = "<!-- contractd-bench:end -->"
)

// writeSection replaces the generated section of path (or appends one, or
// creates the file).
func writeSection(path, md string) error {
	section := beginMarker + "\n\n" + md + "\n" + endMarker + "\n"
	old, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return os.WriteFile(path, []byte("# Benchmarks\n\n"+section), 0o644)
	}
	if err != nil {
		return err
	}
	s := string(old)
	i := strings.Index(s, "<!-- contractd-bench:begin")
	j := strings.Index(s, endMarker)
	if i >= 0 && j > i {
		s = s[:i] + section + strings.TrimPrefix(s[j+len(endMarker):], "\n")
	} else {
		s = strings.TrimRight(s, "\n") + "\n\n" + section
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// preflight proves both targets answer what the run assumes: the mock's
// completion directly; through contractd the validated output with one
// attempt, as JSON and as an SSE stream (read with internal/sse); and a
// 422 when the mock's output breaks the contract.
func preflight(client *http.Client, direct, bare, hop, proxied target) error {
	post := func(url string, body []byte) (*http.Response, []byte, error) {
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}
	for _, t := range []target{direct, bare, hop, proxied} {
		resp, b, err := post(t.URL, requestBody(""))
		if err != nil {
			return fmt.Errorf("%s: %w", t.Name, err)
		}
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: HTTP %d: %s", t.Name, resp.StatusCode, b)
		}
		if err := t.check(b); err != nil {
			return fmt.Errorf("%s: %w: %s", t.Name, err, b)
		}
	}
	// Streaming through contractd.
	var req map[string]any
	_ = json.Unmarshal(requestBody(""), &req)
	req["stream"] = true
	req["stream_options"] = map[string]any{"include_usage": true}
	sb, _ := json.Marshal(req)
	resp, err := client.Post(proxied.URL, "application/json", bytes.NewReader(sb))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("stream: HTTP %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	if err := checkStream(bufio.NewReader(resp.Body)); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	// Validation really runs: an invalid output is refused.
	r2, b, err := post(proxied.URL, requestBody(invalidMarker))
	if err != nil {
		return err
	}
	if r2.StatusCode != 422 || !bytes.Contains(b, []byte(`"needs_review"`)) {
		return fmt.Errorf("an invalid output got HTTP %d, want 422 needs_review: %s", r2.StatusCode, b)
	}
	return nil
}

// edgePair is one pair's CPU per request on each edge.
type edgePair struct{ chat, resp time.Duration }

func edgeMedians(ps []edgePair) (resp, chat time.Duration, ratio float64, n int) {
	if len(ps) == 0 {
		return 0, 0, 0, 0
	}
	var cs, rs, qs []float64
	for _, p := range ps {
		cs, rs = append(cs, float64(p.chat)), append(rs, float64(p.resp))
		if p.chat > 0 {
			qs = append(qs, float64(p.resp)/float64(p.chat))
		}
	}
	return time.Duration(medianOf(rs)), time.Duration(medianOf(cs)), medianOf(qs), len(ps)
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// preflightResponses proves the Responses edge answers the validated output
// as a response object, and refuses an invalid one with 422.
func preflightResponses(client *http.Client, t target) error {
	for _, c := range []struct {
		marker string
		status int
	}{{"", 200}, {invalidMarker, 422}} {
		resp, err := client.Post(t.URL, "application/json", bytes.NewReader(responsesBody(c.marker)))
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != c.status {
			return fmt.Errorf("responses: HTTP %d, want %d: %s", resp.StatusCode, c.status, b)
		}
		if c.status == 200 {
			if err := t.check(b); err != nil {
				return fmt.Errorf("responses: %w: %s", err, b)
			}
		}
	}
	return nil
}

// checkStream reads a contract-route stream: chunks whose contents join
// to the expected output, a finish_reason stop, a usage chunk, [DONE].
func checkStream(r io.Reader) error {
	rd := sse.NewReader(r)
	var content strings.Builder
	stop, usage, done := false, false, false
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if done {
			return fmt.Errorf("event after [DONE]")
		}
		if ev.IsDone() {
			done = true
			continue
		}
		var ch struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				TotalTokens int `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &ch); err != nil || ch.Object != "chat.completion.chunk" {
			return fmt.Errorf("not a chat.completion.chunk: %q", ev.Data)
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != nil {
				content.WriteString(*c.Delta.Content)
			}
			if c.FinishReason != nil && *c.FinishReason == "stop" {
				stop = true
			}
		}
		if ch.Usage != nil && ch.Usage.TotalTokens > 0 {
			usage = true
		}
	}
	switch {
	case !done:
		return fmt.Errorf("no [DONE]")
	case !stop:
		return fmt.Errorf("no finish_reason stop")
	case !usage:
		return fmt.Errorf("no usage chunk")
	case content.String() != benchOutput:
		return fmt.Errorf("streamed content differs from the expected output")
	}
	return nil
}
