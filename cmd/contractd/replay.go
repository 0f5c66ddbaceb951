package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/replay"
	"github.com/contractd/contractd/review"
)

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// cmdReplay is `contractd replay`; the work is in package
// replay.
func cmdReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, cfg := newFlags("replay", stderr)
	var audits listFlag
	fs.Var(&audits, "audit", "audit file written with include_content: true, or a review export (JSON Lines; .gz, - for stdin, a quoted glob for rotated files; repeatable)")
	reviews := fs.Bool("reviews", false, "replay the items of the config's review store")
	route := fs.String("route", "", "only this route")
	since := fs.String("since", "", "only what was stored since: a duration (24h) or an RFC 3339 time")
	live := fs.Bool("live", false, "send the stored requests to the upstream again through the current attempt plan")
	asJSON := fs.Bool("json", false, "print one JSON object per item, then the summary")
	concurrency := fs.Int("concurrency", 4, "--live: requests in flight at once")
	maxRequests := fs.Int("max-requests", 100, "--live: send at most this many stored requests (0: no limit)")
	workers := fs.Int("workers", 0, "offline: judging goroutines (0: one per CPU)")
	maxLine := fs.Int("max-line-bytes", replay.DefaultMaxLineBytes, "longer audit lines are reported and skipped")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return exitUsage
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "contractd replay: "+format+"\n", a...)
		return exitUsage
	}
	switch {
	case len(pos) > 0:
		return usageErr("unexpected argument %q", pos[0])
	case *reviews == (len(audits) > 0):
		return usageErr("give exactly one source: --reviews or --audit FILE")
	case *concurrency < 1:
		return usageErr("--concurrency must be at least 1")
	case *maxRequests < 0:
		return usageErr("--max-requests must be 0 (no limit) or more")
	}
	o := replay.Options{Route: *route, JSON: *asJSON, Out: stdout, Err: stderr, Workers: *workers, MaxLineBytes: *maxLine,
		Live: *live, Concurrency: *concurrency, MaxRequests: *maxRequests}
	if *since != "" {
		t, err := parseSince(*since, time.Now())
		if err != nil {
			return usageErr("%v", err)
		}
		o.Since = t
	}
	path := config.Resolve(*cfg)
	// An audit file needs none of the server's secret variables; the
	// review store needs its DSN, so --reviews loads as serve does.
	load := config.LoadOffline
	if *reviews {
		load = config.Load
	}
	rt, err := load(path)
	if err != nil {
		// The validate messages, so the fix is the same as for validate.
		printLoadError(stderr, "", fmt.Errorf("%s: %w", path, notFoundAtDefault(*cfg, err)))
		return usageErr("%s does not validate", path)
	}
	o.Runtime = rt
	if os.Getenv("GOGC") == "" {
		// Judging allocates short-lived garbage only; the live heap is the
		// lines in flight. Collect less often, as serve does.
		debug.SetGCPercent(defaultGCPercent)
	}
	if *live {
		srv, err := replay.LiveServer(rt, os.LookupEnv)
		if err != nil {
			return usageErr("%v", err)
		}
		o.Server = srv
	}
	var sum *replay.Summary
	if *reviews {
		if rt.Review.Store == config.ReviewNone {
			return usageErr("review.store is none in %s: there are no stored reviews", path)
		}
		if rt.Review.Store == config.ReviewSQLite {
			// Say plainly that there is no store, rather than SQLite's
			// "unable to open database file".
			if _, err := os.Stat(rt.Review.Path); err != nil {
				return usageErr("review store %s: %v", rt.Review.Path, cleanErr(err))
			}
		}
		st, err := openReader(ctx, rt.Review)
		if err != nil {
			return usageErr("%v", err)
		}
		defer st.Close()
		sum, err = replay.Reviews(ctx, o, st)
		if err != nil {
			return usageErr("%v", err)
		}
	} else {
		files, err := replay.ExpandAudit(audits)
		if err != nil {
			return usageErr("%v", err)
		}
		if sum, err = replay.Audit(ctx, o, files); err != nil {
			return usageErr("%v", err)
		}
	}
	return sum.ExitCode()
}

// parseSince reads --since: a Go duration back from now, or an RFC 3339
// time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("--since %s: the duration must be positive", s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--since %s: want a duration (24h) or an RFC 3339 time (2026-01-02T15:04:05Z)", s)
}

// openReader opens the configured review store for replay: a reader never
// migrates the store or changes its files' modes (SQLite read-only,
// PostgreSQL read-only transactions), and a store at another schema level
// than this binary's is refused (review.SchemaLevelError: upgrade it with
// contractd serve).
func openReader(ctx context.Context, rc config.ReviewSettings) (review.Reader, error) {
	switch rc.Store {
	case config.ReviewSQLite:
		return review.OpenSQLiteReader(ctx, rc.Path)
	case config.ReviewPostgres:
		// The DSN is read here and never printed; the store's errors
		// redact its password.
		dsn := os.Getenv(rc.DSNEnv)
		if dsn == "" {
			return nil, fmt.Errorf("review store: %s is empty", rc.DSNEnv)
		}
		return review.OpenPostgresReader(ctx, dsn)
	}
	return nil, fmt.Errorf("review.store %q is not available in this build (use sqlite, postgres or none)", rc.Store)
}
