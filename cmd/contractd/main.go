// Command contractd is an OpenAI-compatible reverse proxy that enforces
// prompt contracts in-line, plus the offline tools that share its engine
// (validate, check, render, schema, replay).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// drains are the commands that catch SIGINT and SIGTERM to stop cleanly
// (serve drains in-flight requests, replay stops and reports). The others
// (validate, check, render, schema) keep the default: the signal ends the
// process, so Ctrl-C stops check waiting on stdin.
var drains = map[string]bool{"serve": true, "replay": true}

// earlyHUP holds a SIGHUP that reached serve before its reload watch was
// set up (loading the config, opening telemetry, connecting to Redis):
// caught from the first instruction of main, so that it does not end the
// process by SIGHUP's default action, and handed to the watch, which
// reloads for it (the config may have changed after it was read). nil
// outside the contractd binary (tests call run directly).
var earlyHUP chan os.Signal

func main() {
	ctx, stop := context.Background(), context.CancelFunc(func() {})
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		earlyHUP = make(chan os.Signal, 1)
		signal.Notify(earlyHUP, syscall.SIGHUP)
	}
	if len(os.Args) > 1 && drains[os.Args[1]] {
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	}
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
