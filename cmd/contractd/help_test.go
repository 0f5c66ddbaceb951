package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandHelp: `contractd CMD -h` (or --help, anywhere on the line)
// prints the command's synopsis and flags to stdout and exits 0; it
// printed a bare "Usage of contractd CMD:" to stderr and exited 2, as for
// a mistake, so `contractd check -h | less` showed nothing and scripts
// saw a failure. An unknown flag is still exit 2 with the usage on stderr.
func TestCommandHelp(t *testing.T) {
	for _, cmd := range []string{"serve", "validate", "check", "render", "schema", "replay"} {
		for _, args := range [][]string{{cmd, "-h"}, {cmd, "--help"}, {cmd, "-c", "x.yaml", "--help"}} {
			var out, errb bytes.Buffer
			code := run(context.Background(), args, &out, &errb)
			if code != exitOK || errb.Len() != 0 || !strings.HasPrefix(out.String(), "usage: contractd "+cmd+" [-c FILE]") || !strings.Contains(out.String(), "\n\nflags:\n") || !strings.Contains(out.String(), "\n  -c string\n") {
				t.Errorf("%v: exit %d\nstdout %q\nstderr %q", args, code, out.String(), errb.String())
			}
		}
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{cmd, "--bogus"}, &out, &errb)
		if code != exitUsage || out.Len() != 0 || !strings.Contains(errb.String(), "flag provided but not defined: -bogus\nusage: contractd "+cmd) {
			t.Errorf("%s --bogus: exit %d\nstdout %q\nstderr %q", cmd, code, out.String(), errb.String())
		}
	}
}

// TestUsageMistakes: what a new user types first. `contractd serve
// contractd.yaml` exited 2 printing nothing at all; validate said only
// "unexpected argument"; a misspelt command listed the usage without
// naming the command meant.
func TestUsageMistakes(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "contractd.yaml"}, "contractd serve: unexpected argument \"contractd.yaml\" (the config is given as -c contractd.yaml)\n"},
		{[]string{"validate", "my.yml"}, "contractd validate: unexpected argument \"my.yml\" (the config is given as -c my.yml)\n"},
		{[]string{"validate", "x"}, "contractd validate: unexpected argument \"x\"\n"},
		{[]string{"chek"}, "contractd: unknown command \"chek\" (did you mean \"check\"?)\n\nusage:"},
		{[]string{"vaildate"}, "contractd: unknown command \"vaildate\" (did you mean \"validate\"?)\n\nusage:"},
		{[]string{"serv"}, "contractd: unknown command \"serv\" (did you mean \"serve\"?)\n\nusage:"},
		{[]string{"lint"}, "contractd: unknown command \"lint\"\n\nusage:"},
	}
	// A route a tool cannot use says why: a passthrough route has no
	// contract to check with and no prompt to render (check said "unknown
	// contract route", render "has no example_input", of a route the
	// config defines).
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(cfg, []byte(`upstreams: [{name: u, base_url: "http://127.0.0.1:1/v1"}]
prompts: [{name: p, system: x}]
contracts: [{name: k, schema: {type: object, additionalProperties: false}}]
routes:
  - {name: r, upstream: u, model: m, prompt: p, contract: k, temperature: 1}
  - {name: raw, upstream: u, model: m, passthrough: true}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests = append(tests, []struct {
		args []string
		want string
	}{
		{[]string{"check", "-c", cfg, "--route", "raw", "-"}, "contractd check: route \"raw\" is a passthrough route: it has no contract to judge with\n"},
		{[]string{"check", "-c", cfg, "--route", "nope", "-"}, "contractd check: unknown route \"nope\"\n"},
		{[]string{"render", "-c", cfg, "--route", "raw"}, "contractd render: route \"raw\" is a passthrough route: it has no prompt or example_input; give --input (a request body) to see what it forwards\n"},
		{[]string{"render", "-c", cfg, "--route", "r"}, "contractd render: route \"r\" has no example_input; give --input\n"},
	}...)
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := run(context.Background(), tt.args, &out, &errb)
		if code != exitUsage || out.Len() != 0 || !strings.HasPrefix(errb.String(), tt.want) {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant   %q...", tt.args, code, out.String(), errb.String(), tt.want)
		}
	}
}

// TestConfigNotFoundAtDefault: a config not found at the default path
// (no -c, no $CONTRACTD_CONFIG) says it was the default and how to name
// one; validate said only "contractd.yaml: cannot read config: file not
// found". A path the user named gets no such note.
func TestConfigNotFoundAtDefault(t *testing.T) {
	t.Chdir(t.TempDir())
	const note = " (the default path, as neither -c FILE nor $CONTRACTD_CONFIG names a config: name one with -c FILE)\n"
	tests := []struct {
		args      []string
		env       string
		code      int
		out, errb string
	}{
		{[]string{"validate"}, "", exitProblem, "contractd.yaml: cannot read config: file not found" + note, ""},
		{[]string{"check", "--contract", "k", "-"}, "", exitUsage, "", "contractd check: contractd.yaml: cannot read config: file not found" + note},
		{[]string{"serve"}, "", exitProblem, "", "contractd serve: contractd.yaml: cannot read config: file not found" + note},
		{[]string{"validate", "-c", "contractd.yaml"}, "", exitProblem, "contractd.yaml: cannot read config: file not found\n", ""},
		{[]string{"validate"}, "contractd.yaml", exitProblem, "contractd.yaml: cannot read config: file not found\n", ""},
		{[]string{"validate"}, "other.yaml", exitProblem, "other.yaml: cannot read config: file not found\n", ""},
	}
	for _, tt := range tests {
		t.Setenv("CONTRACTD_CONFIG", tt.env)
		var out, errb bytes.Buffer
		code := run(context.Background(), tt.args, &out, &errb)
		if code != tt.code || out.String() != tt.out || errb.String() != tt.errb {
			t.Errorf("%v (CONTRACTD_CONFIG=%q): exit %d, want %d\nstdout %q\nwant   %q\nstderr %q\nwant   %q",
				tt.args, tt.env, code, tt.code, out.String(), tt.out, errb.String(), tt.errb)
		}
	}
}

// TestUsageMatchesCommandSynopsis: the command list `contractd -h` prints
// gives each command the synopsis its own -h prints, so a flag added to
// one is not missing from the other (render's --api was).
func TestUsageMatchesCommandSynopsis(t *testing.T) {
	for _, cmd := range []string{"serve", "validate", "check", "render", "schema", "replay"} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{cmd, "-h"}, &out, &errb); code != exitOK {
			t.Fatalf("%s -h: exit %d: %s", cmd, code, errb.String())
		}
		first, _, _ := strings.Cut(out.String(), "\n")
		syn := strings.TrimPrefix(first, "usage: contractd "+cmd+" ")
		found := false
		for _, l := range strings.Split(usage, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == cmd {
				found = true
				if got := strings.Join(f[1:], " "); !strings.HasPrefix(got, syn) {
					t.Errorf("contractd -h lists %s as %q; %s -h says %q", cmd, got, cmd, syn)
				}
			}
		}
		if !found {
			t.Errorf("contractd -h does not list %s", cmd)
		}
	}
}
