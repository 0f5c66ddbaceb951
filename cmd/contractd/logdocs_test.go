package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// logCall is a log/slog call with a literal message: logger.Info("msg",
// …), Warn, Error, Debug, their Context forms, and the request line's
// slog.NewRecord(…, "request", …).
var logCall = regexp.MustCompile(`\.(?:Info|Warn|Error|Debug)(?:Context)?\(\s*(?:ctx, )?"([^"]+)"|slog\.NewRecord\([^,]+, [^,]+, "([^"]+)"`)

// TestLogLinesDocumented: every message serve's code can log (every
// literal message of a log call in the packages serve runs) is named in
// docs/observability.md's list of log lines, so an operator who meets a
// line, or wants to alert on one, finds what it means. The list held 9 of
// them; lines such as `audit write failed`, `review spool write failed;
// item lost` and `webhook delivery given up` were in no doc.
func TestLogLinesDocumented(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(doc), "### Log lines")
	if i < 0 {
		t.Fatal(`docs/observability.md has no "### Log lines" section`)
	}
	section := string(doc[i:])
	if j := strings.Index(section[3:], "\n#"); j >= 0 {
		section = section[:j+3]
	}
	var msgs []string
	for _, dir := range []string{"cmd/contractd", "proxy", "review", "telemetry", "audit", "config", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() && e.Name() == "sim" {
				return filepath.SkipDir // contractd-sim's logs, not serve's
			}
			if e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range logCall.FindAllSubmatch(b, -1) {
				msg := string(m[1]) + string(m[2])
				if !slices.Contains(msgs, msg) {
					msgs = append(msgs, msg)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(msgs) < 20 {
		t.Fatalf("found only %d log messages: the pattern no longer matches the code", len(msgs))
	}
	slices.Sort(msgs)
	for _, m := range msgs {
		if !strings.Contains(section, "`"+m+"`") {
			t.Errorf("log line %q is not in docs/observability.md's Log lines table", m)
		}
	}
}
