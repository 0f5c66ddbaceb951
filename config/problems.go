package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Problem is one thing wrong (or, as a warning, doubtful) in a config.
// Location reads "file:line: key.path" so editors and CI logs can jump to it.
type Problem struct {
	File    string
	Line    int
	Path    string // key path, e.g. routes[0].retry[1].temperature
	Message string
}

// Location is the "location" part of the "location: message".
func (p Problem) Location() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	if p.Path != "" {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(p.Path)
	}
	return b.String()
}

func (p Problem) String() string { return p.Location() + ": " + p.Message }

// Error is returned when a config has problems; it lists every one.
type Error struct {
	Problems []Problem
	// Files are the absolute paths the config named that a Runtime would
	// be built from (the config file and every schema_file, readable or
	// not), as far as the config decoded; nil when it did not. serve
	// watches them after a refused reload, so the file that was missing
	// or broken reloads when it is fixed.
	Files []string
	// Err is the cause when there is one: fs.ErrNotExist for a config
	// file that does not exist (errors.Is sees it through Unwrap).
	Err error
}

func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// problems collects problems against one file, with line numbers looked up
// from the key paths recorded while decoding.
type problems struct {
	file  string
	lines map[string]int
	errs  []Problem
	warns []Problem
	// env are the server's secret variables that are unset or malformed
	// (admin keys, review DSN, webhook secret, Redis URL): errors for
	// serve and validate, and nothing to the offline tools, which never
	// use them (LoadOffline), as an unset api_key_env is not.
	env []Problem
}

// error is the problems found in file order (by line; on one line, in
// the order the checks found them), so the same config always prints the
// same list.
func (ps *problems) error() *Error {
	errs := slices.Clone(ps.errs)
	slices.SortStableFunc(errs, compareProblems)
	return &Error{Problems: errs}
}

func compareProblems(a, b Problem) int {
	return cmp.Compare(a.Line, b.Line)
}

func (ps *problems) line(path string) int {
	for p := path; p != ""; p = parentPath(p) {
		if l, ok := ps.lines[p]; ok {
			return l
		}
	}
	return 0
}

func (ps *problems) add(path, format string, args ...any) {
	ps.errs = append(ps.errs, Problem{File: ps.file, Line: ps.line(path), Path: path, Message: fmt.Sprintf(format, args...)})
}

// addEnv records a problem with a server secret's environment variable.
func (ps *problems) addEnv(path, format string, args ...any) {
	ps.env = append(ps.env, Problem{File: ps.file, Line: ps.line(path), Path: path, Message: fmt.Sprintf(format, args...)})
}

func (ps *problems) warn(path, format string, args ...any) {
	ps.warns = append(ps.warns, Problem{File: ps.file, Line: ps.line(path), Path: path, Message: fmt.Sprintf(format, args...)})
}

func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i <= 0 {
		return ""
	}
	return p[:i]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }
