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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
