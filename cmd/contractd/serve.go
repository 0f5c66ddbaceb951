package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/proxy"
	"github.com/contractd/contractd/retry"
	"github.com/contractd/contractd/review"
	"github.com/fsnotify/fsnotify"
)

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, cfg := newFlags("serve", stderr)
	if pos, err := parseInterleaved(fs, args); err != nil || len(pos) > 0 {
		return exitUsage
	}
	path := config.Resolve(*cfg)
	rt, err := loadServable(path)
	if err != nil {
		fmt.Fprintf(stderr, "contractd serve: %v\n", err)
		return exitProblem
	}
	logger := newLogger(stderr, rt.Server.LogLevel)
	for _, w := range rt.Warnings {
		logger.Warn("config warning", "location", w.Location(), "message", w.Message)
	}
	if err := serve(ctx, path, rt, logger); err != nil {
		logger.Error("serve failed", "error", err.Error())
		return exitProblem
	}
	return exitOK
}

// loadServable loads a config and checks what serving needs beyond
// validate: a route, and every upstream key variable set.
func loadServable(path string) (*config.Runtime, error) {
	rt, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if len(rt.Routes) == 0 {
		return nil, fmt.Errorf("%s: serve needs at least one route", path)
	}
	for _, r := range rt.RouteList {
		if e := r.Upstream.APIKeyEnv; e != "" {
			if _, ok := os.LookupEnv(e); !ok {
				return nil, fmt.Errorf("%s: upstream %q: environment variable %s (api_key_env) is not set", path, r.Upstream.Name, e)
			}
		}
	}
	return rt, nil
}

// openReviews builds the review queue the config names (nil for store:
// none). A store that cannot be opened now does not stop serve: items are
// spooled and the queue keeps trying.
func openReviews(ctx context.Context, rt *config.Runtime, logger *slog.Logger) (*proxy.ReviewQueue, error) {
	rc := rt.Review
	var open func(context.Context) (review.Store, error)
	switch rc.Store {
	case "none":
		return nil, nil
	case "sqlite":
		open = func(ctx context.Context) (review.Store, error) { return review.OpenSQLite(ctx, rc.Path) }
	default:
		return nil, fmt.Errorf("review.store %q is not available in this build (use sqlite or none)", rc.Store)
	}
	q := proxy.NewReviewQueue(ctx, open, rc.SpoolPath, logger)
	q.Retention = rc.Retention
	q.Webhook = rc.Webhook != nil
	return q, nil
}

func newLogger(w io.Writer, level string) *slog.Logger {
	if env := os.Getenv("CONTRACTD_LOG_LEVEL"); env != "" {
		level = env
	}
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(strings.ToUpper(orDefault(level, "info"))))
	var h slog.Handler = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv})
	if os.Getenv("CONTRACTD_LOG_FORMAT") == "text" {
		h = slog.NewTextHandler(w, &slog.HandlerOptions{Level: lv})
	}
	return slog.New(h)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// defaultGCPercent trades memory for CPU: a proxy's heap is mostly short-
// lived request garbage, and at GOGC=400 a 2-core machine spends about a
// quarter less CPU per request with peak RSS still near 60 MiB at 64
// concurrent requests (docs/benchmarks.md). GOGC or GOMEMLIMIT in the
// environment take precedence.
const defaultGCPercent = 400

func serve(ctx context.Context, path string, rt *config.Runtime, logger *slog.Logger) error {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	sink, err := audit.New(rt.Audit.Sink, rt.Audit.Path)
	if err != nil {
		return err
	}
	defer sink.Close()
	tel, metrics, shutdownTel, err := setupTelemetry(ctx, logger)
	if err != nil {
		return err
	}
	defer shutdownTel(context.Background())
	caller := proxy.NewCaller(func(u *config.Upstream) string {
		if u.APIKeyEnv == "" {
			return ""
		}
		return os.Getenv(u.APIKeyEnv)
	})
	// Load tokenizers in the background now rather than on the first
	// request that needs them (a budget or a shortened attempt).
	go func() {
		for _, r := range rt.RouteList {
			if !r.Passthrough {
				retry.CounterFor(r.Model).Count("warm")
			}
		}
	}()
	srv := proxy.NewServer(rt, caller, sink, logger)
	srv.Telemetry = tel
	if activeTelemetry != nil {
		if err := activeTelemetry.DedupeMetrics(srv.DedupeStats); err != nil {
			return err
		}
	}
	if !srv.AuthEnabled() {
		logger.Warn("no client API keys configured: the API accepts every request (set server.api_keys_env)")
	}
	queue, err := openReviews(ctx, rt, logger)
	if err != nil {
		return err
	}
	if queue != nil {
		defer queue.Close()
		srv.Reviews = queue
		if activeTelemetry != nil {
			rm, err := activeTelemetry.ReviewMetrics(func(ctx context.Context) (map[string]int, error) {
				if st := queue.Store(); st != nil {
					return st.Pending(ctx)
				}
				return nil, errors.New("review store unavailable")
			})
			if err != nil {
				return err
			}
			queue.Metrics = rm
		}
		qctx, stopQueue := context.WithCancel(context.Background())
		var qwg sync.WaitGroup
		qwg.Add(1)
		go func() { defer qwg.Done(); queue.Run(qctx) }()
		if wh := rt.Review.Webhook; wh != nil {
			qwg.Add(1)
			hook := &proxy.Webhook{URL: wh.URL, Secret: []byte(os.Getenv(wh.SecretEnv))}
			go func() { defer qwg.Done(); queue.RunWebhook(qctx, hook) }()
		}
		defer func() { stopQueue(); qwg.Wait() }()
	}
	admin := &proxy.Admin{Metrics: metrics, Reviews: srv.ReviewAdmin()}
	var apiHandler http.Handler
	if rt.Server.AdminListen == "" {
		apiHandler = srv.Handler(admin)
	} else {
		apiHandler = srv.Handler(nil)
	}
	apiHandler = wrapHTTP(apiHandler)

	servers := []*http.Server{newHTTPServer(apiHandler, rt)}
	addrs := []string{rt.Server.Listen}
	if rt.Server.AdminListen != "" {
		servers = append(servers, newHTTPServer(srv.AdminGate(admin, false), rt))
		addrs = append(addrs, rt.Server.AdminListen)
	}
	// Watch for reloads before listening: once "listening" is logged, a
	// SIGHUP must reload (not kill the process by its default action) and a
	// config file change must not be missed. SIGHUP stays caught until
	// serve returns, so one that arrives while draining does not kill it.
	rw := newReloadWatch(rt, logger)
	defer rw.Close()

	errc := make(chan error, len(servers))
	for i, hs := range servers {
		ln, err := net.Listen("tcp", addrs[i])
		if err != nil {
			return fmt.Errorf("listen %s: %w", addrs[i], err)
		}
		kind := "api"
		if i == 1 {
			kind = "admin"
		}
		logger.Info("listening", "kind", kind, "addr", ln.Addr().String())
		go func() { errc <- hs.Serve(ln) }()
	}
	admin.SetReady(true)

	rctx, stopReload := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		watchReload(rctx, rw, path, srv, tel, logger)
	}()

	select {
	case <-ctx.Done():
	case err := <-errc:
		stopReload()
		wg.Wait()
		return err
	}
	// Drain: stop being ready, stop accepting, let in-flight requests end.
	admin.SetReady(false)
	logger.Info("draining", "timeout", rt.Server.ShutdownTimeout.String())
	stopReload()
	wg.Wait()
	dctx, cancel := context.WithTimeout(context.Background(), srv.Runtime().Server.ShutdownTimeout)
	defer cancel()
	var firstErr error
	for _, hs := range servers {
		if err := hs.Shutdown(dctx); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return fmt.Errorf("drain: %w", firstErr)
	}
	logger.Info("stopped")
	return nil
}

func newHTTPServer(h http.Handler, rt *config.Runtime) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second, // slow-header clients
		ReadTimeout:       60 * time.Second, // slow-body clients
		WriteTimeout:      rt.Server.RequestTimeout + 30*time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          nil,
	}
}

// reloadWatch is what triggers a reload: SIGHUP and config file changes.
type reloadWatch struct {
	hup     chan os.Signal
	changed chan struct{}
	w       *fsnotify.Watcher // nil when watching failed (SIGHUP still works)
	logger  *slog.Logger

	mu    sync.Mutex
	files map[string]map[string]bool // watched directory -> file names that trigger
}

// newReloadWatch catches SIGHUP and starts watching the files rt was built
// from (the config and its schema files); both are in place when it returns.
//
// The watch is on each file's directory, not on viper's WatchConfig: viper
// stops watching for good when the file is removed, and editors and deploy
// tools save by remove-and-recreate or rename. Kubernetes ConfigMaps swap a
// "..data" symlink in the same directory, so those names count too.
func newReloadWatch(rt *config.Runtime, logger *slog.Logger) *reloadWatch {
	rw := &reloadWatch{hup: make(chan os.Signal, 1), changed: make(chan struct{}, 1), logger: logger,
		files: map[string]map[string]bool{}}
	signal.Notify(rw.hup, syscall.SIGHUP)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		logger.Warn("config file watch disabled; SIGHUP still reloads", "error", err.Error())
		return rw
	}
	rw.w = w
	rw.track(rt.Files)
	go func() {
		for {
			select {
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if ev.Op == fsnotify.Chmod || !rw.matches(ev.Name) {
					continue
				}
				select {
				case rw.changed <- struct{}{}:
				default:
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				logger.Warn("config file watch error", "error", err.Error())
			}
		}
	}()
	return rw
}

// track watches the directories of files, so a reload that adds a schema
// file also watches it. Directories no longer needed stay watched (their
// events are filtered out), which keeps a reload from racing the watcher.
func (rw *reloadWatch) track(files []string) {
	if rw.w == nil {
		return
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	next := map[string]map[string]bool{}
	for _, f := range files {
		dir, base := filepath.Dir(f), filepath.Base(f)
		if next[dir] == nil {
			next[dir] = map[string]bool{}
		}
		next[dir][base] = true
		if _, watched := rw.files[dir]; !watched {
			if err := rw.w.Add(dir); err != nil {
				rw.logger.Warn("cannot watch a config directory; SIGHUP still reloads", "dir", dir, "error", err.Error())
			}
		}
	}
	for dir := range rw.files {
		if next[dir] == nil {
			next[dir] = map[string]bool{} // still watched, nothing triggers
		}
	}
	rw.files = next
}

func (rw *reloadWatch) matches(path string) bool {
	dir, base := filepath.Dir(path), filepath.Base(path)
	rw.mu.Lock()
	defer rw.mu.Unlock()
	names, ok := rw.files[dir]
	return ok && (names[base] || (len(names) > 0 && strings.HasPrefix(base, "..")))
}

// Close stops the SIGHUP registration and the file watch.
func (rw *reloadWatch) Close() {
	signal.Stop(rw.hup)
	if rw.w != nil {
		rw.w.Close()
	}
}

// watchReload reloads on SIGHUP at once and on config file changes
// (debounced), swapping in the new Runtime only when it is valid.
func watchReload(ctx context.Context, rw *reloadWatch, path string, srv *proxy.Server, tel reloadCounter, logger *slog.Logger) {
	hup, changed := rw.hup, rw.changed
	var debounce <-chan time.Time
	reload := func(trigger string) {
		rt, err := loadServable(path)
		if err != nil {
			tel.ConfigReload(false)
			var ce *config.Error
			if errors.As(err, &ce) {
				for _, p := range ce.Problems {
					logger.Error("config reload refused; keeping the running config", "trigger", trigger, "problem", p.String())
				}
			} else {
				logger.Error("config reload refused; keeping the running config", "trigger", trigger, "error", err.Error())
			}
			return
		}
		old := srv.Runtime()
		if rt.Server.Listen != old.Server.Listen || rt.Server.AdminListen != old.Server.AdminListen {
			logger.Warn("listen addresses change only on restart", "listen", old.Server.Listen)
		}
		srv.Swap(rt)
		rw.track(rt.Files)
		tel.ConfigReload(true)
		logger.Info("config reloaded", "trigger", trigger, "sha256", rt.SHA256, "routes", len(rt.Routes))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			reload("sighup")
		case <-changed:
			debounce = time.After(300 * time.Millisecond)
		case <-debounce:
			debounce = nil
			reload("file")
		}
	}
}
