package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/proxy"
	"github.com/contractd/contractd/review"
	"github.com/go-json-experiment/json/jsontext"
)

// Options configure one replay.
type Options struct {
	Runtime *config.Runtime // the config to judge with
	Route   string          // only this route ("" every route); must be a route of Runtime
	Since   time.Time       // only records at or after (zero: all)
	JSON    bool            // one JSON object per item, then the summary
	Out     io.Writer       // items and summary
	Err     io.Writer       // unreadable lines, notes, live progress

	// Workers judge offline in parallel (0: GOMAXPROCS). Output order is
	// the input order whatever the count.
	Workers      int
	MaxLineBytes int // 0: DefaultMaxLineBytes

	// Live sends stored requests through Server (whose Runtime should be
	// Runtime) instead of judging stored outputs.
	Live        bool
	Server      *proxy.Server
	Concurrency int           // live requests in flight (0: 4)
	MaxRequests int           // live requests sent at most (0: no limit)
	Progress    time.Duration // live progress line interval (0: 2s, <0: none)
}

// Item is the new verdict on one stored output (offline) or one stored
// request (live).
type Item struct {
	ID         string                `json:"id"`         // request id + "#" + attempt, or + "#approved"; the request id live
	RequestID  string                `json:"request_id"` // the audit request id or review id
	Route      string                `json:"route"`
	Attempt    int                   `json:"attempt,omitempty"` // offline: the stored attempt (0: an approved output)
	File       string                `json:"file,omitempty"`
	Line       int                   `json:"line,omitempty"`
	Old        Verdict               `json:"old"` // valid, invalid or approved
	New        Verdict               `json:"new"` // valid, invalid or unjudged
	Changed    bool                  `json:"changed"`
	Violations []contracts.Violation `json:"violations"`
	Reason     string                `json:"reason,omitempty"`   // why unjudged
	Attempts   int                   `json:"attempts,omitempty"` // live: attempts the plan made
}

// New verdicts.
const (
	NewValid    Verdict = "valid"
	NewInvalid  Verdict = "invalid"
	NewUnjudged Verdict = "unjudged" // the route is gone, or the new config refuses the stored input
)

// Counts are one route's (or the total's) tallies. Items = StillValid +
// StillInvalid + NewlyValid + NewlyInvalid + Unjudged; outputs that are
// not replayable are counted beside them.
type Counts struct {
	Items         int `json:"items"`
	StillValid    int `json:"still_valid"`
	StillInvalid  int `json:"still_invalid"`
	NewlyValid    int `json:"newly_valid"`
	NewlyInvalid  int `json:"newly_invalid"`
	Unjudged      int `json:"unjudged"`
	NotReplayable int `json:"not_replayable"`
}

func (c *Counts) add(o Counts) {
	c.Items += o.Items
	c.StillValid += o.StillValid
	c.StillInvalid += o.StillInvalid
	c.NewlyValid += o.NewlyValid
	c.NewlyInvalid += o.NewlyInvalid
	c.Unjudged += o.Unjudged
	c.NotReplayable += o.NotReplayable
}

// RouteCounts are the counts of one route.
type RouteCounts struct {
	Route string `json:"route"`
	Counts
}

// Summary is what a replay found.
type Summary struct {
	Mode        string        `json:"mode"` // offline | live
	Routes      []RouteCounts `json:"routes"`
	Total       Counts        `json:"total"`
	Lines       int           `json:"lines,omitempty"`       // audit lines read
	Unreadable  int           `json:"unreadable"`            // lines reported and skipped
	Skipped     int           `json:"skipped"`               // records without outputs (other events, passthrough, rejected…)
	NotRun      int           `json:"not_run,omitempty"`     // live: past --max-requests
	Interrupted int           `json:"interrupted,omitempty"` // live: stopped by Ctrl-C in flight
	Stopped     bool          `json:"stopped"`               // the run ended early (Ctrl-C)
	Regressed   bool          `json:"regressed"`             // an approved or valid output is now invalid
}

// Exit codes.
const (
	ExitOK        = 0
	ExitRegressed = 1
	ExitUsage     = 2
)

// ExitCode is the process exit code for s.
func (s *Summary) ExitCode() int {
	if s.Regressed {
		return ExitRegressed
	}
	return ExitOK
}

// UsageError is an error of the caller's: a bad flag, an unknown route, a
// file that cannot be opened (exit 2).
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, a ...any) error { return &UsageError{Msg: fmt.Sprintf(format, a...)} }

func (o *Options) check() error { // fills defaults; o is the caller's copy
	if o.Runtime == nil {
		return usagef("no config")
	}
	if o.Route != "" {
		if r := o.Runtime.Routes[o.Route]; r == nil || r.Passthrough {
			return usagef("--route %s: not a contract route in %s", strconv.Quote(o.Route), o.Runtime.Path)
		}
	}
	if o.Live && o.Server == nil {
		return usagef("--live needs a server")
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Err == nil {
		o.Err = io.Discard
	}
	// The collector and the live progress line both write to Err.
	o.Err = &lockedWriter{w: o.Err}
	return nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Audit replays audit files (or review exports) in order.
func Audit(ctx context.Context, o Options, files []string) (*Summary, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	r := newRunner(o)
	err := r.run(ctx, func(ctx context.Context, emit func(job)) error {
		for _, name := range files {
			if err := r.readFile(ctx, name, emit); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return nil
			}
		}
		return nil
	})
	return r.finish(ctx, err)
}

// readFile emits each line of one audit file. A read error mid-file (a
// gzip stream cut short) is reported like an unreadable line and the next
// file is read; only a file that cannot be opened stops the replay.
func (r *runner) readFile(ctx context.Context, name string, emit func(job)) error {
	f, err := openAudit(name)
	if err != nil {
		return usagef("--audit %s: %v", name, cleanErr(err))
	}
	defer f.Close()
	display := name
	if name == "-" {
		display = "stdin"
	}
	lr := newLineReader(f, r.opts.MaxLineBytes)
	for ctx.Err() == nil {
		b, n, tooLong, complete, err := lr.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			emit(job{file: display, line: n + 1, readErr: err.Error()})
			return nil
		}
		if n == 1 {
			// A set curated by hand may come from an editor that starts
			// the file with a UTF-8 byte order mark.
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
		}
		emit(job{file: display, line: n, raw: b, tooLong: tooLong, incomplete: !complete})
	}
	return nil
}

// Reviews replays the items of a review store: every attempt's output and
// every approved output.
func Reviews(ctx context.Context, o Options, st review.Reader) (*Summary, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	r := newRunner(o)
	r.store = st
	err := r.run(ctx, func(ctx context.Context, emit func(job)) error {
		return st.Export(ctx, review.ExportFilter{Route: o.Route, Since: o.Since}, func(it *review.Item) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			emit(job{rec: itemRecord(it)})
			return nil
		})
	})
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		err = nil // Ctrl-C: the summary of what ran
	}
	var ue *UsageError
	if err != nil && !errors.As(err, &ue) {
		err = fmt.Errorf("review store: %w", err)
	}
	return r.finish(ctx, err)
}

// itemRecord turns a review item into a record: its attempts' outputs and,
// when approved, the approved output.
func itemRecord(it *review.Item) *Record {
	// Time as the store's since filter reads it: resolution, else creation.
	rec := &Record{ID: it.ID, Route: it.Route, Time: it.CreatedAt, Outcome: audit.OutcomeNeedsReview, Request: it.Request}
	if it.ResolvedAt != nil {
		rec.Time = *it.ResolvedAt
	}
	if hasValue(jsontext.Value(it.Input)) {
		rec.Input = []byte(it.Input)
	}
	for _, a := range it.Attempts {
		if a.Output == "" && a.OutputSHA256 == "" {
			continue
		}
		s := Stored{Attempt: a.Attempt, Output: a.Output, Finish: a.FinishReason, Old: OldValid}
		if len(a.Violations) > 0 {
			s.Old = OldInvalid
		}
		for _, v := range a.Violations {
			if v.Rule == contracts.RuleModelRefusal {
				s.Refused = true
			}
		}
		rec.Outputs = append(rec.Outputs, s)
	}
	if it.Status == review.StatusApproved && it.Resolution != nil && hasValue(jsontext.Value(it.Resolution.Output)) {
		rec.Outputs = append(rec.Outputs, Stored{Output: string(it.Resolution.Output), Old: OldApproved})
	}
	if rec.Input == nil {
		rec.NotReplayable, rec.Outputs = len(rec.Outputs), nil
	}
	return rec
}

// job is one unit of work: an audit line, or a record from a store.
type job struct {
	file       string
	line       int
	raw        []byte
	tooLong    bool
	incomplete bool   // the file ended before the line's newline
	readErr    string // the file could not be read further
	rec        *Record
	hasRaw     bool // raw is arena[off:off+n] of the job's chunk
	off, n     int
}

// result is what a job gave.
type result struct {
	problem  string // an unreadable line, reported and skipped
	skip     bool   // nothing to judge on this line
	filtered bool   // another route, or before --since
	route    string
	items    []Item
	notRepl  int
	notRun   bool // live: past the request budget
	stopped  bool // live: interrupted in flight
}

// A chunk carries jobs to a worker and their results, in input order, to
// the collector. Lines are copied into the chunk's arena: the line reader
// reuses its buffer.
type chunk struct {
	jobs  []job
	arena []byte
	res   []result
	done  chan struct{}
}

const (
	chunkLines = 128
	chunkBytes = 512 << 10
)

type runner struct {
	opts     Options
	store    review.Reader
	workers  int
	perChunk int

	// collector state
	sum    Summary
	counts map[string]*Counts
	enc    *itemWriter

	// live
	sent      atomic.Int64
	doneN     atomic.Int64
	newlyBad  atomic.Int64
	liveStart time.Time
}

func newRunner(o Options) *runner {
	r := &runner{opts: o, counts: map[string]*Counts{}, enc: newItemWriter(o.Out, o.JSON)}
	r.workers, r.perChunk = o.Workers, chunkLines
	if r.workers <= 0 {
		r.workers = runtime.GOMAXPROCS(0)
	}
	r.sum.Mode = "offline"
	if o.Live {
		r.sum.Mode = "live"
		r.workers = o.Concurrency
		if r.workers <= 0 {
			r.workers = 4
		}
		r.perChunk = 1 // one request per job: a slow upstream call must not hold others back
	}
	return r
}

// run drives produce through the worker pool and collects the results in
// order. Memory is bounded by the chunks in flight (about 4 × workers:
// queued for the collector, queued for a worker, being filled), whatever
// the input's size.
func (r *runner) run(ctx context.Context, produce func(context.Context, func(job)) error) error {
	work := make(chan *chunk, r.workers)
	order := make(chan *chunk, 2*r.workers)
	// Chunks are recycled through a free list (a sync.Pool empties at
	// every GC, and a replay allocates enough to collect often).
	free := make(chan *chunk, 3*r.workers+2)
	getChunk := func() *chunk {
		select {
		case c := <-free:
			return c
		default:
			return &chunk{}
		}
	}
	var wg sync.WaitGroup
	for range r.workers {
		wg.Go(func() {
			for c := range work {
				for i := range c.jobs {
					c.res[i] = r.process(ctx, &c.jobs[i])
				}
				close(c.done)
			}
		})
	}
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for c := range order {
			<-c.done
			for i := range c.res {
				r.collect(&c.jobs[i], &c.res[i])
			}
			clear(c.res)
			clear(c.jobs)
			select {
			case free <- c:
			default:
			}
		}
	}()
	stopProgress := r.startProgress(ctx)

	var cur *chunk
	flush := func() {
		if cur == nil || len(cur.jobs) == 0 {
			return
		}
		for i := range cur.jobs { // the arena has its final address now
			if j := &cur.jobs[i]; j.hasRaw {
				j.raw = cur.arena[j.off : j.off+j.n : j.off+j.n]
			}
		}
		cur.res = append(cur.res[:0], make([]result, len(cur.jobs))...)
		cur.done = make(chan struct{})
		order <- cur
		work <- cur
		cur = nil
	}
	emit := func(j job) {
		if cur == nil {
			cur = getChunk()
			cur.jobs, cur.arena = cur.jobs[:0], cur.arena[:0]
		}
		if j.raw != nil {
			j.hasRaw, j.off, j.n = true, len(cur.arena), len(j.raw)
			cur.arena = append(cur.arena, j.raw...)
			j.raw = nil
		}
		cur.jobs = append(cur.jobs, j)
		if len(cur.jobs) >= r.perChunk || len(cur.arena) >= chunkBytes {
			flush()
		}
	}
	err := produce(ctx, emit)
	flush()
	close(work)
	close(order)
	wg.Wait()
	<-collected
	stopProgress()
	return err
}

// process parses and judges one job (in a worker).
func (r *runner) process(ctx context.Context, j *job) result {
	switch {
	case j.readErr != "":
		return result{problem: "cannot read further: " + j.readErr}
	case j.tooLong:
		return result{problem: fmt.Sprintf("line longer than %d bytes; not judged", orMax(r.opts.MaxLineBytes))}
	}
	rec := j.rec
	if rec == nil {
		var err error
		rec, err = ParseLine(j.raw)
		switch {
		case errors.Is(err, ErrNotRecord):
			return result{skip: true}
		case err != nil && j.incomplete:
			return result{problem: "truncated line (the file ends inside it): " + err.Error()}
		case err != nil:
			return result{problem: err.Error()}
		}
	}
	if (r.opts.Route != "" && rec.Route != r.opts.Route) || (!r.opts.Since.IsZero() && !rec.Time.IsZero() && rec.Time.Before(r.opts.Since)) {
		return result{filtered: true}
	}
	if r.opts.Live {
		return r.live(ctx, j, rec)
	}
	return r.judge(j, rec)
}

func orMax(n int) int {
	if n <= 0 {
		return DefaultMaxLineBytes
	}
	return n
}

// route is the contract route a record names in the new config, or the
// reason it has none.
func (r *runner) route(name string) (*config.Route, string) {
	rt := r.opts.Runtime.Routes[name]
	switch {
	case rt == nil:
		return nil, "route " + strconv.Quote(name) + " is not in the config"
	case rt.Passthrough:
		return nil, "route " + strconv.Quote(name) + " is a passthrough route in the config"
	}
	return rt, ""
}

// judge re-judges a record's stored outputs offline, with serving's judge
// and the subject serving's request path builds from the stored input.
func (r *runner) judge(j *job, rec *Record) result {
	res := result{route: rec.Route, notRepl: rec.NotReplayable}
	if len(rec.Outputs) == 0 {
		return res
	}
	res.items = make([]Item, len(rec.Outputs))
	route, reason := r.route(rec.Route)
	var subj contracts.Subject
	if route != nil {
		var aerr *proxy.APIError
		subj, aerr = proxy.StoredSubject(route, []byte(rec.Input))
		if aerr != nil {
			route, reason = nil, "the config refuses the stored input ("+string(aerr.Code)+"): "+aerr.Message
		}
	}
	for i, s := range rec.Outputs {
		it := &res.items[i]
		*it = Item{ID: outputID(rec.ID, s.Attempt), RequestID: rec.ID, Route: rec.Route, Attempt: s.Attempt,
			File: j.file, Line: j.line, Old: s.Old, Violations: []contracts.Violation{}}
		if route == nil {
			it.New, it.Reason, it.Changed = NewUnjudged, reason, true
			continue
		}
		v := proxy.Judge(route.Contract, s.Output, s.Finish, s.Refused, &subj)
		it.New = NewValid
		if !v.Valid {
			it.New, it.Violations = NewInvalid, v.Violations
		}
		it.Changed = (it.Old == OldInvalid) != (it.New == NewInvalid)
	}
	return res
}

func outputID(id string, attempt int) string {
	if attempt == 0 {
		return id + "#approved"
	}
	return id + "#" + strconv.Itoa(attempt)
}

// collect tallies one result and prints what it should (collector only).
func (r *runner) collect(j *job, res *result) {
	if j.rec == nil && j.readErr == "" {
		r.sum.Lines++
	}
	switch {
	case res.problem != "":
		r.sum.Unreadable++
		fmt.Fprintf(r.opts.Err, "%s:%d: %s\n", j.file, j.line, res.problem)
		return
	case res.skip:
		r.sum.Skipped++
		return
	case res.filtered:
		return
	case res.notRun:
		r.sum.NotRun++
		return
	case res.stopped:
		r.sum.Interrupted++
		return
	}
	c := r.counts[res.route]
	if c == nil {
		c = &Counts{}
		r.counts[res.route] = c
	}
	c.NotReplayable += res.notRepl
	for i := range res.items {
		it := &res.items[i]
		c.Items++
		switch {
		case it.New == NewUnjudged:
			c.Unjudged++
		case it.Old == OldInvalid && it.New == NewInvalid:
			c.StillInvalid++
		case it.Old == OldInvalid:
			c.NewlyValid++
		case it.New == NewInvalid:
			c.NewlyInvalid++
		default:
			c.StillValid++
		}
		r.enc.item(it)
	}
}

// finish orders the per-route counts (config order, then routes the
// config no longer has) and prints the summary.
func (r *runner) finish(ctx context.Context, err error) (*Summary, error) {
	if err != nil {
		return nil, err
	}
	s := &r.sum
	s.Stopped = ctx.Err() != nil
	seen := map[string]bool{}
	for _, rt := range r.opts.Runtime.RouteList {
		if c := r.counts[rt.Name]; c != nil {
			s.Routes = append(s.Routes, RouteCounts{Route: rt.Name, Counts: *c})
			seen[rt.Name] = true
		}
	}
	var gone []string
	for name := range r.counts {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	slices.Sort(gone)
	for _, name := range gone {
		s.Routes = append(s.Routes, RouteCounts{Route: name, Counts: *r.counts[name]})
	}
	if s.Routes == nil {
		s.Routes = []RouteCounts{}
	}
	for _, rc := range s.Routes {
		s.Total.add(rc.Counts)
	}
	s.Regressed = s.Total.NewlyInvalid > 0
	r.enc.summary(s)
	r.notes(s)
	return s, r.enc.err
}

// notes tells on stderr what the table does not: lines skipped, budget,
// interruption.
func (r *runner) notes(s *Summary) {
	w := r.opts.Err
	if s.Unreadable > 0 {
		fmt.Fprintf(w, "replay: %d unreadable line(s) reported above were not judged\n", s.Unreadable)
	}
	if s.Total.NotReplayable > 0 {
		fmt.Fprintf(w, "replay: %d stored output(s) are not replayable: the source holds no content for them (audit.include_content was false)\n", s.Total.NotReplayable)
	}
	if s.Total.Items == 0 && s.Total.NotReplayable == 0 && s.NotRun == 0 && !s.Stopped {
		// Exit 0 by the rule (nothing regressed), but a CI job replaying
		// an empty or wrong file should see that nothing was checked.
		kept := ""
		if r.opts.Route != "" || !r.opts.Since.IsZero() {
			kept = " that --route and --since keep"
		}
		fmt.Fprintf(w, "replay: nothing was judged: the source holds no stored output%s\n", kept)
	}
	if s.Total.Unjudged > 0 {
		fmt.Fprintf(w, "replay: %d item(s) could not be judged under this config (see the lines marked unjudged)\n", s.Total.Unjudged)
	}
	if s.NotRun > 0 {
		fmt.Fprintf(w, "replay: --max-requests %d reached; %d stored request(s) not sent\n", r.opts.MaxRequests, s.NotRun)
	}
	if s.Stopped {
		fmt.Fprintf(w, "replay: interrupted; the summary covers what ran (%d request(s) stopped in flight)\n", s.Interrupted)
	}
}
