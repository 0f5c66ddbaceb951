package replay

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"
)

// itemWriter prints items and the summary: text (changed items only, one
// line each, then a table) or JSON (every item, then the summary).
type itemWriter struct {
	w     *bufio.Writer
	json  bool
	enc   *json.Encoder
	lines int // item lines printed (text)
	err   error
}

func newItemWriter(w io.Writer, asJSON bool) *itemWriter {
	bw := bufio.NewWriterSize(w, 64<<10)
	iw := &itemWriter{w: bw, json: asJSON}
	if asJSON {
		iw.enc = json.NewEncoder(bw)
		iw.enc.SetEscapeHTML(false)
	}
	return iw
}

func (iw *itemWriter) item(it *Item) {
	if iw.err != nil {
		return
	}
	if iw.json {
		iw.err = iw.enc.Encode(it)
		return
	}
	if !it.Changed {
		return
	}
	_, iw.err = iw.w.WriteString(ItemLine(it) + "\n")
	iw.lines++
}

// ItemLine is an item's text line: `id route old -> new`, then the new
// violations (`rule at path: message`, "root" for the whole output) or
// why it could not be judged.
func ItemLine(it *Item) string {
	var b strings.Builder
	b.WriteString(field(it.ID))
	b.WriteByte(' ')
	b.WriteString(field(it.Route))
	b.WriteByte(' ')
	b.WriteString(string(it.Old))
	b.WriteString(" -> ")
	b.WriteString(string(it.New))
	switch {
	case it.Reason != "":
		b.WriteString(": ")
		b.WriteString(oneLine(it.Reason))
	case len(it.Violations) > 0:
		b.WriteString(": ")
		for i, v := range it.Violations {
			if i > 0 {
				b.WriteString("; ")
			}
			path := v.Path
			if path == "" {
				path = "root"
			}
			b.WriteString(v.Rule)
			b.WriteString(" at ")
			b.WriteString(path)
			if v.Message != "" {
				b.WriteString(" (")
				b.WriteString(oneLine(v.Message))
				b.WriteString(")")
			}
		}
	}
	if it.Attempts > 0 {
		b.WriteString(" [" + strconv.Itoa(it.Attempts) + " attempts]")
	}
	return b.String()
}

// field is an id or route as one space-free field of an item line: as it
// is, or Go-quoted when it is empty or holds a space, a control or an
// unprintable character (an export line is anyone's JSON: an id with a
// newline must not print a second, forged item line).
func field(s string) string {
	if s == "" || strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func (iw *itemWriter) summary(s *Summary) {
	if iw.err != nil {
		return
	}
	if iw.json {
		iw.err = iw.enc.Encode(struct {
			Summary *Summary `json:"summary"`
		}{s})
	} else {
		if iw.lines > 0 {
			iw.w.WriteByte('\n')
		}
		iw.err = writeTable(iw.w, s)
	}
	if err := iw.w.Flush(); iw.err == nil {
		iw.err = err
	}
}

func writeTable(w io.Writer, s *Summary) error {
	// Numbers align right; route names are padded to one width so they
	// read left-aligned.
	width := len("route")
	for _, rc := range s.Routes {
		width = max(width, utf8.RuneCountInString(field(rc.Route)))
	}
	pad := func(name string) string { return name + strings.Repeat(" ", width-utf8.RuneCountInString(name)) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, pad("route")+"\titems\tstill valid\tstill invalid\tnewly valid\tnewly invalid\tunjudged\tnot replayable\t")
	row := func(name string, c Counts) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", pad(name), c.Items, c.StillValid, c.StillInvalid,
			c.NewlyValid, c.NewlyInvalid, c.Unjudged, c.NotReplayable)
	}
	for _, rc := range s.Routes {
		row(field(rc.Route), rc.Counts)
	}
	row("total", s.Total)
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := "no regression"
	if s.Regressed {
		verdict = fmt.Sprintf("REGRESSION: %d approved or previously valid output(s) are now invalid", s.Total.NewlyInvalid)
		if s.Mode == "live" {
			verdict = fmt.Sprintf("REGRESSION: %d previously valid request(s) now end in needs_review", s.Total.NewlyInvalid)
		}
	}
	_, err := fmt.Fprintf(w, "%s replay: %s\n", s.Mode, verdict)
	return err
}
