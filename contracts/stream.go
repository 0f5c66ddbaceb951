package contracts

// One-pass check of a strict output.
//
// The full check decodes the output into maps and slices, then the fast
// schema path walks them, then policies walk their paths. Most outputs are
// valid, and a valid verdict needs neither the maps nor a second walk: here
// the schema's fast tree is followed while the decoder's tokens are read,
// each member checked as it arrives, and only what the policies read is
// built (the values along their paths). Anything this pass does not judge
// itself (a subschema with applicators, enums of containers, uniqueItems,
// patternProperties, dependencies) gets its subtree decoded and judged by
// the fast tree as before. Any failure, of the output or of this pass,
// makes Check run the full path from the start, so violations, their
// messages and the library's verdicts come from the same code as ever.
//
// Soundness rule, as for the fast tree: a valid verdict here must imply the
// full path's valid verdict with the same evidence. The per-member checks
// are validObject's and validArray's, applied only where valid() would do
// nothing else for a container (streams()); policies see a value that
// holds every member and element their paths reach, at full length for
// arrays, so their walks visit the same values (PathPolicy).

import (
	"bytes"
	"math/bits"
	"unsafe"

	"github.com/contractd/contractd/internal/jsonscan"
)

// streamPlan is a contract's one-pass check: the fast tree's root and the
// policies' paths.
type streamPlan struct {
	root   *fnode
	paths  [][]pathToken
	policy bool // there are policies: build what they read
}

// pathToken is one token of a policy path as Walk matches it: a member
// name, an array index (-1: none), or any member or element.
type pathToken struct {
	name  string
	index int
	wild  bool
}

// streamPlan compiles, on first use, the contract's one-pass check: nil
// when its extraction is not strict, its schema has no fast tree, its root
// is not judged member by member, or a policy may read more than its paths.
func (c *Contract) streamPlan() *streamPlan {
	c.planOnce.Do(func() {
		if c.Mode == ModeLenient || c.Mode == ModeRepair || c.Schema == nil || c.Schema.fast == nil {
			return
		}
		root := streamNode(c.Schema.fast.root)
		if root == nil || !root.streams() {
			return
		}
		p := &streamPlan{root: root, policy: len(c.Policies) > 0}
		for _, pol := range c.Policies {
			pp, ok := pol.(PathPolicy)
			if !ok {
				return
			}
			tokens, wild := pp.OutputPath()
			if len(tokens) == 0 || len(tokens) != len(wild) || len(p.paths) == 64 {
				return // the whole output, or more paths than a mask holds
			}
			path := make([]pathToken, len(tokens))
			for i, t := range tokens {
				path[i] = pathToken{name: t, index: -1, wild: wild[i]}
				if n, ok := PointerIndex(t); ok {
					path[i].index = n
				}
			}
			p.paths = append(p.paths, path)
		}
		c.plan = p
	})
	return c.plan
}

// Prepare compiles the one-pass check now, once the contract's schema,
// mode and policies are set, so that the first request does not pay for
// it. A contract built without calling it compiles the plan on first use.
func (c *Contract) Prepare() { c.streamPlan() }

// streamNode is the node that decides for n: n itself, or its $ref target
// when n's siblings of $ref are not evaluated or n has none (valid()
// returns the target's verdict then); nil when anything goes (true).
func streamNode(n *fnode) *fnode {
	for range 16 {
		switch {
		case n == nil || n.kind == kTrue:
			return nil
		case n.kind == kSchema && n.ref != nil && (n.refOnly || n.onlyRef()):
			n = n.ref
			continue
		}
		return n
	}
	return n // a long chain: valid() on the node decides
}

// onlyRef reports whether n checks nothing besides its $ref: every other
// keyword valid() evaluates is absent.
func (n *fnode) onlyRef() bool {
	return !n.hasType && n.constVal == nil && !n.hasEnum && n.num == nil && !n.hasMinLen && !n.hasMaxLen &&
		n.pattern == nil && n.format == nil && !n.hasObject && !n.hasArray &&
		len(n.allOf) == 0 && len(n.anyOf) == 0 && len(n.oneOf) == 0 && n.not == nil && n.ifN == nil
}

// streams reports whether a container's verdict at n is exactly its type,
// its counts and the verdicts of its members or elements, as validObject
// and validArray reach them (valid() has nothing else to check for a
// container at such a node).
func (n *fnode) streams() bool {
	return n.kind == kSchema && n.ref == nil && n.constVal == nil && !n.hasEnum && n.format == nil &&
		len(n.allOf) == 0 && len(n.anyOf) == 0 && len(n.oneOf) == 0 && n.not == nil && n.ifN == nil &&
		len(n.patProps) == 0 && len(n.depRequired) == 0 && len(n.depSchemas) == 0 && !n.unique
}

// streamFrame is one open container of the one-pass check.
type streamFrame struct {
	node  *fnode // what the container must satisfy (streams()); nil: anything
	isObj bool
	n     int                        // members or elements so far
	req   int                        // required names seen (member names are unique)
	names int                        // where this object's undeclared names start in snames
	seen  [maxTableNames / 64]uint64 // its declared names seen so far, by name table bit
	mask  uint64                     // policy paths that continue inside (bit i: paths[i])
	part  int                        // where its kept members (pmems) or elements (pvals) start
	// The pending member (objects): its name, the node its value must
	// satisfy, and which paths reach it (full: one ends there).
	name  string
	named bool
	child *fnode
	cmask uint64
	cfull bool
}

// maxStreamMembers bounds the linear search for repeated undeclared names:
// larger objects go to the full path, whose maps find them.
const maxStreamMembers = 64

// checkStream judges content in one pass. ok false means "not judged
// here": the full path decides. Otherwise it returns the accepted bytes
// and the value the policies read.
func (c *Contract) checkStream(p *streamPlan, content string, sc *decodeScratch) (b []byte, out map[string]any, ok bool) {
	if c.Limits.MaxBytes > 0 && len(content) > c.Limits.MaxBytes {
		return nil, nil, false
	}
	t, _ := trimWS(content)
	if len(t) == 0 || t[0] != '{' {
		return nil, nil, false
	}
	b = readOnlyBytes(t)
	maxDepth := c.Limits.MaxDepth
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	// The pass reads tokens with jsonscan, which accepts exactly what
	// jsontext does here (FuzzScanAgrees) at a fraction of its cost per
	// token; a value decoded whole (buildOne) goes through jsontext.
	d := acquireScanning(sc)
	d.size, d.in = len(b), b
	d.scan.Reset(b, false)
	defer func() {
		if recover() != nil { // a type the fast tree does not know: not judged here
			b, out, ok = nil, nil, false
		}
		d.scan.Reset(nil, false)
		d.release()
	}()
	out, ok = d.stream(p, maxDepth)
	if !ok || !d.scan.Done() {
		return nil, nil, false
	}
	return b, out, true
}

// stream is the one-pass loop over the object at the decoder's start.
func (d *objDecoder) stream(p *streamPlan, maxDepth int) (map[string]any, bool) {
	if d.sc != nil {
		d.arena, d.slab = d.sc.arena, d.sc.slab
	}
	st := d.sstack[:0]
	defer func() {
		if d.sc != nil {
			d.sc.arena, d.sc.slab = d.arena, d.slab
		}
		clear(st[:cap(st)])
		clear(d.snames)
		clear(d.pmems)
		clear(d.pvals)
		d.sstack, d.snames, d.pmems, d.pvals, d.arena, d.slab = st[:0], d.snames[:0], d.pmems[:0], d.pvals[:0], nil, nil
		if cap(st) > 1024 || cap(d.snames) > 1<<12 || cap(d.pmems) > 1<<12 || cap(d.pvals) > 1<<16 {
			d.sstack, d.snames, d.pmems, d.pvals = nil, nil, nil, nil
		}
	}()
	if k, err := d.scan.ReadToken(); err != nil || k != '{' || maxDepth < 1 {
		return nil, false
	}
	if p.root.hasType && p.root.types&tObject == 0 {
		return nil, false
	}
	var mask uint64
	if p.policy {
		mask = 1<<len(p.paths) - 1 // all paths (64: the shift wraps to 0, minus one is all ones)
	}
	st = append(st, streamFrame{node: p.root, isObj: true, mask: mask})
	for {
		top := &st[len(st)-1]
		k := d.scan.PeekKind()
		var v any
		kept := false // v goes into the parent's kept value
		switch {
		case top.isObj && k == '}', !top.isObj && k == ']':
			if _, err := d.scan.ReadToken(); err != nil {
				return nil, false
			}
			f := top // stays as it is until the next frame is pushed
			if !f.closes() {
				return nil, false
			}
			if f.isObj {
				d.snames = d.snames[:f.names]
			}
			st = st[:len(st)-1]
			if f.mask != 0 || len(st) == 0 && p.policy {
				v, kept = d.keep(f), true
			}
			if len(st) == 0 {
				m, _ := v.(map[string]any)
				return m, true
			}
			top = &st[len(st)-1]
		case top.isObj && !top.named:
			raw, err := d.scan.ReadValue()
			if err != nil || len(raw) < 2 || raw[0] != '"' {
				return nil, false
			}
			if !d.member(p, top, len(st)-1, d.text(raw)) {
				return nil, false
			}
			continue
		default:
			node, mask, full := top.slot(p, len(st)-1)
			switch k {
			case '{', '[':
				if len(st) >= maxDepth {
					return nil, false
				}
				node = streamNode(node)
				if node != nil && node.kind == kFalse {
					return nil, false
				}
				if full || node != nil && !node.streams() {
					// Decoded whole: a policy reads all of it, or the fast
					// tree judges it as a value.
					var ok bool
					if v, ok = d.buildOne(maxDepth - len(st)); !ok || node != nil && !node.valid(v) {
						return nil, false
					}
					kept = full || mask != 0
					break
				}
				want := tArray
				if k == '{' {
					want = tObject
				}
				if node != nil && node.hasType && node.types&want == 0 {
					return nil, false
				}
				if _, err := d.scan.ReadToken(); err != nil {
					return nil, false
				}
				st = append(st, streamFrame{node: node, isObj: k == '{', mask: mask, names: len(d.snames)})
				nf := &st[len(st)-1]
				if nf.isObj {
					nf.part = len(d.pmems)
				} else {
					nf.part = len(d.pvals)
				}
				continue
			case '"', '0':
				if node != nil && node.plain && !full && mask == 0 {
					// Judged where it lies: no policy reads it, and its
					// node reads nothing but the string or number.
					if !d.plainScalar(k, node) {
						return nil, false
					}
					break
				}
				fallthrough
			default:
				var ok bool
				if v, ok = d.scalar(k, node != nil || full || mask != 0); !ok {
					return nil, false
				}
				if node != nil && !node.valid(v) {
					return nil, false
				}
				kept = full || mask != 0
			}
		}
		top.add(d, v, kept)
	}
}

// member reads the name of the next member of the object f at depth:
// repeated names, the node its value must satisfy, the paths that reach it.
// A name in the node's name table is told repeated by its bit in f.seen;
// any other by comparing it with the object's other such names.
func (d *objDecoder) member(p *streamPlan, f *streamFrame, depth int, name string) bool {
	if f.n >= maxStreamMembers {
		return false
	}
	var c *fnode
	bit := -1
	if n := f.node; n != nil && n.hasObject {
		// validObject: a declared property, else additionalProperties.
		var pn *fnode
		var isProp bool
		var req int
		pn, isProp, req, bit = n.lookupName(name)
		f.req += req
		if isProp {
			c = pn
		} else if n.addl != nil {
			if n.addl.kind == kFalse {
				return false
			}
			c = n.addl
		}
	}
	if bit >= 0 {
		w, b := &f.seen[bit>>6], uint64(1)<<(bit&63)
		if *w&b != 0 {
			return false // duplicate_key: the full path names it
		}
		*w |= b
	} else {
		for _, s := range d.snames[f.names:] {
			if s == name {
				return false
			}
		}
		d.snames = append(d.snames, name)
	}
	f.cmask, f.cfull = p.reach(f.mask, depth, name, -1)
	f.name, f.named, f.child = name, true, c
	return true
}

// slot is the node, path mask and capture of f's next value.
func (f *streamFrame) slot(p *streamPlan, depth int) (*fnode, uint64, bool) {
	if f.isObj {
		return f.child, f.cmask, f.cfull
	}
	var c *fnode
	if n := f.node; n != nil && n.hasArray {
		// validArray: prefixItems by position, then items.
		if f.n < len(n.prefix) {
			c = n.prefix[f.n]
		} else {
			c = n.items
		}
	}
	mask, full := p.reach(f.mask, depth, "", f.n)
	return c, mask, full
}

// reach is which of the paths in mask, walking a container at depth, go
// on into its member name (index < 0) or element index: the paths that
// continue, and whether one ends there (the value is read whole).
func (p *streamPlan) reach(mask uint64, depth int, name string, index int) (next uint64, full bool) {
	for m := mask; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		path := p.paths[i]
		t := path[depth]
		if !t.wild && (index < 0 && t.name != name || index >= 0 && t.index != index) {
			continue
		}
		if depth+1 == len(path) {
			full = true
		} else {
			next |= 1 << i
		}
	}
	return next, full
}

// add records the value just read in f: kept members and, in an array a
// path walks into, every element (nil for those no path reaches, so
// indexes and length stay the output's).
func (f *streamFrame) add(d *objDecoder, v any, kept bool) {
	if f.isObj {
		if kept {
			d.pmems = append(d.pmems, openMember{f.name, v})
		}
		f.named = false
	} else if f.mask != 0 {
		if !kept {
			v = nil
		}
		d.pvals = append(d.pvals, v)
	}
	f.n++
}

// closes applies the container's counts (validObject, validArray).
func (f *streamFrame) closes() bool {
	n := f.node
	if n == nil {
		return true
	}
	count := float64(f.n)
	if f.isObj {
		if !n.hasObject {
			return true
		}
		return f.req == len(n.required) &&
			(n.minProps == nil || count >= *n.minProps) && (n.maxProps == nil || count <= *n.maxProps)
	}
	if !n.hasArray {
		return true
	}
	return (n.minItems == nil || count >= *n.minItems) && (n.maxItems == nil || count <= *n.maxItems)
}

// keep builds the kept value of the closed container f.
func (d *objDecoder) keep(f *streamFrame) any {
	if f.isObj {
		m := d.mapOf(d.pmems[f.part:])
		d.pmems = d.pmems[:f.part]
		return m
	}
	a := d.arrayFor(f.n)
	copy(a, d.pvals[f.part:])
	clear(d.pvals[f.part:])
	d.pvals = d.pvals[:f.part]
	return a
}

// scalar reads the next string, number, true, false or null; as a value
// only when want (otherwise it is only checked as JSON).
func (d *objDecoder) scalar(k jsonscan.Kind, want bool) (any, bool) {
	switch k {
	case '"', '0':
		raw, err := d.scan.ReadValue()
		if err != nil {
			return nil, false
		}
		if !want {
			return nil, true
		}
		if k == '0' {
			return d.box(d.alias(raw), numberType), true
		}
		return d.box(d.text(raw), stringType), true
	}
	tok, err := d.scan.ReadToken()
	if err != nil {
		return nil, false
	}
	switch tok {
	case 't':
		return true, true
	case 'f':
		return false, true
	case 'n':
		return nil, true
	}
	return nil, false
}

// plainScalar reads the next string or number (k) and judges it at the
// plain node n without boxing it.
func (d *objDecoder) plainScalar(k jsonscan.Kind, n *fnode) bool {
	raw, err := d.scan.ReadValue()
	if err != nil {
		return false
	}
	if k == '0' {
		return n.validNumber(d.alias(raw))
	}
	return n.validString(d.text(raw))
}

// text is the value of raw, the string the scanner has just read: its
// bytes in the input when it has no escape (the input outlives the check
// and is never written), else unquoted into the arena.
func (d *objDecoder) text(raw []byte) string {
	if !d.scan.Escaped() && d.inInput(raw) {
		return d.alias(raw[1 : len(raw)-1])
	}
	return d.str(raw, true)
}

// alias is b as a string without a copy, b being part of the input.
func (d *objDecoder) alias(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if !d.inInput(b) {
		return d.str(b, false)
	}
	return unsafe.String(&b[0], len(b))
}

// inInput reports whether b lies in the input (the scanner's strings and
// numbers always do; anything else is copied).
func (d *objDecoder) inInput(b []byte) bool {
	if len(b) == 0 || len(d.in) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(&d.in[0]))
	p := uintptr(unsafe.Pointer(&b[0]))
	return p >= start && p+uintptr(len(b)) <= start+uintptr(len(d.in))
}

// buildOne decodes the next value whole with the full decoder, in the
// same arena and scratch, its depth bounded by what is left of maxDepth:
// the scanner reads past it (so the pass goes on after it), and jsontext
// decodes its bytes.
func (d *objDecoder) buildOne(maxDepth int) (any, bool) {
	raw, err := d.scan.ReadValue()
	if err != nil {
		return nil, false
	}
	d.buf = *bytes.NewBuffer(raw)
	d.resetDec()
	if d.sc == nil {
		v, viol := d.run(0, maxDepth)
		return v, viol == nil
	}
	d.sc.arena, d.sc.slab = d.arena, d.slab
	v, viol := d.run(0, maxDepth)
	d.arena, d.slab = d.sc.arena, d.sc.slab
	return v, viol == nil
}

// lookupName is what an object node says of a member name: its property's
// subschema when it is a declared property, how many times it is in
// required, and its bit in the name table (-1: not in one). The node's
// name table answers with one probe; without one (more names than a table
// takes, or names it cannot tell apart), the properties map and a walk of
// required do.
func (n *fnode) lookupName(name string) (prop *fnode, isProp bool, req, bit int) {
	if t := n.names; t != nil {
		s := &t.slots[nameKey(name)*t.mult>>t.shift]
		if s.used && s.name == name {
			return s.node, s.prop, s.req, s.bit
		}
		return nil, false, 0, -1
	}
	prop, isProp = n.props[name]
	for _, r := range n.required {
		if r == name {
			req++
		}
	}
	return prop, isProp, req, -1
}

// nameTable is a perfect hash of an object node's property and required
// names, chosen when the schema is compiled: the one pass looks up every
// member name of the output in it, and a map lookup (hashing the whole
// name) plus a walk of required was 6 % of a contract request's CPU in
// process. A name's slot comes from four of its bytes (nameKey) times a
// multiplier picked so that no two names share a slot; a name not in the
// table lands on a slot holding another name, or none.
type nameTable struct {
	slots []nameSlot
	mult  uint32
	shift uint32
}

type nameSlot struct {
	name string
	node *fnode // the property's subschema (prop)
	req  int    // times name is in required
	bit  int    // the name's own number in the table, 0 to maxTableNames-1
	prop bool   // name is a declared property
	used bool
}

// nameKey packs a name's length and its first, middle and last bytes.
// Names with the same key cannot share a table (newNameTable gives up).
func nameKey(s string) uint32 {
	if len(s) == 0 {
		return 0
	}
	return uint32(len(s))&0xFF | uint32(s[0])<<8 | uint32(s[len(s)/2])<<16 | uint32(s[len(s)-1])<<24
}

// Bounds of a name table: objects with more names, or whose names no
// multiplier tried separates within 16 slots a name, keep the map.
const (
	maxTableNames = 128
	maxTableBits  = 11
	tableTries    = 256
)

// newNameTable builds n's name table, or returns nil when the names do not
// fit one (see nameTable).
func newNameTable(n *fnode) *nameTable {
	type entry struct {
		node *fnode
		req  int
		prop bool
		key  uint32
		name string
	}
	byName := map[string]*entry{}
	add := func(name string) *entry {
		e := byName[name]
		if e == nil {
			e = &entry{name: name, key: nameKey(name)}
			byName[name] = e
		}
		return e
	}
	for name, c := range n.props {
		e := add(name)
		e.node, e.prop = c, true
	}
	for _, r := range n.required {
		add(r).req++
	}
	count := len(byName)
	if count == 0 || count > maxTableNames {
		return nil
	}
	keys := map[uint32]bool{}
	for _, e := range byName {
		if keys[e.key] {
			return nil // two names with the same key: no multiplier separates them
		}
		keys[e.key] = true
	}
	bits := uint32(1)
	for 1<<bits < 2*count {
		bits++
	}
	seed := uint64(0x9E3779B97F4A7C15)
	for ; bits <= maxTableBits && 1<<bits <= 16*count; bits++ {
		used := make([]bool, 1<<bits)
		for range tableTries {
			seed = seed*6364136223846793005 + 1442695040888963407 // LCG: deterministic, so builds agree
			mult := uint32(seed>>32) | 1
			shift := 32 - bits
			clear(used)
			fits := true
			for _, e := range byName {
				i := e.key * mult >> shift
				if used[i] {
					fits = false
					break
				}
				used[i] = true
			}
			if !fits {
				continue
			}
			t := &nameTable{slots: make([]nameSlot, 1<<bits), mult: mult, shift: shift}
			bit := 0
			for _, e := range byName {
				t.slots[e.key*mult>>shift] = nameSlot{name: e.name, node: e.node, req: e.req, bit: bit, prop: e.prop, used: true}
				bit++
			}
			return t
		}
	}
	return nil
}
