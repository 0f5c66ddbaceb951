package replay

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// DefaultMaxLineBytes bounds one audit line. A request line holds the
// input (at most max_body_bytes, 1 MiB by default) and each attempt's
// output (max_output_bytes), JSON-escaped: 16 MiB leaves room for both
// while keeping a runaway line from taking the memory with it.
const DefaultMaxLineBytes = 16 << 20

// lineReader reads lines of at most max bytes. Longer lines are skipped
// without being held in memory (their bytes are read and dropped) and
// reported, so one bad line never stops a replay.
type lineReader struct {
	r    *bufio.Reader
	max  int
	buf  []byte
	line int
}

func newLineReader(r io.Reader, max int) *lineReader {
	if max <= 0 {
		max = DefaultMaxLineBytes
	}
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its line ending (valid until the
// next call), its 1-based number, whether it was longer than max (then
// line is nil), and whether it ended with a newline. err is io.EOF at the
// end, or the reader's error.
func (l *lineReader) next() (line []byte, n int, tooLong, complete bool, err error) {
	l.buf = l.buf[:0]
	for {
		s, err := l.r.ReadSlice('\n')
		if !tooLong {
			if len(l.buf)+len(s) > l.max+1 { // +1: the newline itself
				tooLong, l.buf = true, l.buf[:0]
			} else if err == nil && len(l.buf) == 0 {
				// The usual case: the whole line sits in the reader's buffer.
				l.line++
				return trimEOL(s), l.line, false, true, nil
			} else {
				l.buf = append(l.buf, s...)
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == nil:
			l.line++
			if tooLong {
				return nil, l.line, true, true, nil
			}
			return trimEOL(l.buf), l.line, false, true, nil
		case errors.Is(err, io.EOF):
			if len(l.buf) == 0 && !tooLong {
				return nil, l.line, false, false, io.EOF
			}
			l.line++
			if tooLong {
				return nil, l.line, true, false, nil
			}
			return trimEOL(l.buf), l.line, false, false, nil
		default:
			return nil, l.line, false, false, err
		}
	}
}

func trimEOL(s []byte) []byte {
	s = bytes.TrimSuffix(s, []byte{'\n'})
	return bytes.TrimSuffix(s, []byte{'\r'})
}

// openAudit opens an audit file, "-" for stdin, transparently
// decompressing gzip (by its magic bytes, whatever the name).
func openAudit(name string) (io.ReadCloser, error) {
	var f *os.File
	if name == "-" {
		f = os.Stdin
	} else {
		var err error
		if f, err = os.Open(name); err != nil {
			return nil, err
		}
	}
	br := bufio.NewReaderSize(f, 64<<10)
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		// Opened but not readable at all (a directory): the caller's
		// mistake, not a file cut short.
		f.Close()
		return nil, err
	}
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		return &readCloser{Reader: zr, close: func() error { zr.Close(); return f.Close() }}, nil
	}
	return &readCloser{Reader: br, close: f.Close}, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r *readCloser) Close() error { return r.close() }

// ExpandAudit turns --audit arguments into files: an existing path (or
// "-") is itself; anything else is a glob pattern (quoted by the user, so
// `--audit 'audit.jsonl*'` takes the rotated files too), which must match.
// A file named twice (`--audit audit.jsonl --audit 'audit.jsonl*'`) is
// read once, where it is first named.
func ExpandAudit(args []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(names ...string) {
		for _, n := range names {
			key := n
			if n != "-" {
				if abs, err := filepath.Abs(n); err == nil {
					key = abs
				}
			}
			if !seen[key] {
				seen[key] = true
				out = append(out, n)
			}
		}
	}
	for _, a := range args {
		if a == "-" {
			add(a)
			continue
		}
		if _, err := os.Stat(a); err == nil {
			add(a)
			continue
		} else if !strings.ContainsAny(a, "*?[") {
			return nil, fmt.Errorf("--audit %s: %v", a, cleanErr(err))
		}
		m, err := filepath.Glob(a)
		if err != nil {
			return nil, fmt.Errorf("--audit %s: %v", a, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("--audit %s: no file matches", a)
		}
		add(m...)
	}
	return out, nil
}

func cleanErr(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
