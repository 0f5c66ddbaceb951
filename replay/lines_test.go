package replay

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestLineReader: lines across the reader's buffer, CRLF endings, a final
// line without newline, and lines over the limit (skipped, numbered, the
// next line intact).
func TestLineReader(t *testing.T) {
	long := strings.Repeat("a", 200<<10) // longer than the 64 KiB buffer
	in := "one\r\n" + long + "\n" + strings.Repeat("b", 300) + "\n\nlast"
	type got struct {
		text     string
		n        int
		tooLong  bool
		complete bool
	}
	want := []got{{"one", 1, false, true}, {long, 2, false, true}, {"", 3, true, true}, {"", 4, false, true}, {"last", 5, false, false}}
	lr := newLineReader(strings.NewReader(in), 256<<10)
	lr.max = 256 << 10
	check := func(lr *lineReader, want []got) {
		t.Helper()
		for i, w := range want {
			b, n, tl, c, err := lr.next()
			if err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			if string(b) != w.text || n != w.n || tl != w.tooLong || c != w.complete {
				t.Fatalf("line %d: got (%d bytes, %d, %v, %v), want (%d bytes, %+v)", i+1, len(b), n, tl, c, len(w.text), w)
			}
		}
		if _, _, _, _, err := lr.next(); !errors.Is(err, io.EOF) {
			t.Fatalf("after the last line: %v", err)
		}
	}
	want[2] = got{strings.Repeat("b", 300), 3, false, true}
	check(lr, want)
	// Limit 100: the long lines are skipped, numbered, and the next is whole.
	want = []got{{"one", 1, false, true}, {"", 2, true, true}, {"", 3, true, true}, {"", 4, false, true}, {"last", 5, false, false}}
	check(newLineReader(strings.NewReader(in), 100), want)
	// Over the limit at the end of the file without a newline.
	check(newLineReader(strings.NewReader("x\n"+long), 100), []got{{"x", 1, false, true}, {"", 2, true, false}})
}
