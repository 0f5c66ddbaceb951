package replay

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/proxy"
)

// LiveServer is the serving pipeline without listeners, audit or review
// store: what --live sends the stored requests through. Upstream keys are
// read with env, and each contract route's key variable must be set, as
// serve requires.
func LiveServer(rt *config.Runtime, env func(string) (string, bool)) (*proxy.Server, error) {
	for _, r := range rt.RouteList {
		if e := r.Upstream.APIKeyEnv; e != "" && !r.Passthrough {
			if _, ok := env(e); !ok {
				return nil, usagef("upstream %q: environment variable %s (api_key_env) is not set", r.Upstream.Name, e)
			}
		}
	}
	caller := proxy.NewCaller(func(u *config.Upstream) string {
		if u.APIKeyEnv == "" {
			return ""
		}
		k, _ := env(u.APIKeyEnv)
		return k
	})
	sink, _ := audit.New(audit.SinkNone, "")
	return proxy.NewServer(rt, caller, sink, slog.New(slog.DiscardHandler)), nil
}

// live sends one stored request through its route's current attempt plan
// (in a worker). The request is the stored client body (review items) or,
// from an audit or an export, the input as a user message (or
// contract_input), which is all the audit keeps of a request.
func (r *runner) live(ctx context.Context, j *job, rec *Record) result {
	res := result{route: rec.Route}
	old := OldInvalid // a review item or an export line: the request ended in needs_review
	switch rec.Outcome {
	case audit.OutcomeValid:
		old = OldValid
	case audit.OutcomeNeedsReview, outcomeApproved:
	default:
		return result{skip: true} // rejected, upstream_error…: no verdict to compare with
	}
	if rec.Input == nil && rec.Request == nil {
		res.notRepl = 1
		return res
	}
	it := Item{ID: rec.ID, RequestID: rec.ID, Route: rec.Route, File: j.file, Line: j.line, Old: old, Violations: []contracts.Violation{}}
	route, reason := r.route(rec.Route)
	if route == nil {
		it.New, it.Reason, it.Changed = NewUnjudged, reason, true
		res.items = []Item{it}
		return res
	}
	if ctx.Err() != nil {
		return result{filtered: true} // read but never sent: not part of what ran
	}
	if m := r.opts.MaxRequests; m > 0 && r.sent.Add(1) > int64(m) {
		return result{notRun: true}
	} else if m <= 0 {
		r.sent.Add(1)
	}
	body := rec.Request
	if r.store != nil && body == nil {
		// Export streams items without their request; fetch it.
		if full, err := r.store.Get(ctx, rec.ID); err == nil {
			body = full.Request
		}
	}
	if body == nil {
		body = proxy.StoredRequest(route, []byte(rec.Input))
	}
	rp, aerr := r.opts.Server.Replay(ctx, rec.Route, body)
	defer r.doneN.Add(1)
	if ctx.Err() != nil {
		return result{stopped: true}
	}
	switch {
	case aerr != nil:
		it.New, it.Reason = NewUnjudged, string(aerr.Code)+": "+aerr.Message
	case rp.Err != nil:
		it.New, it.Reason = NewUnjudged, fmt.Sprintf("%s (%d): %s", rp.Err.Code, rp.Err.Status, rp.Err.Message)
	case rp.Valid:
		it.New = NewValid
	default:
		it.New = NewInvalid
		if n := len(rp.Attempts); n > 0 {
			it.Violations = rp.Attempts[n-1].Violations
		}
	}
	it.Attempts = len(rp.Attempts)
	it.Changed = it.New == NewUnjudged || (old == OldInvalid) != (it.New == NewInvalid)
	if old != OldInvalid && it.New == NewInvalid {
		r.newlyBad.Add(1)
	}
	res.items = []Item{it}
	return res
}

// startProgress prints a progress line on stderr while a live replay runs
// (rewritten in place on a terminal, a line per interval otherwise).
func (r *runner) startProgress(ctx context.Context) func() {
	every := r.opts.Progress
	if !r.opts.Live || every < 0 {
		return func() {}
	}
	if every == 0 {
		every = 2 * time.Second
	}
	r.liveStart = time.Now()
	tty := isTerminal(unlock(r.opts.Err))
	stop := make(chan struct{})
	done := make(chan struct{})
	print := func(final bool) {
		budget := ""
		if m := r.opts.MaxRequests; m > 0 {
			budget = fmt.Sprintf("/%d", m)
		}
		sent := min(r.sent.Load(), int64(max(r.opts.MaxRequests, 0)))
		if r.opts.MaxRequests <= 0 {
			sent = r.sent.Load()
		}
		el := time.Since(r.liveStart).Round(time.Second)
		line := fmt.Sprintf("replay: %d%s requests sent, %d done, %d newly invalid, %s", sent, budget, r.doneN.Load(), r.newlyBad.Load(), el)
		switch {
		case tty && final:
			fmt.Fprintf(r.opts.Err, "\r%s\n", line)
		case tty:
			fmt.Fprintf(r.opts.Err, "\r%s", line)
		default:
			fmt.Fprintln(r.opts.Err, line)
		}
	}
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		printed := false
		for {
			select {
			case <-t.C:
				print(false)
				printed = true
			case <-stop:
				if printed {
					print(true)
				}
				return
			}
		}
	}()
	return func() { close(stop); <-done }
}

func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func unlock(w any) any {
	if l, ok := w.(*lockedWriter); ok {
		return l.w
	}
	return w
}
