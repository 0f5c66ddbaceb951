package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"
	"gopkg.in/yaml.v3"
)

// EnvConfig names the config file when -c is not given: the "config" key
// under Resolve's environment prefix.
const EnvConfig = envPrefix + "_CONFIG"

const envPrefix = "CONTRACTD"

// DefaultFile is the config file used when neither -c nor CONTRACTD_CONFIG is set.
const DefaultFile = "contractd.yaml"

// Resolve picks the config path: the flag, else CONTRACTD_CONFIG, else the default.
func Resolve(flag string) string {
	path, _ := ResolveDefault(flag)
	return path
}

// ResolveDefault is Resolve, and says whether the path is DefaultFile
// because neither the flag nor CONTRACTD_CONFIG named one (not because
// one of them named the same file).
func ResolveDefault(flag string) (path string, isDefault bool) {
	if flag != "" {
		return flag, false
	}
	v := viper.New()
	v.SetEnvPrefix(envPrefix)
	v.AutomaticEnv() // "config" reads EnvConfig; set but empty counts as unset
	if p := v.GetString("config"); p != "" {
		return p, false
	}
	return DefaultFile, true
}

// Parsed is a decoded config file before compilation.
type Parsed struct {
	File  *File
	Path  string // as given
	Dir   string // relative paths resolve against this
	Raw   []byte
	lines map[string]int // key path -> line
}

// Parse reads and strictly decodes a config file.
func Parse(path string) (*Parsed, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &Error{Problems: []Problem{{File: path, Message: "cannot read config: file not found"}}, Err: fs.ErrNotExist}
	}
	if err != nil {
		return nil, &Error{Problems: []Problem{{File: path, Message: "cannot read config: " + cleanOSError(err)}}}
	}
	return ParseBytes(path, raw)
}

func cleanOSError(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

// ParseBytes decodes config text; path names it in problems and anchors
// relative paths.
func ParseBytes(path string, raw []byte) (*Parsed, error) {
	ps := &problems{file: path, lines: map[string]int{}}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&doc); err != nil {
		if err.Error() == "EOF" {
			return nil, &Error{Problems: []Problem{{File: path, Message: "config is empty"}}}
		}
		return nil, &Error{Problems: []Problem{yamlSyntaxProblem(path, raw, err)}}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Error{Problems: []Problem{{File: path, Line: root.Line, Message: "config must be a YAML mapping"}}}
	}
	if n, a := expandedSize(root, map[*yaml.Node]int{}); n > maxExpandedNodes(root) {
		line := root.Line
		if a != nil {
			line = a.Line
		}
		return nil, &Error{Problems: []Problem{{File: path, Line: line, Message: fmt.Sprintf(
			"YAML aliases expand the config to more than %d values (an alias bomb?): write the repeated part out, or alias it fewer times", maxExpandedNodes(root))}}}
	}
	f := &File{}
	decodeNode(root, reflect.ValueOf(f).Elem(), "", ps, false)
	if len(ps.errs) > 0 {
		return nil, ps.error()
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return &Parsed{File: f, Path: path, Dir: filepath.Dir(abs), Raw: raw, lines: ps.lines}, nil
}

// maxExpandedNodes bounds the values a config may hold once its aliases
// are expanded: the decoder and the schema compiler walk every alias as a
// copy, so nine aliases of nine aliases of ... (the "billion laughs") would
// take gigabytes from a file of a few hundred bytes. A config without
// aliases is never refused: the bound is at least 4x the values written.
func maxExpandedNodes(root *yaml.Node) int {
	return max(1<<20, 4*writtenNodes(root))
}

func writtenNodes(n *yaml.Node) int {
	c := 1
	for _, k := range n.Content {
		c += writtenNodes(k)
	}
	return c
}

// expandedSize counts the values under n with every alias expanded,
// memoised per node so it runs in the size of the file; it saturates
// rather than overflow. It also returns the first alias met, for the line.
func expandedSize(n *yaml.Node, memo map[*yaml.Node]int) (int, *yaml.Node) {
	const saturated = math.MaxInt32
	if c, ok := memo[n]; ok {
		return c, nil
	}
	memo[n] = saturated // an alias inside its own anchor: never finite
	var first *yaml.Node
	c := 1
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		first = n
		ac, _ := expandedSize(n.Alias, memo)
		c = ac
	}
	for _, k := range n.Content {
		kc, ka := expandedSize(k, memo)
		if first == nil {
			first = ka
		}
		c = min(c+kc, saturated)
	}
	memo[n] = c
	return c, first
}

var yamlErrLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlSyntaxProblem puts the line of a YAML syntax error where editors and
// CI logs look for it (file:line:), not inside the message, and says when
// the line is indented with a tab, the usual cause of "found character
// that cannot start any token".
func yamlSyntaxProblem(path string, raw []byte, err error) Problem {
	msg := err.Error()
	m := yamlErrLine.FindStringSubmatch(msg)
	if m == nil {
		return Problem{File: path, Message: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
	}
	line, _ := strconv.Atoi(m[1])
	p := Problem{File: path, Line: line, Message: "invalid YAML: " + m[2]}
	if lines := strings.Split(string(raw), "\n"); line >= 1 && line <= len(lines) {
		text := lines[line-1]
		indent := text[:len(text)-len(strings.TrimLeft(text, " \t"))]
		if strings.Contains(indent, "\t") {
			p.Message += " (this line is indented with a tab: YAML indents with spaces only)"
		}
	}
	return p
}

var (
	durationType = reflect.TypeOf(time.Duration(0))
	nodeType     = reflect.TypeOf(yaml.Node{})
)

// expandSections are the top-level keys whose strings get ${VAR} expansion.
var expandSections = map[string]bool{"server": true, "audit": true, "upstreams": true}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// decodeNode decodes n into v strictly: unknown keys, wrong types and bad
// scalars become problems at their key path; yaml.Node fields keep the raw
// node (inline schemas and example inputs, case preserved). With env, its
// string scalars get ${VAR} expansion (expandEnv) as they are decoded, so a
// value merged in (<<: *x) or aliased (*x) is expanded exactly as one
// written in place, and only where it is used: the anchored node itself is
// never changed, so the same anchor used outside server, audit and
// upstreams stays as written.
func decodeNode(n *yaml.Node, v reflect.Value, path string, ps *problems, env bool) {
	if path != "" {
		if _, seen := ps.lines[path]; !seen {
			ps.lines[path] = n.Line
		}
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if env && n.Kind == yaml.ScalarNode {
		n = expandEnv(n, path, ps)
	}
	if v.Type() == nodeType {
		v.Set(reflect.ValueOf(*n))
		return
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // absent and null are the same
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		decodeNode(n, p.Elem(), path, ps, env)
		v.Set(p)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			ps.lines[path] = n.Line
			ps.add(path, "must be a mapping")
			return
		}
		fields := map[string]int{}
		var keys []string // in declaration order, for suggestions
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			if tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]; tag != "" {
				fields[tag] = i
				keys = append(keys, tag)
			}
		}
		seen := map[string]bool{}
		pairs := mergePairs(n, path, ps, 0)
		for i := 0; i+1 < len(pairs); i += 2 {
			k, val := pairs[i], pairs[i+1]
			if k == nil {
				seen = map[string]bool{} // merged in: an explicit key overrides, never "twice"
				continue
			}
			kp := join(path, k.Value)
			ps.lines[kp] = k.Line
			fi, ok := fields[k.Value]
			if !ok {
				ps.add(kp, "unknown key %q (%s)", k.Value, suggestKey(k.Value, keys))
				continue
			}
			if seen[k.Value] {
				ps.add(kp, "key %q given twice", k.Value)
				continue
			}
			seen[k.Value] = true
			// The value of a key ending in _env is left as written: it
			// names a variable, and expanding it would put that
			// variable's value, often the very key it names (api_key_env:
			// ${OPENAI_API_KEY}), into the "not an environment variable
			// name" problem that validate prints and serve logs.
			childEnv := (env || path == "" && expandSections[k.Value]) && !strings.HasSuffix(k.Value, "_env")
			decodeNode(val, v.Field(fi), kp, ps, childEnv)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			ps.add(path, "must be a list")
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			decodeNode(c, s.Index(i), index(path, i), ps, env)
		}
		v.Set(s)
	default:
		decodeScalar(n, v, path, ps)
	}
}

// suggestKey says what to write instead of an unknown key: the known key
// it is closest to (a typo, another case or spelling: "Server", "tiemout",
// "schemaFile", "api_keys" for "api_keys_env"), else every key allowed there.
func suggestKey(key string, keys []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	}
	best, bestD := "", 3
	for _, k := range keys {
		d := editDistance(norm(key), norm(k))
		if strings.HasPrefix(k, key+"_") {
			d = min(d, 1)
		}
		if len(key) < 5 {
			d++ // a short key is near everything short: ask for more
		}
		if d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf("did you mean %q?", best)
	}
	return "allowed here: " + strings.Join(keys, ", ")
}

// suggestName says what a reference to an undefined name (a route's
// upstream, prompt or contract, a policy's label set) may have meant: the
// defined name closest to it (a typo, another case: names are
// case-sensitive), else every defined name.
func suggestName(name string, defined []string) string {
	if len(defined) == 0 {
		return "none is defined"
	}
	slices.Sort(defined)
	if s := suggestKey(name, defined); strings.HasPrefix(s, "did you mean") {
		return s
	}
	return "defined: " + strings.Join(defined, ", ")
}

// editDistance is the Damerau-Levenshtein (optimal string alignment)
// distance in bytes: a swap of two neighbours counts one.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// mergePairs is a mapping's key/value pairs with YAML merge keys
// (`<<: *defaults`, `<<: [*a, *b]`) resolved: the mapping's own pairs,
// then a nil separator pair, then each merged mapping's pairs whose key
// is not already given (its own merges resolved in turn; the first of a
// list wins). A key given twice in one mapping is still a problem.
func mergePairs(n *yaml.Node, path string, ps *problems, depth int) []*yaml.Node {
	var own, merged []*yaml.Node
	var sources []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!merge" {
			own = append(own, k, val)
			continue
		}
		if val.Kind == yaml.AliasNode {
			val = val.Alias
		}
		list := []*yaml.Node{val}
		if val.Kind == yaml.SequenceNode {
			list = val.Content
		}
		for _, m := range list {
			if m.Kind == yaml.AliasNode {
				m = m.Alias
			}
			if m.Kind != yaml.MappingNode {
				ps.lines[join(path, "<<")] = k.Line
				ps.add(join(path, "<<"), "a merge key (<<) takes a mapping or a list of mappings, like <<: *defaults")
				continue
			}
			sources = append(sources, m)
		}
	}
	if len(sources) == 0 || depth > 32 {
		return own
	}
	given := map[string]bool{}
	for i := 0; i < len(own); i += 2 {
		given[own[i].Value] = true
	}
	for _, m := range sources {
		sub := mergePairs(m, path, ps, depth+1)
		for i := 0; i+1 < len(sub); i += 2 {
			if sub[i] == nil || given[sub[i].Value] {
				continue
			}
			given[sub[i].Value] = true
			merged = append(merged, sub[i], sub[i+1])
		}
	}
	return append(append(own, nil, nil), merged...)
}

func decodeScalar(n *yaml.Node, v reflect.Value, path string, ps *problems) {
	if n.Kind != yaml.ScalarNode {
		ps.add(path, "must be a single value, not a %s", kindName(n.Kind))
		return
	}
	s := n.Value
	switch {
	case v.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			ps.add(path, "invalid duration %q (use e.g. 30s, 2m)", s)
			return
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s) // any scalar, as written: `model: 4` names model "4"
	case v.Kind() == reflect.Bool:
		if n.Tag != "!!bool" {
			ps.add(path, "must be true or false, not %q", s)
			return
		}
		v.SetBool(s == "true" || s == "True" || s == "TRUE")
	case v.Kind() == reflect.Int, v.Kind() == reflect.Int64:
		i, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64)
		if err != nil || n.Tag == "!!str" {
			ps.add(path, "must be an integer, not %q", s)
			return
		}
		v.SetInt(i)
	case v.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || n.Tag == "!!str" || math.IsNaN(f) || math.IsInf(f, 0) {
			ps.add(path, "must be a number, not %q", s)
			return
		}
		v.SetFloat(f)
	default:
		ps.add(path, "unsupported value")
	}
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

// expandEnv returns the scalar n with ${VAR} replaced (n itself when it
// holds none; a copy otherwise, so an anchored node shared by several
// places is never changed). An unset variable is a problem, reported at
// the key that uses it.
func expandEnv(n *yaml.Node, path string, ps *problems) *yaml.Node {
	if n.Tag != "!!str" || !strings.Contains(n.Value, "${") {
		return n
	}
	c := *n
	c.Value = envRef.ReplaceAllStringFunc(n.Value, func(m string) string {
		name := m[2 : len(m)-1]
		val, ok := os.LookupEnv(name)
		if !ok {
			ps.lines[path] = n.Line
			ps.add(path, "environment variable %s is not set", name)
		}
		return val
	})
	// An unquoted ${VAR} is typed by what it expands to, as if that
	// had been written there: max_connections: ${MAX_CONN} holding
	// 2048 is the integer 2048, not a string the integer field
	// refuses. Only numbers and booleans are retyped (a string field
	// takes any scalar as written, and an empty expansion must not
	// turn into YAML null, which would read as the key left out);
	// a quoted "${VAR}" stays a string.
	if c.Style == 0 {
		switch tag := (&yaml.Node{Kind: yaml.ScalarNode, Value: c.Value}).ShortTag(); tag {
		case "!!int", "!!float", "!!bool":
			c.Tag = tag
		}
	}
	return &c
}

// nodeJSON converts a YAML node to JSON, keeping mapping key order (so
// {{ schema }} prints keys as written) and rejecting what JSON cannot hold.
func nodeJSON(n *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	if err := writeNodeJSON(&b, n, 0); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeNodeJSON(b *bytes.Buffer, n *yaml.Node, depth int) error {
	if depth > 200 {
		return fmt.Errorf("nested too deeply")
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("empty document")
		}
		return writeNodeJSON(b, n.Content[0], depth)
	case yaml.AliasNode:
		return writeNodeJSON(b, n.Alias, depth+1)
	case yaml.MappingNode:
		b.WriteByte('{')
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: keys must be strings", k.Line)
			}
			if seen[k.Value] {
				return fmt.Errorf("line %d: key %q given twice", k.Line, k.Value)
			}
			seen[k.Value] = true
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k.Value)
			b.WriteByte(':')
			if err := writeNodeJSON(b, n.Content[i+1], depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeNodeJSON(b, c, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			b.WriteString("null")
		case "!!bool":
			var v bool
			if err := n.Decode(&v); err != nil {
				return err
			}
			b.WriteString(strconv.FormatBool(v))
		case "!!int", "!!float":
			var f float64
			if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("line %d: %q is not a JSON number", n.Line, n.Value)
			}
			if json.Valid([]byte(n.Value)) {
				b.WriteString(n.Value)
			} else {
				b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
			}
		default:
			writeJSONString(b, n.Value)
		}
	default:
		return fmt.Errorf("line %d: unsupported YAML", n.Line)
	}
	return nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b.Truncate(b.Len() - 1) // Encode's newline
}
