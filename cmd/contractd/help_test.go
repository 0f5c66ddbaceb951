package main

import (
	"bytes"
	"context"
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
