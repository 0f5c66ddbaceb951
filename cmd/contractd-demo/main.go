// Command contractd-demo is the request driver of `make demo` (see
// scripts/demo.sh and package internal/demo). With -wait-only it just waits
// until contractd and the simulator are ready (scripts/run.sh).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/contractd/contractd/internal/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fs := flag.NewFlagSet("contractd-demo", flag.ContinueOnError)
	var o demo.Options
	fs.StringVar(&o.Config, "config", "examples/demo/contractd.yaml", "contractd config the servers run with")
	fs.StringVar(&o.API, "api", "", "contractd API base URL (default: from server.listen)")
	fs.StringVar(&o.Admin, "admin", "", "contractd admin base URL (default: from server.admin_listen)")
	fs.StringVar(&o.Upstream, "sim", "", "simulator base URL (default: the upstream base_url without /v1)")
	fs.StringVar(&o.AuditFile, "audit", "", "file holding contractd's audit events (its stdout with audit sink stdout)")
	fs.IntVar(&o.Auto, "auto", 1, "unforced requests per route (the simulator's failure rate decides)")
	fs.DurationVar(&o.Wait, "wait", 20*time.Second, "how long to wait for contractd and the simulator")
	waitOnly := fs.Bool("wait-only", false, "only wait until both are ready")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	o.Out = os.Stdout
	if *waitOnly {
		if err := demo.WaitFor(ctx, o); err != nil {
			fmt.Fprintf(os.Stderr, "contractd-demo: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if o.AuditFile == "" {
		fmt.Fprintln(os.Stderr, "contractd-demo: -audit FILE is required")
		os.Exit(2)
	}
	if err := demo.Run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "contractd-demo: %v\n", err)
		os.Exit(1)
	}
}
