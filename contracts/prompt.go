package contracts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/go-json-experiment/json/jsontext"
	"strings"
	"text/template"
	"text/template/parse"
)

// Message is one chat message as templates see it (.Messages).
type Message struct {
	Role    string
	Content string
}

// TemplateData is what a prompt template renders with.
type TemplateData struct {
	// Input is the validated input object when the prompt has an input
	// schema, else the last user message's text.
	Input    any
	Messages []Message
}

// LabelSource resolves a canonical label set by name.
type LabelSource func(name string) ([]string, bool)

// Prompt is a registered prompt: parsed once, bound per route.
type Prompt struct {
	Name         string
	InputSchema  *Schema // nil: no input schema
	ExampleInput any     // nil when the config gives none
	SHA256       string  // of the system and user template sources
	system, user *template.Template
}

// ParsePrompt parses the system and (optional, "" for none) user templates.
// Missing keys are errors at render time; `schema` is bound per route.
func ParsePrompt(name, system, user string, labels LabelSource) (*Prompt, error) {
	p := &Prompt{Name: name}
	sum := sha256.Sum256([]byte(system + "\x00" + user))
	p.SHA256 = hex.EncodeToString(sum[:])
	var err error
	if p.system, err = parseTemplate(name+".system", system, labels); err != nil {
		return nil, fmt.Errorf("system: %w", err)
	}
	if user != "" {
		if p.user, err = parseTemplate(name+".user", user, labels); err != nil {
			return nil, fmt.Errorf("user: %w", err)
		}
	}
	return p, nil
}

func parseTemplate(name, src string, labels LabelSource) (*template.Template, error) {
	funcs := template.FuncMap{
		"labels": func(set string) ([]string, error) {
			if vs, ok := labels(set); ok {
				return vs, nil
			}
			return nil, fmt.Errorf("unknown label set %q", set)
		},
		"join": func(v any, sep string) (string, error) {
			switch t := v.(type) {
			case []string:
				return strings.Join(t, sep), nil
			case []any:
				parts := make([]string, len(t))
				for i, x := range t {
					parts[i] = fmt.Sprint(x)
				}
				return strings.Join(parts, sep), nil
			}
			return "", fmt.Errorf("join: cannot join %T", v)
		},
		"json":   toJSON,
		"schema": func() (string, error) { return "", fmt.Errorf("schema: prompt is not bound to a contract") },
	}
	return template.New(name).Option("missingkey=error").Funcs(funcs).Parse(src)
}

func toJSON(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// HasUser reports whether the prompt has a user template.
func (p *Prompt) HasUser() bool { return p.user != nil }

// Bind returns the prompt's templates with `schema` printing schemaJSON
// (nil: a route without a contract; `schema` then fails to render).
func (p *Prompt) Bind(schemaJSON []byte) *BoundPrompt {
	b := &BoundPrompt{Prompt: p}
	bind := func(t *template.Template) *template.Template {
		if t == nil {
			return nil
		}
		c := template.Must(t.Clone())
		if schemaJSON != nil {
			s := string(schemaJSON)
			c.Funcs(template.FuncMap{"schema": func() (string, error) { return s, nil }})
		}
		return c
	}
	b.system, b.user = bind(p.system), bind(p.user)
	// A system template that reads no data renders the same for every
	// request: render it once here instead of per request.
	if schemaJSON != nil && !usesData(b.system.Tree.Root) {
		if out, err := execute(b.system, TemplateData{}); err == nil {
			b.staticSystem, b.isStatic = out, true
			b.staticQuoted, _ = jsontext.AppendQuote(nil, out)
		}
	}
	return b
}

// usesData reports whether a template tree may read its data (., $, fields,
// variables) or calls a template (which could). Conservative: any node it
// does not know counts as using data.
func usesData(n parse.Node) bool {
	switch t := n.(type) {
	case nil:
		return false
	case *parse.ListNode:
		if t == nil {
			return false
		}
		for _, c := range t.Nodes {
			if usesData(c) {
				return true
			}
		}
		return false
	case *parse.TextNode, *parse.CommentNode, *parse.StringNode, *parse.NumberNode,
		*parse.BoolNode, *parse.NilNode, *parse.IdentifierNode, *parse.BreakNode, *parse.ContinueNode:
		return false
	case *parse.ActionNode:
		return len(t.Pipe.Decl) > 0 || usesData(t.Pipe)
	case *parse.PipeNode:
		if t == nil {
			return false
		}
		if len(t.Decl) > 0 {
			return true
		}
		for _, c := range t.Cmds {
			if usesData(c) {
				return true
			}
		}
		return false
	case *parse.CommandNode:
		for _, a := range t.Args {
			if usesData(a) {
				return true
			}
		}
		return false
	case *parse.IfNode:
		return usesData(t.Pipe) || usesData(t.List) || usesData(t.ElseList)
	}
	// DotNode, FieldNode, VariableNode, ChainNode, RangeNode, WithNode,
	// TemplateNode, …: may read data.
	return true
}

// BoundPrompt is a prompt bound to one route's contract. Safe for concurrent use.
type BoundPrompt struct {
	*Prompt
	system, user *template.Template
	staticSystem string // the system prompt, when it reads no data
	staticQuoted []byte // staticSystem as a JSON string
	isStatic     bool
}

// StaticSystem returns the system prompt and its JSON-quoted form when the
// template reads no request data (ok false otherwise).
func (b *BoundPrompt) StaticSystem() (text string, quoted []byte, ok bool) {
	return b.staticSystem, b.staticQuoted, b.isStatic && b.staticQuoted != nil
}

// RenderSystem renders the system template exactly (a YAML block's final
// newline stays).
func (b *BoundPrompt) RenderSystem(d TemplateData) (string, error) {
	if b.isStatic {
		return b.staticSystem, nil
	}
	return execute(b.system, d)
}

// RenderUser renders the user template; ok is false when there is none.
func (b *BoundPrompt) RenderUser(d TemplateData) (s string, ok bool, err error) {
	if b.user == nil {
		return "", false, nil
	}
	s, err = execute(b.user, d)
	return s, true, err
}

func execute(t *template.Template, d TemplateData) (string, error) {
	var sb strings.Builder
	if err := t.Execute(&sb, d); err != nil {
		return "", err
	}
	return sb.String(), nil
}
