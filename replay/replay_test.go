package replay

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestAuditSameConfig: replaying an audit under the config that wrote it
// changes nothing: every attempt keeps its verdict, no item line, exit 0.
func TestAuditSameConfig(t *testing.T) {
	checkNoLeak(t)
	_, _, rt, a := servedAudit(t, "SHORT", "LONG", "BADWORD", "FLAKY", "LEAK")
	s, out, errb := runAudit(t, Options{Runtime: rt}, a)
	if s.ExitCode() != ExitOK || s.Regressed {
		t.Fatalf("exit %d\n%s%s", s.ExitCode(), out, errb)
	}
	// SHORT, LONG: 1 valid attempt each; BADWORD, LEAK: 2 invalid each;
	// FLAKY: invalid then valid.
	want := Counts{Items: 8, StillValid: 3, StillInvalid: 5}
	if s.Total != want || len(s.Routes) != 1 || s.Routes[0].Route != "classify" {
		t.Fatalf("summary %+v, want total %+v", s, want)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "route") || !strings.Contains(out, "offline replay: no regression") {
		t.Fatalf("output:\n%s", out)
	}
	if strings.Contains(out, " -> ") {
		t.Fatalf("item lines for unchanged verdicts:\n%s", out)
	}
}

// TestAuditTightenedSchema: a tightened schema turns outputs that were
// accepted into violations; replay names each item with its new
// violations and exits 1.
func TestAuditTightenedSchema(t *testing.T) {
	up, _, _, a := servedAudit(t, "SHORT", "LONG", "FLAKY")
	_, tight := writeConfig(t, t.TempDir(), cfgOpts{upstream: up.URL(), schema: tightSchema})
	s, out, _ := runAudit(t, Options{Runtime: tight}, a)
	if s.ExitCode() != ExitRegressed || s.Total.NewlyInvalid != 1 || s.Total.StillValid != 2 || s.Total.StillInvalid != 1 {
		t.Fatalf("exit %d, total %+v\n%s", s.ExitCode(), s.Total, out)
	}
	re := regexp.MustCompile(`(?m)^req_[0-9a-f]+#1 classify valid -> invalid: maxLength at /summary \(.+\)$`)
	if !re.MatchString(out) {
		t.Fatalf("no item line naming the regression:\n%s", out)
	}
	if strings.Count(out, " -> ") != 1 || !strings.Contains(out, "REGRESSION: 1 approved or previously valid output(s) are now invalid") {
		t.Fatalf("output:\n%s", out)
	}
}

// TestAuditLoosenedSchema: a loosened contract accepts outputs that were
// rejected: newly valid, reported, not a regression.
func TestAuditLoosenedSchema(t *testing.T) {
	up, _, _, a := servedAudit(t, "EXTRA")
	_, loose := writeConfig(t, t.TempDir(), cfgOpts{upstream: up.URL(), schema: looseSchema})
	s, out, _ := runAudit(t, Options{Runtime: loose}, a)
	if s.ExitCode() != ExitOK || s.Total.NewlyValid != 2 || s.Total.Items != 2 {
		t.Fatalf("exit %d total %+v\n%s", s.ExitCode(), s.Total, out)
	}
	if !regexp.MustCompile(`(?m)^req_[0-9a-f]+#2 classify invalid -> valid$`).MatchString(out) {
		t.Fatalf("output:\n%s", out)
	}
}

// TestAuditPromptLeakAgainstNewPrompt: prompt_leak compares outputs with
// the system prompt as the new config renders it: an output quoting the
// new prompt is newly invalid, one quoting only the old prompt newly valid.
func TestAuditPromptLeakAgainstNewPrompt(t *testing.T) {
	up := upstreamByMarker(t)
	dir := t.TempDir()
	_, rt := writeConfig(t, dir, cfgOpts{upstream: up.URL(), system: "Sort the mail into boxes please."})
	a := writeFile(t, dir, "audit.jsonl", serveAudit(t, rt, "LEAK"))
	_, leak := writeConfig(t, t.TempDir(), cfgOpts{upstream: up.URL()}) // baseSystem, which LEAK quotes
	s, out, _ := runAudit(t, Options{Runtime: leak}, a)
	if s.Total.NewlyInvalid != 1 || !strings.Contains(out, "valid -> invalid: prompt_leak at /summary") {
		t.Fatalf("total %+v\n%s", s.Total, out)
	}
	// The other way: outputs that leaked the old prompt are newly valid
	// once the prompt no longer says that.
	_, other := writeConfig(t, t.TempDir(), cfgOpts{upstream: up.URL(), system: "Sort the mail into boxes please."})
	a2 := writeFile(t, dir, "audit2.jsonl", serveAudit(t, leak, "LEAK"))
	s, out, _ = runAudit(t, Options{Runtime: other}, a2)
	if s.Total.NewlyValid != 2 || s.Total.Items != 2 {
		t.Fatalf("total %+v\n%s", s.Total, out)
	}
}

// TestAuditEvidenceAgainstStoredInput: evidence is looked up in the stored
// input: snippets found in the stored body stay valid, and a policy whose
// source the stored input lacks fails.
func TestAuditEvidenceAgainstStoredInput(t *testing.T) {
	_, dir, rt, a := servedAudit(t, "SHORT", "EXTRA")
	s, _, _ := runAudit(t, Options{Runtime: rt}, a)
	if s.Total.StillValid != 1 || s.Total.StillInvalid != 2 {
		t.Fatalf("total %+v", s.Total)
	}
	// Evidence searched in /subject instead: "window broke" is not there.
	y, _ := os.ReadFile(filepath.Join(dir, "contractd.yaml"))
	d2 := t.TempDir()
	p2 := writeFile(t, d2, "contractd.yaml", bytes.Replace(y, []byte("source: /body"), []byte("source: /subject"), 1))
	rt2 := loadPath(t, p2)
	s, out, _ := runAudit(t, Options{Runtime: rt2}, a)
	if s.Total.NewlyInvalid != 1 || !strings.Contains(out, "valid -> invalid: evidence_not_found at /evidence/0") {
		t.Fatalf("total %+v\n%s", s.Total, out)
	}
}

// TestAuditJSON: --json prints every item (changed or not) and then the
// summary, as JSON objects.
func TestAuditJSON(t *testing.T) {
	up, _, _, a := servedAudit(t, "SHORT", "LONG")
	_, tight := writeConfig(t, t.TempDir(), cfgOpts{upstream: up.URL(), schema: tightSchema})
	s, out, _ := runAudit(t, Options{Runtime: tight, JSON: true}, a)
	items, sum := jsonItems(t, out)
	if len(items) != 2 || sum.Total != s.Total || !sum.Regressed || sum.Mode != "offline" {
		t.Fatalf("items %+v summary %+v\n%s", items, sum, out)
	}
	if it := items[0]; it.Changed || it.Old != "valid" || it.New != "valid" || it.Line != 1 || it.Attempt != 1 || it.File != a {
		t.Errorf("item 0: %+v", it)
	}
	it := items[1]
	if !it.Changed || it.New != "invalid" || len(it.Violations) != 1 || it.Violations[0].Rule != "maxLength" || it.ID != it.RequestID+"#1" || it.Line != 2 {
		t.Errorf("item 1: %+v", it)
	}
}

// TestAuditBadLines: unreadable, truncated and over-long lines are
// reported with their line numbers and the rest is still judged; lines
// without content count as not replayable; other events are skipped.
func TestAuditBadLines(t *testing.T) {
	up := upstreamByMarker(t)
	dir := t.TempDir()
	_, rt := writeConfig(t, dir, cfgOpts{upstream: up.URL()})
	good := bytes.SplitAfter(serveAudit(t, rt, "SHORT", "LONG", "SHORT"), []byte("\n"))
	_, noContent := writeConfig(t, t.TempDir(), cfgOpts{upstream: up.URL(), noContent: true})
	hashed := serveAudit(t, noContent, "SHORT")
	var b bytes.Buffer
	b.Write(good[0])                                                    // 1 judged
	b.WriteString("not json at all\n")                                  // 2 unreadable
	b.WriteString(`{"event":"review_resolved","review_id":"x"}` + "\n") // 3 skipped
	b.Write(hashed)                                                     // 4 no content
	b.WriteString("{\"time\":\"" + strings.Repeat("x", 5000) + "\"}\n") // 5 too long
	b.Write(good[1])                                                    // 6 judged
	b.WriteString("\n")                                                 // 7 blank: skipped
	b.Write(good[2][:len(good[2])/2])                                   // 8 truncated, no newline
	a := writeFile(t, dir, "audit.jsonl", b.Bytes())
	s, out, errb := runAudit(t, Options{Runtime: rt, MaxLineBytes: 4096}, a)
	for _, want := range []string{
		a + ":2: not a JSON object",
		a + ":5: line longer than 4096 bytes; not judged",
		a + ":8: truncated line (the file ends inside it)",
		"3 unreadable line(s)",
		"1 stored output(s) are not replayable",
	} {
		if !strings.Contains(errb, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb)
		}
	}
	if s.Lines != 8 || s.Unreadable != 3 || s.Skipped != 2 || s.Total.Items != 2 || s.Total.StillValid != 2 || s.Total.NotReplayable != 1 {
		t.Fatalf("summary %+v\n%s", s, out)
	}
	if s.ExitCode() != ExitOK {
		t.Fatal("bad lines alone are not a regression")
	}
}

// TestAuditRotatedAndGzip: rotated files, gzip-compressed ones included
// (detected by content, not name), replay as one stream; a gzip file cut
// short is reported and the lines before the cut are judged.
func TestAuditRotatedAndGzip(t *testing.T) {
	up := upstreamByMarker(t)
	dir := t.TempDir()
	_, rt := writeConfig(t, dir, cfgOpts{upstream: up.URL()})
	lines := bytes.SplitAfter(serveAudit(t, rt, "SHORT", "LONG", "SHORT", "LONG"), []byte("\n"))
	writeFile(t, dir, "audit.jsonl", bytes.Join(lines[0:2], nil))
	writeFile(t, dir, "audit.jsonl.1", gz(t, bytes.Join(lines[2:3], nil)))
	whole := gz(t, bytes.Join(lines[3:4], nil))
	writeFile(t, dir, "audit.jsonl.2.gz", whole)
	files, err := ExpandAudit([]string{filepath.Join(dir, "audit.jsonl*")})
	if err != nil || len(files) != 3 {
		t.Fatalf("expand: %v %v", files, err)
	}
	_, tight := writeConfig(t, t.TempDir(), cfgOpts{upstream: up.URL(), schema: tightSchema})
	s, out, errb := runAudit(t, Options{Runtime: tight}, files...)
	if s.Total.Items != 4 || s.Total.NewlyInvalid != 2 || s.Unreadable != 0 {
		t.Fatalf("total %+v\n%s%s", s.Total, out, errb)
	}
	// Cut the compressed stream: the replay reports it and goes on.
	writeFile(t, dir, "cut.gz", whole[:len(whole)-12])
	s, _, errb = runAudit(t, Options{Runtime: tight}, filepath.Join(dir, "cut.gz"), filepath.Join(dir, "audit.jsonl"))
	if s.Unreadable != 1 || !strings.Contains(errb, "cut.gz:") || s.Total.Items < 2 {
		t.Fatalf("summary %+v\n%s", s, errb)
	}
	if _, err := ExpandAudit([]string{filepath.Join(dir, "nope.jsonl")}); err == nil {
		t.Fatal("a missing file is an error")
	}
	if _, err := ExpandAudit([]string{filepath.Join(dir, "none-*.jsonl")}); err == nil {
		t.Fatal("a glob matching nothing is an error")
	}
}

func gz(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestAuditRouteGone: items of a route the new config no longer has (or
// has as passthrough) are reported as unjudged, not dropped.
func TestAuditRouteGone(t *testing.T) {
	up := upstreamByMarker(t)
	dir := t.TempDir()
	_, rt := writeConfig(t, dir, cfgOpts{upstream: up.URL()})
	audit := serveAudit(t, rt, "SHORT")
	audit = append(audit, bytes.ReplaceAll(audit, []byte(`"route":"classify"`), []byte(`"route":"old-classify"`))...)
	audit = append(audit, bytes.ReplaceAll(serveAudit(t, rt, "SHORT"), []byte(`"route":"classify"`), []byte(`"route":"chat"`))...)
	a := writeFile(t, dir, "audit.jsonl", audit)
	s, out, errb := runAudit(t, Options{Runtime: rt}, a)
	if s.Total.Unjudged != 2 || s.Total.StillValid != 1 || len(s.Routes) != 3 {
		t.Fatalf("summary %+v\n%s", s, out)
	}
	for _, want := range []string{
		`old-classify valid -> unjudged: route "old-classify" is not in the config`,
		`chat valid -> unjudged: route "chat" is a passthrough route in the config`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errb, "2 item(s) could not be judged") {
		t.Errorf("stderr:\n%s", errb)
	}
	// Routes: config order first, then the ones the config lacks.
	if s.Routes[0].Route != "classify" || s.Routes[1].Route != "chat" || s.Routes[2].Route != "old-classify" {
		t.Errorf("routes %+v", s.Routes)
	}
}

// TestAuditInputRefused: when the new config's input schema refuses the
// stored input, the item is unjudged with serving's 400 reason.
func TestAuditInputRefused(t *testing.T) {
	_, dir, _, a := servedAudit(t, "SHORT")
	y, _ := os.ReadFile(filepath.Join(dir, "contractd.yaml"))
	y = bytes.Replace(y, []byte("required: [subject, body]"), []byte("required: [subject, body, customer]"), 1)
	y = bytes.Replace(y, []byte("properties: {subject: {type: string}, body: {type: string}}"), []byte("properties: {subject: {type: string}, body: {type: string}, customer: {type: string}}"), 1)
	y = bytes.Replace(y, []byte(`example_input: {subject: "Broken window",`), []byte(`example_input: {customer: c, subject: "Broken window",`), 1)
	rt2 := loadPath(t, writeFile(t, t.TempDir(), "contractd.yaml", y))
	s, out, _ := runAudit(t, Options{Runtime: rt2}, a)
	if s.Total.Unjudged != 1 || !strings.Contains(out, "valid -> unjudged: the config refuses the stored input (input_schema_violation)") {
		t.Fatalf("total %+v\n%s", s.Total, out)
	}
}

// TestAuditFilters: --route keeps one route; --since drops older records.
func TestAuditFilters(t *testing.T) {
	up := upstreamByMarker(t)
	dir := t.TempDir()
	_, rt := writeConfig(t, dir, cfgOpts{upstream: up.URL()})
	recent := serveAudit(t, rt, "SHORT")
	old := bytes.Replace(serveAudit(t, rt, "LONG"), []byte(`"time":"`+time.Now().UTC().Format("2006")), []byte(`"time":"2001`), 1)
	a := writeFile(t, dir, "audit.jsonl", append(old, recent...))
	s, _, _ := runAudit(t, Options{Runtime: rt, Since: time.Now().Add(-time.Hour)}, a)
	if s.Total.Items != 1 {
		t.Fatalf("--since: total %+v", s.Total)
	}
	if _, err := Audit(t.Context(), Options{Runtime: rt, Route: "nope"}, []string{a}); err == nil || !strings.Contains(err.Error(), `--route "nope"`) {
		t.Fatalf("unknown route: %v", err)
	}
	if _, err := Audit(t.Context(), Options{Runtime: rt, Route: "chat"}, []string{a}); err == nil {
		t.Fatal("a passthrough route is not a replay route")
	}
	s, _, _ = runAudit(t, Options{Runtime: rt, Route: "classify"}, a)
	if s.Total.Items != 2 {
		t.Fatalf("--route: total %+v", s.Total)
	}
}

// TestAuditExportLines: the JSON Lines of GET /admin/reviews/export are an
// --audit input: each line an approved output, judged like approve does.
func TestAuditExportLines(t *testing.T) {
	dir := t.TempDir()
	_, rt := writeConfig(t, dir, cfgOpts{})
	in := `{"subject":"s","body":"my window broke, charged twice"}`
	export := `{"id":"req_a","route":"classify","contract":"classify_v1","input":` + in + `,"output":` + outputs["SHORT"] + `,"resolved_at":"2026-11-20T10:00:00Z"}
{"id":"req_b","route":"classify","contract":"classify_v1","input":` + in + `,"output":` + outputs["LONG"] + `,"resolved_at":"2026-11-20T10:00:00Z"}
{"id":"req_c","route":"classify","contract":"classify_v1","input":` + in + `,"output":null,"resolved_at":"2026-11-20T10:00:00Z"}
`
	a := writeFile(t, dir, "approved.jsonl", []byte(export))
	s, _, _ := runAudit(t, Options{Runtime: rt}, a)
	if s.Total.Items != 2 || s.Total.StillValid != 2 || s.Skipped != 1 {
		t.Fatalf("summary %+v", s)
	}
	// The same set saved by an editor that writes a UTF-8 byte order mark
	// first: the first line is still judged.
	bom := writeFile(t, dir, "approved-bom.jsonl", []byte("\xef\xbb\xbf"+export))
	if s, _, errb := runAudit(t, Options{Runtime: rt}, bom); s.Total.Items != 2 || s.Unreadable != 0 {
		t.Fatalf("with a byte order mark: summary %+v\n%s", s, errb)
	}
	_, tight := writeConfig(t, t.TempDir(), cfgOpts{schema: tightSchema})
	s, out, _ := runAudit(t, Options{Runtime: tight}, a)
	if s.ExitCode() != ExitRegressed || !strings.Contains(out, "req_b#approved classify approved -> invalid: maxLength at /summary") {
		t.Fatalf("exit %d\n%s", s.ExitCode(), out)
	}
}

// TestAuditOrderWithWorkers: with many workers and many lines, items come
// out in input order and the counts do not depend on the worker count.
func TestAuditOrderWithWorkers(t *testing.T) {
	up := upstreamByMarker(t)
	dir := t.TempDir()
	_, rt := writeConfig(t, dir, cfgOpts{upstream: up.URL()})
	one := bytes.SplitAfter(serveAudit(t, rt, "SHORT", "LONG"), []byte("\n"))
	var b bytes.Buffer
	for i := range 1000 {
		b.Write(one[i%2])
	}
	a := writeFile(t, dir, "audit.jsonl", b.Bytes())
	_, tight := writeConfig(t, t.TempDir(), cfgOpts{upstream: up.URL(), schema: tightSchema})
	var prev string
	for _, w := range []int{1, 3, 8} {
		s, out, _ := runAudit(t, Options{Runtime: tight, Workers: w, JSON: true}, a)
		items, _ := jsonItems(t, out)
		if s.Total.Items != 1000 || s.Total.NewlyInvalid != 500 || len(items) != 1000 {
			t.Fatalf("workers %d: total %+v", w, s.Total)
		}
		for i, it := range items {
			if it.Line != i+1 {
				t.Fatalf("workers %d: item %d has line %d", w, i, it.Line)
			}
		}
		if prev != "" && out != prev {
			t.Fatalf("workers %d: output differs from 1 worker", w)
		}
		prev = out
	}
}

// TestAuditEmptyAndRepeated: an empty source exits 0 (nothing regressed)
// but says on stderr that nothing was judged; a file named twice (by name
// and by a glob) is read once; a directory is refused at open; the same
// request id on two lines (an audit concatenated with itself) is judged on
// each line, as the lines stand.
func TestAuditEmptyAndRepeated(t *testing.T) {
	up, dir, rt, a := servedAudit(t, "SHORT")
	empty := writeFile(t, dir, "empty.jsonl", nil)
	s, _, errb := runAudit(t, Options{Runtime: rt}, empty)
	if s.ExitCode() != ExitOK || s.Total.Items != 0 || !strings.Contains(errb, "replay: nothing was judged: the source holds no stored output\n") {
		t.Fatalf("empty: exit %d total %+v\n%s", s.ExitCode(), s.Total, errb)
	}
	_, errb = runAuditErr(t, Options{Runtime: rt, Route: "classify"}, empty)
	if !strings.Contains(errb, "no stored output that --route and --since keep") {
		t.Errorf("empty with --route:\n%s", errb)
	}
	_, errb = runAuditErr(t, Options{Runtime: rt}, a)
	if strings.Contains(errb, "nothing was judged") {
		t.Errorf("a judged audit says nothing was judged:\n%s", errb)
	}

	writeFile(t, dir, "audit.jsonl.1", nil)
	files, err := ExpandAudit([]string{a, filepath.Join(dir, "audit.jsonl*"), dir + "/./audit.jsonl.1"})
	if err != nil || len(files) != 2 || files[0] != a || files[1] != a+".1" {
		t.Fatalf("expand: %q %v, want each file once", files, err)
	}

	if _, err := Audit(t.Context(), Options{Runtime: rt}, []string{dir}); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("a directory: %v", err)
	}

	b, _ := os.ReadFile(a)
	twice := writeFile(t, dir, "twice.jsonl", append(b, b...))
	_, tight := writeConfig(t, t.TempDir(), cfgOpts{upstream: up.URL(), schema: tightSchema})
	s, _, _ = runAudit(t, Options{Runtime: tight}, twice)
	if s.Total.Items != 2 || s.Total.StillValid != 2 {
		t.Fatalf("the same request on two lines: total %+v, want each line judged", s.Total)
	}
}

func runAuditErr(t *testing.T, o Options, files ...string) (*Summary, string) {
	t.Helper()
	s, _, errb := runAudit(t, o, files...)
	return s, errb
}
