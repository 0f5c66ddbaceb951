package contracts

import (
	"testing"
)

func TestStaticSystemPromptsRenderOnce(t *testing.T) {
	labels := func(name string) ([]string, bool) { return []string{"a", "b"}, name == "x" }
	for _, tt := range []struct {
		src    string
		static bool
	}{
		{"Classify. Labels: {{ join (labels \"x\") \", \" }}.\n{{ schema }}\n", true},
		{"{{ if true }}yes{{ else }}no{{ end }} {{ \"lit\" }}", true},
		{"Subject: {{ .Input.subject }}", false},
		{"{{ range .Messages }}{{ .Content }}{{ end }}", false},
		{"{{ $x := 1 }}{{ $x }}", false},
		{"{{ with .Input }}{{ . }}{{ end }}", false},
		{"{{ json .Input }}", false},
		{"{{ if .Input }}x{{ end }}", false},
	} {
		p, err := ParsePrompt("p", tt.src, "", labels)
		if err != nil {
			t.Fatalf("%q: %v", tt.src, err)
		}
		b := p.Bind([]byte(`{"type":"object"}`))
		if b.isStatic != tt.static {
			t.Errorf("%q: static %v, want %v", tt.src, b.isStatic, tt.static)
		}
		// Static or not, rendering gives the same text as executing the template.
		d := TemplateData{Input: map[string]any{"subject": "S"}, Messages: []Message{{Role: "user", Content: "hi"}}}
		got, err1 := b.RenderSystem(d)
		want, err2 := execute(b.system, d)
		if got != want || (err1 == nil) != (err2 == nil) {
			t.Errorf("%q: got %q (%v), want %q (%v)", tt.src, got, err1, want, err2)
		}
	}
}
