// Command contractd-sim is a simulated OpenAI-compatible upstream for
// contractd: realistic valid outputs generated from each contract's schema,
// and, at configurable rates, the failure modes real models show. See
// package internal/sim for the behaviour and the sim_mode switch.
//
//	contractd-sim [-addr 127.0.0.1:18181] [-config contractd.yaml] [-seed 1]
//	              [-failure-rate 0.25] [-cold-factor 0.2] [-error-rate 0]
//	              [-latency 20ms] [-jitter 0] [-weights fence=3,prose=3,...]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/contractd/contractd/internal/filewatch"
	"github.com/contractd/contractd/internal/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("contractd-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:18181", "listen address (port 0 picks a free port; the log line names it)")
	cfg := fs.String("config", "", "contractd config: canonical labels, evidence and question policies per contract")
	seed := fs.Int64("seed", 1, "PRNG seed; the same seed and request body always give the same reply")
	rate := fs.Float64("failure-rate", 0.25, "chance (0..1) of a failure mode at temperature > 0 in auto mode")
	cold := fs.Float64("cold-factor", 0.2, "failure rate multiplier at temperature 0 (the retry attempt)")
	errRate := fs.Float64("error-rate", 0, "chance (0..1) of an HTTP 500 in auto mode")
	latency := fs.Duration("latency", 20*time.Millisecond, "added to every reply")
	jitter := fs.Duration("jitter", 0, "seeded extra latency, 0..jitter")
	weights := fs.String("weights", "", "failure mode weights, e.g. fence=3,prose=3,wrong_label=2 (others keep defaults)")
	quiet := fs.Bool("quiet", false, "log only startup and errors, not every completion")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "contractd-sim: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	level := slog.LevelInfo
	if *quiet {
		level = slog.LevelWarn
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	if *rate < 0 || *rate > 1 || *errRate < 0 || *errRate > 1 || *cold < 0 {
		fmt.Fprintln(stderr, "contractd-sim: -failure-rate and -error-rate must be in 0..1, -cold-factor >= 0")
		return 2
	}
	w, err := sim.ParseWeights(*weights)
	if err != nil {
		fmt.Fprintf(stderr, "contractd-sim: %v\n", err)
		return 2
	}
	opt := sim.Options{Seed: *seed, FailureRate: *rate, ColdFactor: *cold, ErrorRate: *errRate,
		Latency: *latency, Jitter: *jitter, Weights: w}
	if *cfg != "" {
		cat, err := sim.LoadCatalog(*cfg)
		if err != nil {
			fmt.Fprintf(stderr, "contractd-sim: %v\n", err)
			return 1
		}
		opt.Catalog = cat
		logger.Info("config loaded", "path", *cfg, "contracts", cat.Contracts())
	}
	s := sim.New(opt)
	sim.Warm() // load the tokenizers before the first request, not during it
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "contractd-sim: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: s.Handler(logger), ReadHeaderTimeout: 10 * time.Second}
	logger.Info("listening", "kind", "sim", "addr", ln.Addr().String(), "seed", *seed,
		"failure_rate", *rate, "cold_factor", *cold, "latency", latency.String())
	if opt.Catalog != nil {
		stopWatch := watchConfig(ctx, *cfg, opt.Catalog.Files(), s, logger)
		defer stopWatch()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			logger.Error("serve failed", "error", err.Error())
			return 1
		}
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		logger.Info("stopped")
	}
	return 0
}

// watchConfig reloads the catalog when the config or one of its schema
// files changes, as contractd serve does, so a route or contract edited
// under `make run` is known to the simulator too (it kept the catalog it
// started with: the new contract's labels and evidence sources unknown,
// its outputs failed them). Changes are coalesced until the files have been
// quiet for 300 ms; a config that does not load is logged and the running
// catalog kept. The returned func stops the watch.
func watchConfig(ctx context.Context, path string, files []string, s *sim.Sim, logger *slog.Logger) func() {
	w, err := filewatch.New(files)
	if err != nil {
		logger.Warn("config file watch disabled; restart to reload", "error", err.Error())
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.C:
			}
			for quiet := false; !quiet; {
				select {
				case <-ctx.Done():
					return
				case <-w.C:
				case <-time.After(300 * time.Millisecond):
					quiet = true
				}
			}
			cat, err := sim.LoadCatalog(path)
			if err != nil {
				logger.Error("config reload failed; the old one kept", "path", path, "error", err.Error())
				continue
			}
			s.SetCatalog(cat)
			w.Set(cat.Files())
			logger.Info("config reloaded", "path", path, "contracts", cat.Contracts())
		}
	}()
	return func() {
		cancel()
		<-done
		w.Close()
	}
}
