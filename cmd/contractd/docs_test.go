package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// commandFlags runs `contractd CMD -h` and reads the flags it defines.
func commandFlags(t *testing.T, cmd string) map[string]bool {
	t.Helper()
	var out, errb bytes.Buffer
	run(context.Background(), []string{cmd, "-h"}, &out, &errb)
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`).FindAllStringSubmatch(out.String(), -1) {
		flags[m[1]] = true
	}
	return flags
}

// usageCommands are the commands `contractd help` lists.
func usageCommands(t *testing.T) []string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"help"}, &out, &errb); code != exitOK {
		t.Fatalf("contractd help: exit %d", code)
	}
	_, list, ok := strings.Cut(out.String(), "commands:\n")
	if !ok {
		t.Fatalf("no commands: in the usage:\n%s", out.String())
	}
	var cmds []string
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z]+) `).FindAllStringSubmatch(list, -1) {
		cmds = append(cmds, m[1])
	}
	return cmds
}

// docPages are the README and docs/*.md.
func docPages(t *testing.T) map[string]string {
	t.Helper()
	paths, _ := filepath.Glob("../../docs/*.md")
	paths = append(paths, "../../README.md")
	pages := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		pages[strings.TrimPrefix(p, "../../")] = string(b)
	}
	if len(pages) < 5 {
		t.Fatalf("read %d pages", len(pages))
	}
	return pages
}

// codeCommands are the `contractd CMD args…` command lines in a page's
// code (inline spans and fenced blocks, continuation lines joined), each
// cut at the end of its shell command.
func codeCommands(page string) [][]string {
	var code []string
	for i, part := range strings.Split(page, "```") {
		if i%2 == 1 {
			code = append(code, strings.ReplaceAll(part, "\\\n", " "))
			continue
		}
		for _, m := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(part, -1) {
			code = append(code, m[1])
		}
	}
	var out [][]string
	// At the start of a line or span (after "$ ", a path such as bin/, "&& " or "(").
	re := regexp.MustCompile(`(?m)(?:^\s*(?:\$ )?|&& |\()(?:[\w./-]*/)?contractd ([a-z].*)$`)
	for _, c := range code {
		for _, m := range re.FindAllStringSubmatch(c, -1) {
			line := m[1]
			for _, stop := range []string{" | ", ";", "&&", " > ", " 2>", " #", "`"} {
				line, _, _ = strings.Cut(line, stop)
			}
			out = append(out, strings.Fields(line))
		}
	}
	return out
}

// TestCLIDocs: the commands and flags the README and docs write are the
// ones contractd has. Every command `contractd help` lists is the one run
// accepts and has a row in the README's command table; every command line
// in the docs' code names a command and only flags of that command; and
// every flag of every command is written (as --flag, or -c) somewhere in
// the docs.
func TestCLIDocs(t *testing.T) {
	cmds := usageCommands(t)
	if len(cmds) < 7 {
		t.Fatalf("usage lists %v", cmds)
	}
	pages := docPages(t)
	flags := map[string]map[string]bool{}
	for _, c := range cmds {
		var out, errb bytes.Buffer
		if run(context.Background(), []string{c, "-h"}, &out, &errb); strings.Contains(errb.String(), "unknown command") {
			t.Errorf("contractd help lists %s, which run does not accept", c)
		}
		flags[c] = commandFlags(t, c)
		if !strings.Contains(pages["README.md"], "| `contractd "+c) {
			t.Errorf("README.md's command table has no row for contractd %s", c)
		}
	}
	// What the docs' code runs.
	seen := 0
	for name, page := range pages {
		for _, args := range codeCommands(page) {
			cmd := args[0]
			if !slices.Contains(cmds, cmd) {
				t.Errorf("%s runs `contractd %s`, which is not a command (%v)", name, strings.Join(args, " "), cmds)
				continue
			}
			seen++
			for _, a := range args[1:] {
				m := regexp.MustCompile(`^\[?\(?--?([a-z][a-z-]*)`).FindStringSubmatch(a)
				if m == nil || a == "-" {
					continue
				}
				if !flags[cmd][m[1]] {
					t.Errorf("%s: `contractd %s` passes -%s, which %s does not have (flags %v)", name, strings.Join(args, " "), m[1], cmd, flags[cmd])
				}
			}
		}
	}
	if seen < 20 {
		t.Fatalf("only %d contractd command lines found in the docs' code", seen)
	}
	// Every flag is documented somewhere.
	all := strings.Join(slices.Collect(mapValues(pages)), "\n")
	for cmd, fl := range flags {
		for f := range fl {
			if !regexp.MustCompile(`(^|[\s\[(` + "`" + `])--?` + regexp.QuoteMeta(f) + `\b`).MatchString(all) {
				t.Errorf("contractd %s -%s is not in the README or docs/", cmd, f)
			}
		}
	}
}

func mapValues(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// TestReadmeGoVersion: the README's quickstart names the Go release
// go.mod requires; with GOTOOLCHAIN=local an older 1.26 refuses to build.
func TestReadmeGoVersion(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("no go directive in go.mod")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, quick, _ := strings.Cut(string(readme), "## Quickstart")
	quick, _, _ = strings.Cut(quick, "\n## ")
	if !strings.Contains(quick, "Go "+string(m[1])) {
		t.Errorf("the README's quickstart does not name Go %s, go.mod's minimum", m[1])
	}
}

// TestReadmeCommandExits: every row of the README's command table says
// what the command's exit status means (render's and version's cells were
// empty), and render's are what it does: 0 rendered, 1 a request serve
// would refuse, 2 usage.
func TestReadmeCommandExits(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `contractd (\\w+)[^`]*` \\|.*$").FindAllStringSubmatch(string(readme), -1)
	if len(rows) < 7 {
		t.Fatalf("README's command table: %d rows", len(rows))
	}
	for _, r := range rows {
		cells := strings.Split(strings.ReplaceAll(r[0], `\|`, "/"), "|") // "" first and last
		if len(cells) != 5 || strings.TrimSpace(cells[3]) == "" {
			t.Errorf("README's row for contractd %s gives no exit status: %s", r[1], r[0])
		}
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	body := filepath.Join(dir, "body.json")
	os.WriteFile(cfg, []byte(`upstreams: [{name: u, base_url: "http://127.0.0.1:1/v1"}]
prompts: [{name: p, system: x}]
contracts: [{name: k, schema: {type: object, additionalProperties: false}}]
routes: [{name: r, upstream: u, model: m, prompt: p, contract: k, temperature: 1}]
`), 0o644)
	for _, tt := range []struct {
		body string
		code int
	}{
		{`{"messages": [{"role": "user", "content": "hi"}]}`, exitOK},
		{`{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]}`, exitProblem}, // 400 client_system_not_allowed
		{`{"messages": [{"role": "user", "content": "hi"}], "tools": []}`, exitProblem},                               // 400 unsupported_parameter
	} {
		os.WriteFile(body, []byte(tt.body), 0o644)
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{"render", "-c", cfg, "--route", "r", "--input", body}, &out, &errb); code != tt.code {
			t.Errorf("render %s: exit %d, want %d (%s)", tt.body, code, tt.code, errb.String())
		}
	}
}
