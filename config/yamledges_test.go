package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestAliasBombRefused: nine aliases of nine aliases ... inside a schema
// (the "billion laughs") were expanded by the decoder and the schema
// compiler, taking gigabytes and minutes from a 700-byte file. It is now
// refused at once, naming the first alias's line; ordinary aliases load.
func TestAliasBombRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString("contracts:\n  - name: a\n    schema:\n      type: object\n")
	b.WriteString("      x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "      x%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 9), ", "))
	}
	_, err := LoadBytes("bomb.yaml", []byte(b.String()))
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 {
		t.Fatalf("want one problem, got %v", err)
	}
	if p := ce.Problems[0]; p.Line != 6 || !strings.Contains(p.Message, "alias bomb") {
		t.Errorf("problem %+v: want line 6 (the first alias), naming an alias bomb", p)
	}

	ok := "contracts:\n  - name: a\n    schema: {type: object, additionalProperties: false, properties: {a: &s {type: string}, b: *s, c: *s}}\n"
	if _, err := LoadBytes("ok.yaml", []byte(ok)); err != nil {
		t.Errorf("ordinary aliases refused: %v", err)
	}
}
