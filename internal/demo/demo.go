// Package demo drives `make demo`: it sends requests covering every contract
// route of a contractd config served in front of contractd-sim (valid at
// once, repaired by the retry, needs_review, plus a few unforced ones),
// prints what happened as a table, summarises contractd's audit events and
// cross-checks that the table says exactly what the audit says.
package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
)

// Options configure a demo run.
type Options struct {
	Config    string        // contractd config (examples/demo/contractd.yaml)
	API       string        // contractd API base URL; "" derives it from server.listen
	Admin     string        // contractd admin base URL; "" derives it from server.admin_listen
	Upstream  string        // simulator base URL; "" derives it from the first upstream's base_url
	AuditFile string        // where contractd's audit events go (its captured stdout)
	Auto      int           // unforced requests per route (the simulator's own failure rate decides)
	Wait      time.Duration // how long to wait for contractd and the simulator to be ready
	Out       io.Writer
}

// Scenario is one kind of request the demo sends.
type Scenario struct {
	Name     string        // valid, repaired, needs_review, auto
	SimMode  string        // the sim_mode field sent ("" for auto)
	Expected audit.Outcome // expected outcome ("" when not forced)
	Attempts int           // expected attempts (0 when not forced)
}

// faults picks, per route, the failure the retry repairs and the one it
// cannot, so the demo shows a variety of real failure modes.
var faults = map[string][2]string{
	"answer-json":      {"fence", "prose"},
	"ask-one-question": {"two_questions", "wrong_label"},
	"refusal":          {"prose", "refusal"},
	"close":            {"two_questions", "extra_key"},
	"answer-synthesis": {"trailing_comma", "truncated"},
	"classify-email":   {"bad_evidence", "wrong_label"},
	"extract-entities": {"wrong_label", "bad_evidence"},
	"identity-assist":  {"bad_evidence", "duplicate_key"},
	"refactor-output":  {"truncated", "missing_required"},
	"analyst-plan":     {"wrong_label", "two_questions"},
	"architect-spec":   {"extra_key", "fence"},
	"guardian-report":  {"refusal", "wrong_label"},
	"":                 {"trailing_comma", "extra_key"},
}

// Row is one request and what came back.
type Row struct {
	Route     string
	Contract  string
	Scenario  Scenario
	RequestID string
	Status    int
	Outcome   audit.Outcome // derived from the HTTP status
	Attempts  int           // X-Contract-Attempts
	Rules     []string      // per attempt, comma-joined rules (from the 422 review; nil for 200)
	Bad       []string      // expectation failures
}

// Event is the part of an audit event the demo reads.
type Event struct {
	RequestID string         `json:"request_id"`
	Route     string         `json:"route"`
	Outcome   audit.Outcome  `json:"outcome"`
	Status    int            `json:"status"`
	Duration  float64        `json:"duration_ms"`
	Attempts  []EventAttempt `json:"attempts"`
	Usage     struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// EventAttempt is one attempt of an Event.
type EventAttempt struct {
	Attempt      int              `json:"attempt"`
	Temperature  float64          `json:"temperature"`
	Shortened    bool             `json:"shortened"`
	FinishReason string           `json:"finish_reason"`
	Violations   []EventViolation `json:"violations"`
}

// EventViolation is the part of a violation the demo summarizes.
type EventViolation struct {
	Rule string `json:"rule"`
}

func (e *Event) attemptRules() []string {
	out := make([]string, len(e.Attempts))
	for i, a := range e.Attempts {
		var rules []string
		for _, v := range a.Violations {
			rules = append(rules, v.Rule)
		}
		out[i] = strings.Join(uniq(rules), ",")
	}
	return out
}

func uniq(xs []string) []string {
	var out []string
	for _, x := range xs {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// Run runs the demo; the error says what did not match.
func Run(ctx context.Context, o Options) error {
	rt, err := load(&o)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 90 * time.Second}
	if err := WaitReady(ctx, client, o); err != nil {
		return err
	}
	var rows []*Row
	covered := map[string]bool{}
	done := map[string]map[string]bool{} // contract -> scenarios already shown
	for _, r := range rt.RouteList {
		if r.Passthrough {
			continue
		}
		covered[r.Contract.Name] = true
		if done[r.Contract.Name] == nil {
			done[r.Contract.Name] = map[string]bool{}
		}
		// A second route for a contract only adds what the first could
		// not show (the edge routes' retrying twins).
		twin := len(done[r.Contract.Name]) > 0
		for i, sc := range scenarios(r, o.Auto) {
			if twin && (done[r.Contract.Name][sc.Name] || sc.Name == "auto") {
				continue
			}
			done[r.Contract.Name][sc.Name] = true
			row, err := send(ctx, client, o.API, r, sc, i)
			if err != nil {
				return fmt.Errorf("route %s, %s: %w", r.Name, sc.Name, err)
			}
			row.Contract = r.Contract.Name
			rows = append(rows, row)
		}
	}
	// Group the table by contract (a twin route right after its first).
	first := map[string]int{}
	for i, r := range rows {
		if _, ok := first[r.Contract]; !ok {
			first[r.Contract] = i
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return first[rows[i].Contract] < first[rows[j].Contract] })
	events, err := readAudit(ctx, o.AuditFile, rows)
	if err != nil {
		return err
	}
	mismatches := crossCheck(rows, events)
	printTable(o.Out, rows, events)
	printSummary(o.Out, rows, events, covered)
	var bad []string
	for _, r := range rows {
		for _, b := range r.Bad {
			bad = append(bad, fmt.Sprintf("%s %s (%s): %s", r.Route, r.Scenario.Name, r.RequestID, b))
		}
	}
	fmt.Fprintln(o.Out)
	if len(mismatches) == 0 {
		fmt.Fprintf(o.Out, "Cross-check: all %d rows match their audit events (outcome, status, attempts, violation rules).\n", len(rows))
	} else {
		fmt.Fprintf(o.Out, "Cross-check FAILED: %d difference(s) between the table and the audit:\n", len(mismatches))
		for _, m := range mismatches {
			fmt.Fprintln(o.Out, "  - "+m)
		}
	}
	if len(bad) > 0 {
		fmt.Fprintf(o.Out, "Unexpected outcomes (%d):\n", len(bad))
		for _, b := range bad {
			fmt.Fprintln(o.Out, "  - "+b)
		}
	}
	if rt.Review.Store != config.ReviewNone {
		if err := printReviews(ctx, client, o, rt, rows); err != nil {
			bad = append(bad, err.Error())
			fmt.Fprintln(o.Out, "Review queue FAILED: "+err.Error())
		}
	}
	if len(mismatches) > 0 || len(bad) > 0 {
		return errors.New("the demo found differences (see above)")
	}
	return nil
}

// printReviews checks that every needs_review answer became a stored
// review item and says how to resolve one.
func printReviews(ctx context.Context, client *http.Client, o Options, rt *config.Runtime, rows []*Row) error {
	var ids []string
	for _, r := range rows {
		if r.Status == http.StatusUnprocessableEntity {
			ids = append(ids, r.RequestID)
		}
	}
	if len(ids) == 0 {
		return errors.New("no needs_review item to show")
	}
	for _, id := range ids {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.Admin+"/admin/reviews/"+id, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("review %s: GET /admin/reviews/%s answered %d", id, id, resp.StatusCode)
		}
	}
	id := ids[0]
	fmt.Fprintln(o.Out)
	fmt.Fprintf(o.Out, "Review queue: all %d needs_review answers are stored items (%s store, %s).\n", len(ids), rt.Review.Store, rt.Review.Path)
	fmt.Fprintln(o.Out, "To resolve one, start the pair and leave it running with `make run`, then:")
	fmt.Fprintf(o.Out, "  open the reviewer page:  %s/review/\n", o.Admin)
	fmt.Fprintf(o.Out, "  or with curl:            curl -s '%s/admin/reviews?status=pending'\n", o.Admin)
	fmt.Fprintf(o.Out, "                           curl -s %s/admin/reviews/%s\n", o.Admin, id)
	fmt.Fprintf(o.Out, "                           curl -s -X POST %s/admin/reviews/%s/approve -d '{\"output\": {...corrected JSON...}, \"reviewer\": \"you\"}'\n", o.Admin, id)
	fmt.Fprintf(o.Out, "  the client side:         curl -s '%s/v1/reviews/%s?wait=30s'\n", o.API, id)
	return nil
}

// scenarios are the requests sent to route r: valid at once, repaired by
// the retry (when the plan ends at temperature 0 after a warmer attempt),
// needs_review, and auto ones the simulator's failure rate decides.
func scenarios(r *config.Route, auto int) []Scenario {
	f, ok := faults[r.Name]
	if !ok {
		f, ok = faults[strings.TrimSuffix(r.Name, "-retry")]
	}
	if !ok {
		f = faults[""]
	}
	plan := len(r.Plan)
	scen := []Scenario{{Name: "valid", SimMode: "valid", Expected: audit.OutcomeValid, Attempts: 1}}
	if plan >= 2 && r.Plan[plan-1].Temperature == 0 && r.Plan[0].Temperature > 0 {
		scen = append(scen, Scenario{Name: "repaired", SimMode: "hot:" + f[0], Expected: audit.OutcomeValid, Attempts: plan})
	}
	scen = append(scen, Scenario{Name: "needs_review", SimMode: f[1], Expected: audit.OutcomeNeedsReview, Attempts: plan})
	for i := 0; i < auto; i++ {
		scen = append(scen, Scenario{Name: "auto"})
	}
	return scen
}

// load reads o.Config and fills in the URLs o leaves empty from it.
func load(o *Options) (*config.Runtime, error) {
	rt, err := config.LoadOffline(o.Config) // a client: the server's secret variables may be unset
	if err != nil {
		return nil, err
	}
	fillURLs(o, rt)
	return rt, nil
}

func fillURLs(o *Options, rt *config.Runtime) {
	if o.API == "" {
		o.API = "http://" + rt.Server.Listen
	}
	if o.Admin == "" {
		o.Admin = o.API
		if rt.Server.AdminListen != "" {
			o.Admin = "http://" + rt.Server.AdminListen
		}
	}
	if o.Upstream == "" {
		for _, r := range rt.RouteList {
			o.Upstream = strings.TrimSuffix(r.Upstream.BaseURL, "/v1")
			break
		}
	}
}

// WaitReady polls contractd's /readyz and the simulator's /healthz.
func WaitReady(ctx context.Context, client *http.Client, o Options) error {
	if o.Wait <= 0 {
		o.Wait = 20 * time.Second
	}
	deadline := time.Now().Add(o.Wait)
	targets := []string{o.Admin + "/readyz"}
	if o.Upstream != "" {
		targets = append(targets, o.Upstream+"/healthz")
	}
	for _, u := range targets {
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not ready after %s", u, o.Wait)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// WaitFor is WaitReady for a config, for scripts/run.sh.
func WaitFor(ctx context.Context, o Options) error {
	if _, err := load(&o); err != nil {
		return err
	}
	return WaitReady(ctx, &http.Client{Timeout: 2 * time.Second}, o)
}

// body builds a request for route r: the prompt's example input, as
// contract_input when the prompt has an input schema, else as the user
// message.
func body(r *config.Route, sc Scenario, n int) ([]byte, error) {
	m := map[string]any{"model": r.Name}
	in := r.Prompt.ExampleInput
	if r.Prompt.InputSchema != nil {
		m["contract_input"] = in
		m["messages"] = []any{}
	} else {
		text, ok := in.(string)
		if !ok {
			b, _ := json.Marshal(in)
			text = string(b)
		}
		m["messages"] = []any{map[string]any{"role": "user", "content": text}}
	}
	if sc.SimMode != "" {
		m["sim_mode"] = sc.SimMode
	}
	// A distinct end-user id per request: forwarded byte-for-byte, so
	// unforced requests differ and the simulator's seeded draw varies.
	m["user"] = fmt.Sprintf("demo-%s-%d", sc.Name, n)
	return json.Marshal(m)
}

func outcomeFor(status int) audit.Outcome {
	switch {
	case status == http.StatusOK:
		return audit.OutcomeValid
	case status == http.StatusUnprocessableEntity:
		return audit.OutcomeNeedsReview
	case status >= 500:
		return audit.OutcomeUpstreamError
	default:
		return audit.OutcomeRejected
	}
}

func send(ctx context.Context, client *http.Client, api string, r *config.Route, sc Scenario, n int) (*Row, error) {
	b, err := body(r, sc, n)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+"/v1/chat/completions", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	row := &Row{Route: r.Name, Scenario: sc, Status: resp.StatusCode, Outcome: outcomeFor(resp.StatusCode),
		RequestID: resp.Header.Get("X-Request-Id")}
	row.Attempts, _ = strconv.Atoi(resp.Header.Get("X-Contract-Attempts"))
	switch resp.StatusCode {
	case http.StatusOK:
		var ok struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
			Contract struct {
				Attempts int `json:"attempts"`
			} `json:"contract"`
		}
		if err := json.Unmarshal(data, &ok); err != nil || len(ok.Choices) == 0 {
			row.Bad = append(row.Bad, "200 body is not a chat completion")
		} else {
			if !json.Valid([]byte(ok.Choices[0].Message.Content)) {
				row.Bad = append(row.Bad, "200 content is not JSON")
			}
			if ok.Contract.Attempts != row.Attempts {
				row.Bad = append(row.Bad, fmt.Sprintf("contract.attempts %d but X-Contract-Attempts %d", ok.Contract.Attempts, row.Attempts))
			}
		}
	case http.StatusUnprocessableEntity:
		var e struct {
			Error struct {
				Review struct {
					ID       string `json:"id"`
					Attempts []struct {
						Violations []struct {
							Rule string `json:"rule"`
						} `json:"violations"`
					} `json:"attempts"`
				} `json:"review"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &e); err != nil {
			row.Bad = append(row.Bad, "422 body is not an error envelope")
		}
		if e.Error.Review.ID != row.RequestID {
			row.Bad = append(row.Bad, "review.id differs from X-Request-Id")
		}
		row.Rules = []string{}
		for _, a := range e.Error.Review.Attempts {
			var rules []string
			for _, v := range a.Violations {
				rules = append(rules, v.Rule)
			}
			row.Rules = append(row.Rules, strings.Join(uniq(rules), ","))
		}
		if len(e.Error.Review.Attempts) != row.Attempts {
			row.Bad = append(row.Bad, fmt.Sprintf("review has %d attempts but X-Contract-Attempts %d", len(e.Error.Review.Attempts), row.Attempts))
		}
	default:
		msg := strings.TrimSpace(string(data))
		if len(msg) > 200 {
			msg = msg[:200]
		}
		row.Bad = append(row.Bad, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, msg))
	}
	if row.RequestID == "" {
		row.Bad = append(row.Bad, "no X-Request-Id")
	}
	if sc.Expected != "" && row.Outcome != sc.Expected {
		row.Bad = append(row.Bad, fmt.Sprintf("expected %s, got %s", sc.Expected, row.Outcome))
	}
	if sc.Attempts != 0 && row.Attempts != sc.Attempts {
		row.Bad = append(row.Bad, fmt.Sprintf("expected %d attempt(s), got %d", sc.Attempts, row.Attempts))
	}
	return row, nil
}

// readAudit reads the audit file until it holds an event for every row
// (contractd writes the event before the response completes, so this is
// normally immediate).
func readAudit(ctx context.Context, path string, rows []*Row) (map[string]*Event, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		events, err := parseAudit(path)
		if err != nil {
			return nil, err
		}
		missing := 0
		for _, r := range rows {
			if _, ok := events[r.RequestID]; !ok {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			return events, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func parseAudit(path string) (map[string]*Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	defer f.Close()
	events := map[string]*Event{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var ev Event
		if json.Unmarshal(line, &ev) != nil || ev.RequestID == "" {
			continue
		}
		events[ev.RequestID] = &ev
	}
	return events, sc.Err()
}

// crossCheck compares every row with its audit event.
func crossCheck(rows []*Row, events map[string]*Event) []string {
	var out []string
	for _, r := range rows {
		ev, ok := events[r.RequestID]
		id := fmt.Sprintf("%s %s (%s)", r.Route, r.Scenario.Name, r.RequestID)
		if !ok {
			out = append(out, id+": no audit event")
			continue
		}
		if ev.Route != r.Route {
			out = append(out, fmt.Sprintf("%s: audit route %q", id, ev.Route))
		}
		if ev.Outcome != r.Outcome {
			out = append(out, fmt.Sprintf("%s: table outcome %s, audit %s", id, r.Outcome, ev.Outcome))
		}
		if ev.Status != r.Status {
			out = append(out, fmt.Sprintf("%s: table status %d, audit %d", id, r.Status, ev.Status))
		}
		if len(ev.Attempts) != r.Attempts {
			out = append(out, fmt.Sprintf("%s: table attempts %d, audit %d", id, r.Attempts, len(ev.Attempts)))
		}
		ar := ev.attemptRules()
		if r.Rules != nil && !slices.Equal(r.Rules, ar) {
			out = append(out, fmt.Sprintf("%s: review rules %q, audit %q", id, r.Rules, ar))
		}
		if r.Status == http.StatusOK && len(ar) > 0 && ar[len(ar)-1] != "" {
			out = append(out, fmt.Sprintf("%s: accepted, but the audit's last attempt has violations %s", id, ar[len(ar)-1]))
		}
	}
	return out
}

func rulesCell(rules []string) string {
	var parts []string
	for i, r := range rules {
		if r == "" {
			r = "ok"
		}
		parts = append(parts, fmt.Sprintf("#%d %s", i+1, r))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " · ")
}

func printTable(w io.Writer, rows []*Row, events map[string]*Event) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "contractd demo: %d requests over %d routes\n\n", len(rows), countRoutes(rows))
	fmt.Fprintln(w, "Scenarios: valid = the simulator answers correctly; repaired = it fails at temperature > 0")
	fmt.Fprintln(w, "(sim_mode hot:MODE) and contractd's retry at temperature 0 gets a valid answer; needs_review =")
	fmt.Fprintln(w, "it fails on every attempt; auto = no sim_mode, the simulator's seeded failure rate decides.")
	fmt.Fprintln(w, "The edge routes (answer-json, ask-one-question, refusal, close) make one attempt, as seed 000")
	fmt.Fprintln(w, "requires; their *-retry twins show the same contracts behind the default retry.")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUTE\tSCENARIO\tSIM_MODE\tOUTCOME\tHTTP\tATTEMPTS\tVIOLATION RULES (per attempt, from the audit)")
	prev := ""
	for _, r := range rows {
		route := r.Route
		if route == prev {
			route = ""
		}
		prev = r.Route
		mode := r.Scenario.SimMode
		if mode == "" {
			mode = "(auto)"
		}
		cell := "-"
		if ev, ok := events[r.RequestID]; ok {
			cell = rulesCell(ev.attemptRules())
		}
		flag := ""
		if len(r.Bad) > 0 {
			flag = "  <-- unexpected"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s%s\n", route, r.Scenario.Name, mode, r.Outcome, r.Status, r.Attempts, cell, flag)
	}
	tw.Flush()
}

func countRoutes(rows []*Row) int {
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.Route] = true
	}
	return len(seen)
}

func printSummary(w io.Writer, rows []*Row, events map[string]*Event, covered map[string]bool) {
	var evs []*Event
	for _, r := range rows {
		if ev, ok := events[r.RequestID]; ok {
			evs = append(evs, ev)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Audit summary (%d events for these requests, %d in the audit stream):\n", len(evs), len(events))
	byOutcome := map[audit.Outcome]int{}
	byAttempts := map[int]int{}
	byRule := map[string]int{}
	repaired := 0
	var prompt, completion int
	var durations []float64
	for _, ev := range evs {
		byOutcome[ev.Outcome]++
		byAttempts[len(ev.Attempts)]++
		if ev.Outcome == audit.OutcomeValid && len(ev.Attempts) > 1 {
			repaired++
		}
		for _, a := range ev.Attempts {
			for _, v := range a.Violations {
				byRule[v.Rule]++
			}
		}
		prompt += ev.Usage.PromptTokens
		completion += ev.Usage.CompletionTokens
		durations = append(durations, ev.Duration)
	}
	fmt.Fprintf(w, "  outcomes:   %s\n", joinCounts(byOutcome))
	fmt.Fprintf(w, "              (valid at once %d, repaired by the retry %d)\n", byOutcome[audit.OutcomeValid]-repaired, repaired)
	att := map[string]int{}
	for n, c := range byAttempts {
		att[fmt.Sprintf("%d attempt(s)", n)] = c
	}
	fmt.Fprintf(w, "  attempts:   %s\n", joinCounts(att))
	fmt.Fprintf(w, "  violations: %s\n", joinCounts(byRule))
	fmt.Fprintf(w, "  tokens:     %d prompt + %d completion = %d (upstream-reported, every attempt)\n", prompt, completion, prompt+completion)
	if len(durations) > 0 {
		sort.Float64s(durations)
		fmt.Fprintf(w, "  duration:   p50 %.0f ms, max %.0f ms\n", durations[len(durations)/2], durations[len(durations)-1])
	}
	names := slices.Sorted(maps.Keys(covered))
	fmt.Fprintf(w, "  contracts:  %d covered: %s\n", len(names), strings.Join(names, ", "))
}

// joinCounts prints "a 3, b 2" by count, then name.
func joinCounts[K ~string](m map[K]int) string {
	if len(m) == 0 {
		return "none"
	}
	type kv struct {
		k K
		v int
	}
	var kvs []kv
	for k, v := range m {
		kvs = append(kvs, kv{k, v})
	}
	sort.Slice(kvs, func(i, j int) bool {
		if kvs[i].v != kvs[j].v {
			return kvs[i].v > kvs[j].v
		}
		return kvs[i].k < kvs[j].k
	})
	var parts []string
	for _, p := range kvs {
		parts = append(parts, fmt.Sprintf("%s %d", p.k, p.v))
	}
	return strings.Join(parts, ", ")
}
