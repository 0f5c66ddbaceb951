package audit

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestAuditFieldsDocumented: docs/observability.md's table of audit fields
// lists exactly the members an audit request event has (Event's JSON
// names), and its attempts[] table exactly an attempt's, so an operator
// reading a line finds every member it holds described, and none that it
// cannot hold. Before, "event" ("request" on every request line) was in no
// table.
func TestAuditFieldsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	// table is the first column of the markdown table that follows the
	// line holding heading.
	table := func(heading string) []string {
		i := strings.Index(string(doc), heading)
		if i < 0 {
			t.Fatalf("docs/observability.md has no %q", heading)
		}
		var names []string
		started := false
		for _, l := range strings.Split(string(doc[i:]), "\n")[1:] {
			if !strings.HasPrefix(l, "|") {
				if started {
					break
				}
				continue
			}
			started = true
			if m := regexp.MustCompile("^\\| `([a-z_0-9]+)` \\|").FindStringSubmatch(l); m != nil {
				names = append(names, m[1])
			}
		}
		slices.Sort(names)
		return names
	}
	jsonNames := func(v any) []string {
		var names []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			if name != "" && name != "-" {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return names
	}
	for _, c := range []struct {
		heading string
		v       any
	}{
		{"### Fields", Event{}},
		{"Each `attempts[]` entry:", Attempt{}},
	} {
		if got, want := table(c.heading), jsonNames(c.v); !slices.Equal(got, want) {
			t.Errorf("docs/observability.md's table after %q lists %v; the audit line holds %v", c.heading, got, want)
		}
	}
}
