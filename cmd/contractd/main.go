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

func main() {
	ctx, stop := context.Background(), context.CancelFunc(func() {})
	if len(os.Args) > 1 && drains[os.Args[1]] {
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	}
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
