package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/filewatch"
	"github.com/contractd/contractd/internal/jsonlog"
	"github.com/contractd/contractd/internal/logbuf"
	"github.com/contractd/contractd/internal/memlimit"
	"github.com/contractd/contractd/proxy"
	"github.com/contractd/contractd/retry"
	"github.com/contractd/contractd/review"
	"github.com/contractd/contractd/telemetry"
)

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, cfg := newFlags("serve", stderr)
	if !parseFlagsOnly(fs, "serve", args, stderr) {
		return exitUsage
	}
	path := config.Resolve(*cfg)
	rt, err := loadServable(path)
	if err != nil {
		fmt.Fprintf(stderr, "contractd serve: %v\n", notFoundAtDefault(*cfg, err))
		return exitProblem
	}
	level := new(slog.LevelVar)
	setLevel(level, rt.Server.LogLevel)
	// One write per batch of lines rather than one per request line
	// (docs/observability.md); every return below flushes it.
	lw := logbuf.New(stderr, logbuf.DefaultInterval)
	defer lw.Close()
	logger := newLogger(lw, level)
	for _, w := range rt.Warnings {
		logger.Warn("config warning", "location", w.Location(), "message", w.Message)
	}
	if err := serve(ctx, path, rt, logger, level); err != nil {
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
	if err := servable(path, rt); err != nil {
		return nil, err
	}
	return rt, nil
}

// servable checks what serving needs beyond validation.
func servable(path string, rt *config.Runtime) error {
	if len(rt.Routes) == 0 {
		return fmt.Errorf("%s: serve needs at least one route", path)
	}
	for _, r := range rt.RouteList {
		if e := r.Upstream.APIKeyEnv; e != "" {
			if _, ok := os.LookupEnv(e); !ok {
				return fmt.Errorf("%s: upstream %q: environment variable %s (api_key_env) is not set", path, r.Upstream.Name, e)
			}
		}
	}
	return nil
}

// storeOpenWait is how long serve waits for the review store to open
// before it listens anyway (the open goes on in the background): well
// within the Kubernetes kit's 30 s startup probe, and what a usual open
// (migrations of a store already at the current version) takes many times
// over.
const storeOpenWait = 2 * time.Second

// openReviews builds the review queue the config names (nil for store:
// none). Its Run opens (and migrates) the store in the background, while
// serve listens: until then, or while the store cannot be opened, items
// are spooled and the queue keeps trying.
func openReviews(rt *config.Runtime, logger *slog.Logger) (*proxy.ReviewQueue, error) {
	rc := rt.Review
	if rc.Store == config.ReviewNone {
		return nil, nil
	}
	var hub *review.Hub
	if rc.Store == config.ReviewPostgres {
		// Resolutions on any replica reach this replica's waiters through
		// the store's LISTEN connection.
		hub = review.NewHub()
	}
	open, err := storeOpener(rc, hub)
	if err != nil {
		return nil, err
	}
	q := proxy.NewReviewQueueOpenedByRun(open, rc.SpoolPath, logger)
	if hub != nil {
		q.Notifier = hub
	}
	q.Retention = rc.Retention
	q.Webhook = rc.Webhook != nil
	return q, nil
}

// storeOpener is how serve opens the configured review store (migrating
// it; replay --reviews reads it through openReader instead). hub, for postgres, is told of resolutions
// made by any replica (nil: no LISTEN connection).
func storeOpener(rc config.ReviewSettings, hub *review.Hub) (func(context.Context) (review.Store, error), error) {
	switch rc.Store {
	case config.ReviewSQLite:
		return func(ctx context.Context) (review.Store, error) { return review.OpenSQLite(ctx, rc.Path) }, nil
	case config.ReviewPostgres:
		// The DSN is read here and never logged; the store's errors
		// redact its password.
		dsn := os.Getenv(rc.DSNEnv)
		return func(ctx context.Context) (review.Store, error) {
			if dsn == "" {
				return nil, fmt.Errorf("review store: %s is empty", rc.DSNEnv)
			}
			return review.OpenPostgres(ctx, dsn, review.PostgresOptions{Hub: hub})
		}, nil
	}
	return nil, fmt.Errorf("review.store %q is not available in this build (use sqlite, postgres or none)", rc.Store)
}

// newLogger logs at level, which a reload may change.
func newLogger(w io.Writer, level *slog.LevelVar) *slog.Logger {
	var h slog.Handler = jsonlog.New(w, level) // slog.JSONHandler's lines (internal/jsonlog)
	if os.Getenv("CONTRACTD_LOG_FORMAT") == "text" {
		h = slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})
	}
	return slog.New(h)
}

// setLevel sets lv to server.log_level, or to CONTRACTD_LOG_LEVEL, which
// overrides the config.
func setLevel(lv *slog.LevelVar, level slog.Level) {
	if env := os.Getenv("CONTRACTD_LOG_LEVEL"); env != "" {
		var l slog.Level // a value slog does not know is info
		_ = l.UnmarshalText([]byte(strings.ToUpper(env)))
		level = l
	}
	lv.Set(level)
}

// defaultGCPercent trades memory for CPU: a proxy's heap is mostly short-
// lived request garbage, and at GOGC=400 a 2-core machine spends about a
// quarter less CPU per request with peak RSS still near 60 MiB at 64
// concurrent requests (docs/benchmarks.md). GOGC or GOMEMLIMIT in the
// environment take precedence.
const defaultGCPercent = 400

// applyMemoryLimit sets Go's soft memory limit from server.memory_limit:
// auto is 80 % of the cgroup's limit, none without one. Near
// the limit the collector runs more often instead of letting garbage grow
// the heap, which is what bounds RSS under load together with
// max_inflight_bytes. GOMEMLIMIT in the environment wins. Called at start
// and on every reload.
func applyMemoryLimit(ml config.MemoryLimit, logger *slog.Logger) {
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		logger.Debug("memory limit", "source", "GOMEMLIMIT", "value", env)
		return
	}
	limit, source := int64(math.MaxInt64), "off"
	switch {
	case ml.Bytes > 0:
		limit, source = ml.Bytes, "config"
	case ml.Auto:
		source = "auto: no cgroup limit"
		if c := memlimit.Cgroup("/"); c > 0 {
			limit, source = c/10*8, "auto: 80% of the cgroup limit"
		}
	}
	if debug.SetMemoryLimit(limit) != limit {
		if limit == math.MaxInt64 {
			logger.Info("memory limit", "source", source, "bytes", "none")
		} else {
			logger.Info("memory limit", "source", source, "bytes", limit)
		}
	}
}

// telemetryShutdownTimeout bounds the span export at exit, which runs
// after the drain (shutdown_timeout) and the review spool's last move:
// the OpenTelemetry exporter would otherwise wait 30 s on a collector that
// accepts and never answers.
const telemetryShutdownTimeout = 5 * time.Second

func serve(ctx context.Context, path string, rt *config.Runtime, logger *slog.Logger, level *slog.LevelVar) error {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	applyMemoryLimit(rt.Server.MemoryLimit, logger)
	// A write to a broken pipe on stdout (the audit, sink: stdout) or stderr
	// (the logs), their reader gone, fails with EPIPE rather than killing
	// the process by Go's default for fds 1 and 2: an audit line is then a
	// failed write like any other (logged, counted in
	// contractd_audit_write_errors_total), and serve goes on serving and
	// can still drain, where SIGPIPE cut every request in flight.
	signal.Ignore(syscall.SIGPIPE)
	sink, err := audit.NewSwitch(rt.Audit.Sink, rt.Audit.Path)
	if err != nil {
		return err
	}
	defer func() {
		// At most audit.CloseWait: a write that never returns (a hung
		// mount) does not hold the exit past the stop budget.
		if err := sink.Close(); err != nil {
			logger.Warn("audit sink close failed", "error", err.Error())
		}
	}()
	fctx, stopFollow := context.WithCancel(context.Background())
	defer stopFollow() // before sink.Close: deferred calls run last first
	go followAudit(fctx, sink, auditFollowEvery, logger)
	tel, metrics, shutdownTel, err := setupTelemetry(ctx, logger)
	if err != nil {
		return err
	}
	defer func() {
		// The last span export: a collector that never answers must not
		// hold the exit past the stop budget deploy/ plans for.
		tctx, cancel := context.WithTimeout(context.Background(), telemetryShutdownTimeout)
		defer cancel()
		if err := shutdownTel(tctx); err != nil {
			logger.Warn("telemetry shutdown", "error", err.Error())
		}
	}()
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
	defer srv.Close()
	tctx, stopTrim := context.WithCancel(context.Background())
	defer stopTrim()
	go trimMemory(tctx, func() int64 { return srv.LimitStats().Holds })
	srv.Telemetry = tel
	if activeTelemetry != nil {
		if err := activeTelemetry.DedupeMetrics(srv.DedupeStats); err != nil {
			return err
		}
		if err := activeTelemetry.LimitMetrics(func() telemetry.LimitStats {
			ls := srv.LimitStats()
			lim := debug.SetMemoryLimit(-1)
			if lim == math.MaxInt64 {
				lim = 0
			}
			return telemetry.LimitStats{Connections: ls.Connections, InflightBytes: ls.InflightBytes, RefusedBusy: ls.RefusedBusy, MemoryLimit: lim}
		}); err != nil {
			return err
		}
		if err := activeTelemetry.AuditMetrics(sink.Failed); err != nil {
			return err
		}
		rlm, err := activeTelemetry.RateLimitMetrics()
		if err != nil {
			return err
		}
		srv.SetRateLimitMetrics(rlm)
		pm, err := activeTelemetry.PanicMetrics()
		if err != nil {
			return err
		}
		srv.Panics = pm
	}
	if rl := rt.Server.RateLimit; rl != nil {
		logger.Info("rate limit", "store", rl.Store, "requests_per_second", rl.RequestsPerSecond, "burst", max(rl.Burst, 1))
	}
	if !srv.AuthEnabled() {
		logger.Warn("no client API keys configured: the API accepts every request (set server.api_keys_env)")
	}
	queue, err := openReviews(rt, logger)
	if err != nil {
		return err
	}
	if queue != nil {
		defer queue.Close()
		srv.Reviews = queue
		queue.Panics = srv.Panics
		if activeTelemetry != nil {
			rm, err := activeTelemetry.ReviewMetrics(func(ctx context.Context) (map[string]int, error) {
				st := queue.Store()
				if st == nil {
					return nil, errors.New("review store unavailable")
				}
				counts, err := st.Pending(ctx)
				if err != nil {
					return nil, err
				}
				// Every contract route of the running config has a
				// series, at 0 when nothing is pending: a replica that
				// never saw one of its route's items pending (started, or
				// scraped, while the shared queue was empty) had none.
				for _, r := range srv.Runtime().RouteList {
					if _, ok := counts[r.Name]; !ok && !r.Passthrough {
						if counts == nil {
							counts = map[string]int{}
						}
						counts[r.Name] = 0
					}
				}
				return counts, nil
			})
			if err != nil {
				return err
			}
			queue.Metrics = rm
		}
		qctx, stopQueue := context.WithCancel(context.Background())
		var qwg sync.WaitGroup
		qwg.Go(func() { queue.Run(qctx) })
		qwg.Go(func() { srv.SyncDedupe(qctx, proxy.DedupeSyncEvery) })
		if wh := rt.Review.Webhook; wh != nil {
			hook := &proxy.Webhook{URL: wh.URL, Secret: []byte(os.Getenv(wh.SecretEnv))}
			qwg.Go(func() { queue.RunWebhook(qctx, hook) })
		}
		defer func() { stopQueue(); qwg.Wait() }()
		// Give Run's first open (and spool move) a moment before
		// listening, so a usual start answers with the store open; a
		// longer one (a long migration, a lock held elsewhere) goes on in
		// the background while serve listens, ready, and spools.
		if !queue.WaitStarted(ctx, storeOpenWait) && ctx.Err() == nil {
			logger.Info("review store still opening; listening meanwhile (items are spooled until it opens)",
				"waited_ms", storeOpenWait.Milliseconds())
		}
	}
	admin := &proxy.Admin{Metrics: metrics, Reviews: srv.ReviewAdmin()}
	var apiHandler http.Handler
	if rt.Server.AdminListen == "" {
		apiHandler = srv.Handler(admin)
	} else {
		apiHandler = srv.Handler(nil)
	}
	apiHandler = wrapHTTP(apiHandler)

	servers := []*http.Server{proxy.NewHTTPServer(apiHandler)}
	addrs := []string{rt.Server.Listen}
	if rt.Server.AdminListen != "" {
		servers = append(servers, proxy.NewHTTPServer(srv.Deadlines(srv.RecoverPanics(srv.AdminGate(admin, false)))))
		addrs = append(addrs, rt.Server.AdminListen)
	}
	// Watch for reloads before listening: once "listening" is logged, a
	// SIGHUP must reload (not kill the process by its default action) and a
	// config file change must not be missed. SIGHUP stays caught until
	// serve returns, so one that arrives while draining does not kill it.
	rw := newReloadWatch(rt, logger)
	defer rw.Close()
	// The hash a later "config reloaded" is compared with.
	logger.Info("config loaded", "sha256", rt.SHA256, "routes", len(rt.Routes))

	errc := make(chan error, len(servers))
	for i, hs := range servers {
		ln, err := net.Listen("tcp", addrs[i])
		if err != nil {
			// "server.listen 127.0.0.1:8080: bind: address already in
			// use": the config key to change, the address once.
			key := "server.listen"
			if i == 1 {
				key = "server.admin_listen"
			}
			var oe *net.OpError
			if errors.As(err, &oe) && oe.Err != nil {
				err = oe.Err
			}
			return fmt.Errorf("%s %s: %w", key, addrs[i], err)
		}
		kind := "api"
		if i == 1 {
			kind = "admin"
		} else {
			ln = srv.Conns.Listener(ln) // max_connections: the API listener only
			srv.Conns.Track(hs)         // at the cap, idle keep-alive connections give way
		}
		logger.Info("listening", "kind", kind, "addr", ln.Addr().String())
		go func() { errc <- hs.Serve(ln) }()
	}
	admin.SetReady(true)

	rctx, stopReload := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		watchReload(rctx, rw, path, live{srv: srv, audit: sink, level: level}, tel, logger)
	})

	select {
	case <-ctx.Done():
	case err := <-errc:
		stopReload()
		wg.Wait()
		return err
	}
	// Drain: stop being ready, stop accepting, let in-flight requests end
	// (review polls answer at once).
	admin.SetReady(false)
	srv.Drain()
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

// auditFollowEvery is how often serve checks that audit.path still names
// the file the audit sink writes.
const auditFollowEvery = time.Second

// followAudit reopens the audit file every tick when audit.path no longer
// names the file being written (rotated away without a reload, removed),
// logging 'audit sink opened' as a reload does; a file that cannot be
// opened is logged once until it can (the lines go on to the moved file
// meanwhile). It runs apart from the requests and the reloads: a stat or
// close that hangs holds up only the following.
func followAudit(ctx context.Context, sw *audit.Switch, every time.Duration, logger *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	var failing string // the error last logged, until a success
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		path, opened, err := sw.Follow()
		if opened {
			failing = ""
			logger.Info("audit sink opened", "sink", string(audit.SinkFile), "path", path, "trigger", "moved")
		}
		switch {
		case err == nil:
		case opened && errors.Is(err, audit.ErrCloseDeferred):
			logger.Warn("audit sink close deferred: a write has not returned", "error", err.Error())
		case opened:
			logger.Warn("audit file moved away: closing it failed", "path", path, "error", err.Error())
		case err.Error() != failing:
			failing = err.Error()
			logger.Error("audit.path no longer names the audit file and cannot be opened; lines go to the moved file", "path", path, "error", err.Error())
		}
	}
}

// reloadWatch is what triggers a reload: SIGHUP and config file changes.
type reloadWatch struct {
	hup     chan os.Signal
	changed <-chan struct{}
	w       *filewatch.Watcher // nil when watching failed (SIGHUP still works)
}

// newReloadWatch catches SIGHUP and starts watching the files rt was built
// from (the config and its schema files); both are in place when it returns.
// Only those files count, however they are replaced (see filewatch): a log
// or audit file kept beside the config costs the watch nothing.
func newReloadWatch(rt *config.Runtime, logger *slog.Logger) *reloadWatch {
	rw := &reloadWatch{hup: make(chan os.Signal, 1)}
	signal.Notify(rw.hup, syscall.SIGHUP)
	if earlyHUP != nil {
		// main caught SIGHUP until now: one that came meanwhile reloads.
		signal.Stop(earlyHUP)
		select {
		case sig := <-earlyHUP:
			select {
			case rw.hup <- sig:
			default: // a SIGHUP since Notify is pending already: one reload covers both
			}
		default:
		}
	}
	w, err := filewatch.New(rt.Files)
	if err != nil {
		logger.Warn("config file watch disabled; SIGHUP still reloads", "error", err.Error())
		return rw
	}
	rw.w, rw.changed = w, w.C
	return rw
}

// track follows the files a reloaded config was built from.
func (rw *reloadWatch) track(files []string) {
	if rw.w != nil {
		rw.w.Set(files)
	}
}

// Close stops the SIGHUP registration and the file watch.
func (rw *reloadWatch) Close() {
	signal.Stop(rw.hup)
	if rw.w != nil {
		rw.w.Close()
	}
}

// live is what a reload changes besides the Runtime the server swaps in:
// the audit destination and the log level.
type live struct {
	srv   *proxy.Server
	audit *audit.Switch
	level *slog.LevelVar
}

// errReloadDropsAuth refuses a reload that would turn authentication off
// while keys are in force: client keys (a typo in api_keys_env's name, or
// the line removed, would open the API without a word: the no-keys
// warning is written at start) or admin keys (admin_keys_env removed
// would open the admin listener). A restart serves without keys.
var errReloadDropsAuth = errors.New("a reload never turns authentication off (restart to serve without keys)")

// reloadDropsAuth is errReloadDropsAuth, naming the setting and the
// variable (never its value), when next would turn keys off; else nil.
func reloadDropsAuth(srv *proxy.Server, next *config.Runtime) error {
	switch env := next.Server.APIKeysEnv; {
	case !srv.AuthEnabled() || srv.AuthEnabledIn(next):
	case env == "":
		return fmt.Errorf("server.api_keys_env is not named: %w", errReloadDropsAuth)
	default:
		return fmt.Errorf("server.api_keys_env: environment variable %s holds no key: %w", env, errReloadDropsAuth)
	}
	if srv.Runtime().Server.AdminKeysEnv != "" && next.Server.AdminKeysEnv == "" {
		return fmt.Errorf("server.admin_keys_env is not named: %w", errReloadDropsAuth)
	}
	return nil
}

// restartOnly names the settings in which next differs from old, the
// config the process started with, that apply only when contractd
// restarts (docs/config.md lists them).
func restartOnly(old, next *config.Runtime) []string {
	var keys []string
	if old.Server.Listen != next.Server.Listen {
		keys = append(keys, "server.listen")
	}
	if old.Server.AdminListen != next.Server.AdminListen {
		keys = append(keys, "server.admin_listen")
	}
	if !reflect.DeepEqual(old.Review, next.Review) {
		o, n := old.Review, next.Review
		o.DedupeWindow, n.DedupeWindow = 0, 0 // read per request
		if !reflect.DeepEqual(o, n) {
			keys = append(keys, "review")
		}
	}
	return keys
}

// Reload debounce: a change reloads once its files have been quiet for
// reloadQuiet, and at the latest reloadMaxWait after the first change,
// so files that keep changing still reload within the 2 s docs/config.md promises.
const (
	reloadQuiet   = 300 * time.Millisecond
	reloadMaxWait = 1200 * time.Millisecond
)

// watchReload reloads on SIGHUP at once and on config file changes
// (debounced), swapping in the new Runtime only when it is valid.
func watchReload(ctx context.Context, rw *reloadWatch, path string, l live, tel reloadCounter, logger *slog.Logger) {
	hup, changed := rw.hup, rw.changed
	// The restart-only settings in effect are the ones serve started
	// with, whatever reloads swapped in since: each reload is compared
	// with them, so every reload whose config still differs says so, and
	// one that puts them back as they run says nothing.
	started := l.srv.Runtime()
	var debounce <-chan time.Time
	var firstChange, lastChange time.Time
	// reload loads the config and swaps it in. tentative: the files are
	// still being written (the debounce's cap fired between two writes);
	// a config that is refused then is not reported, and reload returns
	// true: it is tried again once the writes pause.
	reload := func(trigger string, tentative bool) (deferred bool) {
		// A panic while reloading (a bug in loading or installing a
		// config) is logged, counted and taken as a refused reload: the
		// loop goes on, so no later SIGHUP or file change is missed, and
		// the running config stays (Swap installs a new one in a single
		// store; at worst the audit was reopened for a config that was
		// not installed, and the next reload sets both).
		defer func() {
			if p := recover(); p != nil {
				l.srv.ReportPanic("panic while reloading the config; keeping the running config", proxy.PanicConfigWatch, p)
				tel.ConfigReload(false)
				deferred = false
			}
		}()
		rt, err := config.Load(path)
		var refusedFiles []string // what the new config names: watched while it is refused
		var loadErr *config.Error
		switch {
		case err == nil:
			refusedFiles = rt.Files
			err = servable(path, rt)
		case errors.As(err, &loadErr):
			refusedFiles = loadErr.Files
		}
		if err == nil {
			err = reloadDropsAuth(l.srv, rt)
		}
		if err == nil {
			var opened bool
			if opened, err = l.audit.Reopen(rt.Audit.Sink, rt.Audit.Path); opened {
				logger.Info("audit sink opened", "sink", string(rt.Audit.Sink), "path", rt.Audit.Path)
			}
			if errors.Is(err, audit.ErrCloseDeferred) {
				// The new sink took over; the old one's stuck write
				// holds up only its own close, not this reload.
				logger.Warn("audit sink close deferred: a write has not returned", "error", err.Error())
				err = nil
			}
		}
		if err != nil && tentative {
			return true
		}
		if err != nil {
			tel.ConfigReload(false)
			// Keep watching the running config's files, and the ones the
			// refused config names too: a schema file written after the
			// config that names it (or fixed after it) then reloads.
			rw.track(append(slices.Clone(l.srv.Runtime().Files), refusedFiles...))
			var ce *config.Error
			if errors.As(err, &ce) {
				for _, p := range ce.Problems {
					logger.Error("config reload refused; keeping the running config", "trigger", trigger, "problem", p.String())
				}
			} else {
				logger.Error("config reload refused; keeping the running config", "trigger", trigger, "error", err.Error())
			}
			return false
		}
		if keys := restartOnly(started, rt); len(keys) > 0 {
			logger.Warn("these settings changed but apply only on restart", "keys", keys)
		}
		l.srv.Swap(rt)
		applyMemoryLimit(rt.Server.MemoryLimit, logger)
		rw.track(rt.Files)
		tel.ConfigReload(true)
		logger.Info("config reloaded", "trigger", trigger, "sha256", rt.SHA256, "routes", len(rt.Routes))
		setLevel(l.level, rt.Server.LogLevel) // after the line above, which a higher level would hide
		return false
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			reload("sighup", false)
		case <-changed:
			now := time.Now()
			if debounce == nil {
				firstChange = now
			}
			lastChange = now
			debounce = time.After(min(reloadQuiet, firstChange.Add(reloadMaxWait).Sub(now)))
		case <-debounce:
			debounce = nil
			// Fired by the cap while changes still arrive, a writer may be
			// halfway through a file (truncated, not yet written): a refusal
			// then is not one, and the reload is tried again after a pause.
			if reload("file", time.Since(lastChange) < reloadQuiet) {
				firstChange, debounce = time.Now(), time.After(reloadQuiet)
			}
		}
	}
}
