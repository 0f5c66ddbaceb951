package review

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// migration is one embedded migration file.
type migration struct {
	version int
	name    string // file name, for errors
	body    string
}

// migrations lists the .sql files of dir in version order; each name
// starts with its version number.
func migrations(fsys embed.FS, dir string) ([]migration, error) {
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]migration, 0, len(names))
	for _, name := range names {
		base := path.Base(name)
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a version number", base)
		}
		body, err := fsys.ReadFile(name)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{v, base, string(body)})
	}
	return out, nil
}

// rows is what database/sql's and pgx's result sets share, so both stores
// read their rows with the same code.
type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// missingOrResolved is why the conditional update of a pending item
// changed no row, from count, the row of the number of items with its id:
// ErrNotFound when there is none, ErrAlreadyResolved when it is there.
func missingOrResolved(count scanner) error {
	var n int
	if err := count.Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return ErrAlreadyResolved
}

// eachItem calls fn for every item row (itemColumns, no request).
func eachItem(rs rows, fn func(*Item) error) error {
	for rs.Next() {
		it, err := scanItem(rs, false)
		if err != nil {
			return err
		}
		if err := fn(it); err != nil {
			return err
		}
	}
	return rs.Err()
}

// listItems reads a List query's rows (limit+1 of them) into one page.
func listItems(rs rows, limit int) ([]*Item, string, error) {
	items := []*Item{}
	if err := eachItem(rs, func(it *Item) error { items = append(items, it); return nil }); err != nil {
		return nil, "", err
	}
	items, next := onePage(items, limit)
	return items, next, nil
}

// scanPending reads (route, count) rows.
func scanPending(rs rows) (map[string]int, error) {
	out := map[string]int{}
	for rs.Next() {
		var r string
		var n int
		if err := rs.Scan(&r, &n); err != nil {
			return nil, err
		}
		out[r] = n
	}
	return out, rs.Err()
}

// dedupeColumns are what RecentDedupe reads of an item, in scanDedupe's
// order.
const dedupeColumns = `id, created_ns, route, contract_name, attempts, dedupe_key, dedupe_until_ns, dedupe_answer`

// scanDedupe reads dedupeColumns rows.
func scanDedupe(rs rows) ([]DedupeRecord, error) {
	var out []DedupeRecord
	for rs.Next() {
		var r DedupeRecord
		var created, until int64
		var atts, answer string
		if err := rs.Scan(&r.ID, &created, &r.Route, &r.Contract, &atts, &r.Key, &until, &answer); err != nil {
			return nil, err
		}
		r.CreatedAt, r.Until = time.Unix(0, created).UTC(), time.Unix(0, until).UTC()
		r.Attempts, r.Answer = json.RawMessage(atts), json.RawMessage(answer)
		out = append(out, r)
	}
	return out, rs.Err()
}

// scanDeliveries reads (id, type, review_id, body, created_ns, tries) rows.
func scanDeliveries(rs rows) ([]Delivery, error) {
	var out []Delivery
	for rs.Next() {
		var d Delivery
		var created int64
		if err := rs.Scan(&d.ID, &d.Type, &d.ReviewID, &d.Body, &created, &d.Tries); err != nil {
			return nil, err
		}
		d.CreatedAt = time.Unix(0, created).UTC()
		out = append(out, d)
	}
	return out, rs.Err()
}

// mergeAttempts appends atts to an item's stored attempts (cur, JSON) when
// it is still pending, and gives the new JSON and the rules atts add. The
// appended attempts are numbered on from the stored ones, in the
// transaction: callers number them from the item they read, and two
// reruns that read it at once would otherwise both append attempt 3.
func mergeAttempts(status, cur string, atts []Attempt) ([]byte, []string, error) {
	if Status(status) != StatusPending {
		return nil, nil, ErrAlreadyResolved
	}
	var old []Attempt
	if err := json.Unmarshal([]byte(cur), &old); err != nil {
		return nil, nil, err
	}
	next := 1
	for _, a := range old {
		next = max(next, a.Attempt+1)
	}
	all := make([]Attempt, 0, len(old)+len(atts))
	all = append(all, old...)
	for i, a := range atts {
		a.Attempt = next + i
		all = append(all, a)
	}
	seen := map[string]bool{}
	rulesOf(old, seen)
	b, err := json.Marshal(all)
	return b, rulesOf(atts, seen), err
}

// exportPage is how many items one export query reads (and holds in
// memory, with their inputs and outputs) before the callbacks run.
const exportPage = 256

// exportCursor is the export order's key of the last item exported.
type exportCursor struct {
	at int64 // COALESCE(resolved_ns, created_ns)
	id string
}

// exportPages calls fn for every item of the pages page reads, one page
// after another, until a page holds fewer than limit items.
func exportPages(f ExportFilter, limit int, page func(*exportCursor) ([]*Item, error), fn func(*Item) error) error {
	var c *exportCursor
	for {
		items, err := page(c)
		if err != nil {
			return err
		}
		for _, it := range items {
			if err := fn(it); err != nil {
				return err
			}
		}
		if len(items) < limit {
			return nil
		}
		last := items[len(items)-1]
		at := last.CreatedAt
		if last.ResolvedAt != nil {
			at = *last.ResolvedAt
		}
		c = &exportCursor{at: at.UnixNano(), id: last.ID}
	}
}

// collectItems reads up to limit items (without Request).
func collectItems(rs rows, limit int) ([]*Item, error) {
	items := make([]*Item, 0, limit)
	err := eachItem(rs, func(it *Item) error { items = append(items, it); return nil })
	return items, err
}
