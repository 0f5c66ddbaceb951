package contracts

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// walkPolicy is a PathPolicy that reports every value its path reaches, as
// policy.Path.Walk reaches them (object keys in order, array indexes), as
// evidence holding the value's JSON, and each dead end of the walk: any
// difference in what a policy is handed shows in the result. It finds no
// violation, so a valid output stays valid and its storage is reused.
type walkPolicy struct {
	tokens []string
	wild   []bool
}

func newWalkPolicy(ptr string) *walkPolicy {
	p := &walkPolicy{}
	if ptr == "" {
		return p
	}
	for _, t := range strings.Split(ptr[1:], "/") {
		p.wild = append(p.wild, t == "*")
		p.tokens = append(p.tokens, strings.NewReplacer("~1", "/", "~0", "~").Replace(t))
	}
	return p
}

func (p *walkPolicy) OutputPath() ([]string, []bool) { return p.tokens, p.wild }

func (p *walkPolicy) Check(out any, _ *Subject) ([]Violation, []Evidence) {
	var evs []Evidence
	var walk func(v any, i int, ptr string)
	walk = func(v any, i int, ptr string) {
		if i == len(p.tokens) {
			b, _ := json.Marshal(v)
			evs = append(evs, Evidence{Path: ptr, SHA256: string(b)})
			return
		}
		switch x := v.(type) {
		case map[string]any:
			if p.wild[i] {
				keys := make([]string, 0, len(x))
				for k := range x {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					walk(x[k], i+1, ptr+"/"+EscapePointerToken(k))
				}
				return
			}
			if c, ok := x[p.tokens[i]]; ok {
				walk(c, i+1, ptr+"/"+EscapePointerToken(p.tokens[i]))
			} else {
				evs = append(evs, Evidence{Path: ptr, SHA256: "no member " + p.tokens[i]})
			}
		case []any:
			if p.wild[i] {
				for n, c := range x {
					walk(c, i+1, fmt.Sprintf("%s/%d", ptr, n))
				}
				return
			}
			if n, ok := PointerIndex(p.tokens[i]); ok && n < len(x) {
				walk(x[n], i+1, ptr+"/"+p.tokens[i])
			} else {
				evs = append(evs, Evidence{Path: ptr, SHA256: fmt.Sprintf("no element %s of %d", p.tokens[i], len(x))})
			}
		default:
			b, _ := json.Marshal(v)
			evs = append(evs, Evidence{Path: ptr, SHA256: "dead end at " + string(b)})
		}
	}
	walk(out, 0, "")
	return nil, evs
}

// pathsOf picks policy paths for an instance: some of its members, a
// wildcard over everything, one into every member, one into an element,
// and one that matches nothing.
func pathsOf(rng *rand.Rand, m map[string]any) []string {
	paths := []string{"/*", "/*/*", "/nothing/here", "/*/0", "/*/*/*"}
	for k, v := range m {
		tok := "/" + EscapePointerToken(k)
		paths = append(paths, tok)
		switch x := v.(type) {
		case map[string]any:
			paths = append(paths, tok+"/*")
			for k2 := range x {
				paths = append(paths, tok+"/"+EscapePointerToken(k2))
				break
			}
		case []any:
			paths = append(paths, tok+"/*", tok+"/1", tok+"/*/*")
		}
	}
	slices.Sort(paths)
	rng.Shuffle(len(paths), func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
	return paths[:min(len(paths), 1+rng.IntN(4))]
}

// streamAgrees checks content with the one-pass check and with the full
// path alone and fails t when the results differ. It reports whether the
// one-pass check judged the output itself.
func streamAgrees(t testing.TB, k *Contract, content, what string) bool {
	t.Helper()
	full := k.check(content, nil, false)
	got := k.check(content, nil, true)
	if !reflect.DeepEqual(got, full) {
		t.Errorf("%s: one-pass check %+v, full path %+v\nschema %s\noutput %s", what, got, full, k.Schema.JSON(), content)
		return false
	}
	p := k.streamPlan()
	if p == nil {
		return false
	}
	_, _, judged := k.checkStream(p, content, nil)
	return judged
}

func contractWith(name string, s *Schema, paths []string) *Contract {
	k := &Contract{Name: name, Schema: s, Mode: ModeStrict, Limits: Limits{MaxBytes: 1 << 20}}
	for _, p := range paths {
		k.Policies = append(k.Policies, newWalkPolicy(p))
	}
	return k
}

// TestStreamCheckBenchAgreement is the differential test of the one-pass
// check over the JSONSchemaBench sample: every object instance, its
// members' values wrapped in objects, and mutations of it, each with no
// policy and with path policies, get the same Result (verdict, violations,
// evidence, accepted bytes) as the full path.
func TestStreamCheckBenchAgreement(t *testing.T) {
	cases := loadBench(t)
	rng := rand.New(rand.NewPCG(3, 4))
	perInstance := 8
	if testing.Short() || raceEnabled {
		perInstance = 2
	}
	var compared, judged, plans, validPlanned, validJudged int
	for _, c := range cases {
		s, err := CompileSchema(c.Schema)
		if err != nil {
			continue
		}
		bare := contractWith(c.ID, s, nil)
		if bare.streamPlan() != nil {
			plans++
		}
		for i, tc := range c.Tests {
			m, ok := objectInstance(tc.Data)
			if !ok {
				continue
			}
			what := fmt.Sprintf("%s#%d", c.ID, i)
			withPaths := contractWith(c.ID, s, pathsOf(rng, m))
			outs := []string{string(tc.Data)}
			for j := 0; j < perInstance; j++ {
				b, _ := json.Marshal(mutate(rng, m))
				outs = append(outs, string(b))
			}
			for _, out := range outs {
				valid := bare.check(out, nil, false).Valid
				for _, k := range []*Contract{bare, withPaths} {
					compared++
					j := streamAgrees(t, k, out, what)
					if j {
						judged++
					}
					if valid && k.streamPlan() != nil {
						validPlanned++
						if j {
							validJudged++
						}
					}
				}
			}
		}
	}
	t.Logf("schemas with a one-pass plan: %d; outputs compared: %d, judged in one pass: %d; valid outputs of planned contracts: %d, judged in one pass: %d",
		plans, compared, judged, validPlanned, validJudged)
	if validJudged < validPlanned*9/10 {
		t.Errorf("the one-pass check judged only %d of %d valid outputs it has a plan for", validJudged, validPlanned)
	}
}

// TestStreamCheckSuite runs the JSON-Schema-Test-Suite's object instances
// through both paths: same Result, whatever the label.
func TestStreamCheckSuite(t *testing.T) {
	root := suiteDir(t)
	var compared, judged int
	for _, draft := range suiteDrafts {
		files, _ := filepath.Glob(filepath.Join(root, "tests", draft.dir, "*.json"))
		more, _ := filepath.Glob(filepath.Join(root, "tests", draft.dir, "optional", "*.json"))
		files = append(files, more...)
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var groups []suiteGroup
			if err := json.Unmarshal(b, &groups); err != nil {
				t.Fatal(err)
			}
			for _, g := range groups {
				s, err := compileSchema(g.Schema, compileOptions{dialect: draft.dialect, loader: suiteLoader(root, draft.dialect)})
				if err != nil {
					continue
				}
				for _, tc := range g.Tests {
					if !strings.HasPrefix(strings.TrimSpace(string(tc.Data)), "{") {
						continue
					}
					var m map[string]any
					_ = json.Unmarshal(tc.Data, &m)
					var paths []string
					for k := range m {
						paths = append(paths, "/"+EscapePointerToken(k))
					}
					slices.Sort(paths)
					paths = append(paths[:min(len(paths), 2)], "/*/*")
					what := filepath.Base(file) + " | " + g.Description + " | " + tc.Description
					for _, k := range []*Contract{contractWith(what, s, nil), contractWith(what, s, paths)} {
						compared++
						if streamAgrees(t, k, string(tc.Data), what) {
							judged++
						}
					}
				}
			}
		}
	}
	t.Logf("suite object instances compared: %d, judged in one pass: %d", compared, judged)
}

// TestStreamCheckEdges: outputs the one-pass check must leave to the full
// path, or judge exactly as it does.
func TestStreamCheckEdges(t *testing.T) {
	s, err := CompileSchema([]byte(fuzzSchemas[0]))
	if err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70)
	for _, out := range []string{
		BenchOutput,
		" \n" + BenchOutput + "\t",
		BenchOutput + "x",
		BenchOutput + " {}",
		`{"intents":[],"intents":[]}`,
		`{"a":1,"a":2}`,
		deep,
		"{\"primary_intent\":\"\xff\"}",
		`{"primary_intent":"\ud800"}`,
		`{"primary_intent":"claim\u005freport"}`,
		`{"x":1e999999999}`,
		`[]`, `"s"`, ``, ` `, `{`, `{"a":}`, `{"a":1,}`, `{"a" 1}`, `{} {}`,
		"```json\n{}\n```",
	} {
		for _, paths := range [][]string{nil, {"/intents/*/label"}, {"/primary_intent", "/intents/1", "/*"}} {
			streamAgrees(t, contractWith("edges", s, paths), out, fmt.Sprintf("%.40q %v", out, paths))
		}
	}
	// Only the limits the full path has: a tight depth and size.
	k := contractWith("limits", s, []string{"/intents/*/label"})
	k.Limits = Limits{MaxBytes: 100, MaxDepth: 2}
	for _, out := range []string{BenchOutput, `{"intents":[{"label":"x"}]}`, `{"intents":[]}`} {
		streamAgrees(t, k, out, "limits "+out[:min(len(out), 30)])
	}
}

// TestStreamCheckRepeatedNames: a repeated name, declared (told by its
// name table bit) or not (by comparing names), after other members or in
// an object nested in one that has it, gets the full path's verdict; so do
// objects past maxStreamMembers.
func TestStreamCheckRepeatedNames(t *testing.T) {
	s, err := CompileSchema([]byte(fuzzSchemas[1]))
	if err != nil {
		t.Fatal(err)
	}
	var wide strings.Builder
	wide.WriteString(`{"n":1`)
	for i := range maxStreamMembers + 1 {
		fmt.Fprintf(&wide, `,"m%d":%d`, i, i)
	}
	wide.WriteString("}")
	for _, out := range []string{
		`{"n":1,"s":"ab","n":2}`,
		`{"n":1,"s":"ab","x":0.5,"s":"cd"}`,
		`{"n":1,"zz":1,"yy":2,"zz":3}`,
		`{"n":1,"zz":{"n":1,"zz":2},"s":"ab"}`,
		`{"n":1,"zz":{"n":1,"n":2}}`,
		`{"n":1,"s":"ab","zz":1,"yy":2}`,
		`{"n":1,"s":"a\u00e9","x":1e1}`,
		wide.String(),
	} {
		for _, paths := range [][]string{nil, {"/zz/n"}, {"/*"}} {
			if judged := streamAgrees(t, contractWith("repeated", s, paths), out, fmt.Sprintf("%.40q %v", out, paths)); judged && strings.Count(out, `"n"`) > 1 && !strings.Contains(out, `"zz":{`) {
				t.Errorf("%.40q %v: judged in one pass", out, paths)
			}
		}
	}
}

// TestStreamCheckJudgesBenchOutput: the engine benchmark's output, valid,
// is judged in one pass with and without a path policy (otherwise the
// pass would only cost).
func TestStreamCheckJudgesBenchOutput(t *testing.T) {
	s, err := CompileSchema([]byte(BenchSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, paths := range [][]string{nil, {"/intents/*/label", "/primary_intent"}} {
		k := contractWith("bench", s, paths)
		if !streamAgrees(t, k, BenchOutput, "bench output") {
			t.Errorf("paths %v: the bench output was not judged in one pass", paths)
		}
		if res := k.Check(BenchOutput, nil); len(paths) == 0 && !res.Valid {
			t.Errorf("bench output invalid: %v", res.Violations)
		}
	}
	// A policy that may read anything disables the plan.
	k := contractWith("opaque", s, nil)
	k.Policies = []Policy{opaquePolicy{}}
	if k.streamPlan() != nil {
		t.Error("a policy without OutputPath got a one-pass plan")
	}
	k = contractWith("root", s, []string{""})
	if k.streamPlan() != nil {
		t.Error("a policy on the whole output got a one-pass plan")
	}
}

type opaquePolicy struct{}

func (opaquePolicy) Check(any, *Subject) ([]Violation, []Evidence) { return nil, nil }

// FuzzStreamCheckAgrees: for any output, schema and policy paths, the
// one-pass check and the full path give the same Result.
func FuzzStreamCheckAgrees(f *testing.F) {
	seeds := []string{
		BenchOutput,
		`{"n":1.0,"x":0.07,"s":"éé","d":"2024-01-02T03:04:05Z","e":"a@b.co"}`,
		`{"a":[1,"1",1.0],"p1":null,"xq":{"z":1.0},"other":true}`,
		`{"v":1,"kids":[{"v":2,"kids":[{"v":3.0}]}]}`,
		`{"p":["a",1,2]}`,
		`{"m":0,"t":{}}`,
		`{"kind":"a","a":1e0}`,
		`{"a":{"b":[{"c":"\u00e9"}]},"a\/b":1}`,
	}
	for i := range fuzzSchemas {
		for _, s := range seeds {
			f.Add(uint8(i), uint8(i*7), []byte(s))
		}
	}
	pathSets := [][]string{nil, {"/*"}, {"/intents/*/label", "/primary_intent"}, {"/a/*/c", "/kids/0/v"}, {"/*/*", "/p/1"}, {"/a/b"}}
	f.Fuzz(func(t *testing.T, which, paths uint8, data []byte) {
		schemas, err := compiledFuzzSchemas()
		if err != nil {
			t.Fatal(err)
		}
		s := schemas[int(which)%len(schemas)]
		k := contractWith("fuzz", s, pathSets[int(paths)%len(pathSets)])
		streamAgrees(t, k, string(data), fmt.Sprintf("schema %d", int(which)%len(schemas)))
	})
}

// TestStreamCheckReusesStorage: one contract checks outputs of different
// shapes in turn, each one-pass check keeping its values in what the
// previous valid check left; the policies see what a fresh contract's full
// path hands them.
func TestStreamCheckReusesStorage(t *testing.T) {
	s := mustSchema(t, `{"type":"object","maxProperties":30}`)
	paths := []string{"/*", "/a/*/*", "/c/d/*"}
	k := contractWith("k", s, paths)
	if k.streamPlan() == nil {
		t.Fatal("no one-pass plan")
	}
	for round := range 3 {
		for i, out := range reuseOutputs {
			got := k.Check(out, nil)
			if wantValid := out != reuseOutputs[4]; got.Valid != wantValid {
				t.Fatalf("round %d output %d: valid %v, want %v", round, i, got.Valid, wantValid)
			}
			want := contractWith("k", s, paths).check(out, nil, false)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d output %d: %+v, a fresh contract's full path %+v", round, i, got, want)
			}
		}
	}
}

// TestPrepareCompilesThePlan: config's compiler calls Prepare, so a
// strict contract's one-pass plan exists before its first check, and a
// lenient one has none.
func TestPrepareCompilesThePlan(t *testing.T) {
	s, err := CompileSchema([]byte(BenchSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode Mode
		want bool
	}{{ModeStrict, true}, {ModeLenient, false}, {ModeRepair, false}} {
		k := contractWith("bench", s, []string{"/primary_intent"})
		k.Mode = tc.mode
		k.Prepare()
		if got := k.plan != nil; got != tc.want {
			t.Errorf("%s: plan after Prepare %v, want %v", tc.mode, got, tc.want)
		}
	}
}

// TestNameTableAgrees: an object node's name table answers every name as
// the properties map and required do, for the fuzz schemas' nodes and for
// name sets that test its edges (the empty name, a name required twice or
// only required); names it cannot tell apart, or too many, get no table.
func TestNameTableAgrees(t *testing.T) {
	slow := func(n *fnode, name string) (*fnode, bool, int) {
		p, ok := n.props[name]
		req := 0
		for _, r := range n.required {
			if r == name {
				req++
			}
		}
		return p, ok, req
	}
	check := func(what string, n *fnode, probes []string) {
		t.Helper()
		bits := map[int]string{} // a table's names each have their own bit
		for _, name := range probes {
			// Near misses too: a name one byte off or one byte longer may
			// land on the slot of a name in the table.
			variants := []string{name, name + "x", "x" + name, strings.ToUpper(name)}
			if len(name) > 2 {
				variants = append(variants, name[:1]+"\x00"+name[2:], name[:len(name)-1])
			}
			for _, v := range variants {
				gp, gok, greq, gbit := n.lookupName(v)
				wp, wok, wreq := slow(n, v)
				if gp != wp || gok != wok || greq != wreq {
					t.Errorf("%s: %q: table (%p %v %d), map (%p %v %d)", what, v, gp, gok, greq, wp, wok, wreq)
				}
				inTable := n.names != nil && (wok || wreq > 0)
				if inTable != (gbit >= 0) || gbit >= maxTableNames {
					t.Errorf("%s: %q: bit %d, in the table %v", what, v, gbit, inTable)
				}
				if other, ok := bits[gbit]; gbit >= 0 && ok && other != v {
					t.Errorf("%s: %q and %q share bit %d", what, v, other, gbit)
				}
				bits[gbit] = v
			}
		}
	}
	schemas, err := compiledFuzzSchemas()
	if err != nil {
		t.Fatal(err)
	}
	tables := 0
	for i, s := range schemas {
		seen := map[*fnode]bool{}
		var walk func(n *fnode)
		walk = func(n *fnode) {
			if n == nil || seen[n] {
				return
			}
			seen[n] = true
			if n.hasObject {
				var probes []string
				for name := range n.props {
					probes = append(probes, name)
				}
				probes = append(probes, n.required...)
				probes = append(probes, "", "zz-not-a-name")
				if n.names != nil {
					tables++
				}
				check(fmt.Sprintf("schema %d", i), n, probes)
			}
			n.evalEdges(func(c *fnode, _ bool) { walk(c) })
		}
		walk(s.fast.root)
	}
	if tables == 0 {
		t.Error("no node of the fuzz schemas got a name table")
	}

	node := func(props []string, required ...string) *fnode {
		n := &fnode{kind: kSchema, hasObject: true, props: map[string]*fnode{}, required: required}
		for _, p := range props {
			n.props[p] = &fnode{kind: kSchema}
		}
		n.names = newNameTable(n)
		return n
	}
	many := make([]string, 0, maxTableNames+1)
	for i := range maxTableNames + 1 {
		many = append(many, fmt.Sprintf("p%c%c", 'a'+i/16, 'a'+i%16)) // keys all differ
	}
	for _, c := range []struct {
		what     string
		n        *fnode
		hasTable bool
	}{
		{"edges", node([]string{"", "a", "ab", "ticket_id", "é"}, "a", "a", "only_required", ""), true},
		{"required only", node(nil, "a", "b"), true},
		{"max names", node(many[:maxTableNames]), true},
		{"too many names", node(many), false},
		// Same length, first, middle and last byte: one key.
		{"same key", node([]string{"abcde", "abcxe"}), false},
	} {
		if got := c.n.names != nil; got != c.hasTable {
			t.Errorf("%s: name table %v, want %v", c.what, got, c.hasTable)
		}
		probes := append([]string{"", "q", "abcze"}, c.n.required...)
		for name := range c.n.props {
			probes = append(probes, name)
		}
		check(c.what, c.n, probes)
	}
}
