// Package storetest is the behaviour every review.Store must show, as one
// table run against each implementation (the SQLite file here, PostgreSQL
// in its own test), so backends cannot drift apart.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/review"
)

// base is a fixed instant so ordering is deterministic.
var base = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// NewItem returns a pending item with two failed attempts.
func NewItem(id, route string, at time.Time, rules ...string) *review.Item {
	if len(rules) == 0 {
		rules = []string{"required"}
	}
	var vs []contracts.Violation
	for _, r := range rules {
		vs = append(vs, contracts.Violation{Kind: "schema", Path: "", Rule: r, Message: r + " failed"})
	}
	return &review.Item{
		ID: id, Status: review.StatusPending, CreatedAt: at, Route: route,
		Prompt:   review.Ref{Name: "p", SHA256: "aa"},
		Contract: review.Ref{Name: "k_" + route, SHA256: "bb"},
		KeyID:    "0123456789ab",
		Input:    json.RawMessage(`{"body":"hello <script>"}`),
		Request:  json.RawMessage(`{"model":"` + route + `","messages":[]}`),
		Attempts: []review.Attempt{
			{AttemptReport: review.AttemptReport{Attempt: 1, Temperature: 0.7, FinishReason: "stop", Usage: audit.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}, Violations: vs}, OutputSHA256: "cc", Output: `{"x":1}`},
			{AttemptReport: review.AttemptReport{Attempt: 2, Temperature: 0, Shortened: true, FinishReason: "stop", Violations: vs[:1]}, Output: "not json"},
		},
	}
}

func approve(at time.Time) review.Resolve {
	return review.Resolve{Status: review.StatusApproved, At: at,
		Resolution: review.Resolution{By: review.ByReviewer, Reviewer: "ann", Note: "ok", Output: json.RawMessage(`{"ok":true}`)}}
}

func ctx() context.Context { return context.Background() }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, s review.Store, its ...*review.Item) {
	t.Helper()
	for _, it := range its {
		ok, err := s.Create(ctx(), it, false)
		must(t, err)
		if !ok {
			t.Fatalf("create %s: not created", it.ID)
		}
	}
}

func ids(items []*review.Item) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.ID)
	}
	return out
}

func eq(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// behaviours is the table: each runs on a fresh store.
var behaviours = []struct {
	name string
	run  func(t *testing.T, s review.Store)
}{
	{"create then get round-trips every field", func(t *testing.T, s review.Store) {
		it := NewItem("r1", "a", base)
		create(t, s, it)
		got, err := s.Get(ctx(), "r1")
		must(t, err)
		eq(t, "item", got, it)
		if got.ResolvedAt != nil || got.Resolution != nil {
			t.Fatal("pending item has resolution")
		}
	}},
	{"create of an existing id is a no-op", func(t *testing.T, s review.Store) {
		create(t, s, NewItem("r1", "a", base))
		other := NewItem("r1", "b", base.Add(time.Hour))
		ok, err := s.Create(ctx(), other, false)
		must(t, err)
		if ok {
			t.Fatal("second create reported created")
		}
		got, _ := s.Get(ctx(), "r1")
		eq(t, "route", got.Route, "a")
	}},
	{"get unknown id is ErrNotFound", func(t *testing.T, s review.Store) {
		_, err := s.Get(ctx(), "nope")
		if !errors.Is(err, review.ErrNotFound) {
			t.Fatalf("got %v", err)
		}
	}},
	{"empty attempts round-trip as a list", func(t *testing.T, s review.Store) {
		it := NewItem("r1", "a", base)
		it.Attempts = nil
		create(t, s, it)
		got, _ := s.Get(ctx(), "r1")
		if got.Attempts == nil || len(got.Attempts) != 0 {
			t.Fatalf("attempts %#v", got.Attempts)
		}
	}},
	{"list is newest first, omits request, paginates by cursor", func(t *testing.T, s review.Store) {
		for i := 0; i < 7; i++ {
			create(t, s, NewItem(fmt.Sprintf("r%d", i), "a", base.Add(time.Duration(i)*time.Second)))
		}
		// Two items at the same instant order by id, and paging never
		// skips or repeats one.
		create(t, s, NewItem("s1", "a", base.Add(3*time.Second)), NewItem("s2", "a", base.Add(3*time.Second)))
		var all []string
		cur := ""
		for page := 0; ; page++ {
			items, next, err := s.List(ctx(), review.Filter{Limit: 3, Cursor: cur})
			must(t, err)
			for _, it := range items {
				if it.Request != nil {
					t.Fatal("list item has request")
				}
			}
			all = append(all, ids(items)...)
			if next == "" {
				break
			}
			cur = next
			if page > 10 {
				t.Fatal("cursor loops")
			}
		}
		eq(t, "order", all, []string{"r6", "r5", "r4", "s2", "s1", "r3", "r2", "r1", "r0"})
	}},
	{"list default limit is 50 and limits outside 1..500 are refused", func(t *testing.T, s review.Store) {
		for i := 0; i < 52; i++ {
			create(t, s, NewItem(fmt.Sprintf("r%02d", i), "a", base.Add(time.Duration(i)*time.Millisecond)))
		}
		items, next, err := s.List(ctx(), review.Filter{})
		must(t, err)
		if len(items) != 50 || next == "" {
			t.Fatalf("%d items, next %q", len(items), next)
		}
		for _, l := range []int{-1, 501} {
			if _, _, err := s.List(ctx(), review.Filter{Limit: l}); err == nil {
				t.Fatalf("limit %d accepted", l)
			}
		}
		items, _, err = s.List(ctx(), review.Filter{Limit: 500})
		must(t, err)
		if len(items) != 52 {
			t.Fatalf("limit 500: %d", len(items))
		}
	}},
	{"bad cursor is ErrBadCursor", func(t *testing.T, s review.Store) {
		_, _, err := s.List(ctx(), review.Filter{Cursor: "!!"})
		if !errors.Is(err, review.ErrBadCursor) {
			t.Fatalf("got %v", err)
		}
	}},
	{"list filters status route contract rule, combined", func(t *testing.T, s review.Store) {
		create(t, s,
			NewItem("a1", "a", base, "required"),
			NewItem("a2", "a", base.Add(time.Second), "enum", "label"),
			NewItem("b1", "b", base.Add(2*time.Second), "label"),
			NewItem("b2", "b", base.Add(3*time.Second), "required"))
		_, err := s.Resolve(ctx(), "b2", approve(base.Add(time.Hour)))
		must(t, err)
		for _, c := range []struct {
			f    review.Filter
			want []string
		}{
			{review.Filter{Status: review.StatusPending}, []string{"b1", "a2", "a1"}},
			{review.Filter{Status: review.StatusApproved}, []string{"b2"}},
			{review.Filter{Status: review.StatusRejected}, []string{}},
			{review.Filter{Route: "a"}, []string{"a2", "a1"}},
			{review.Filter{Contract: "k_b"}, []string{"b2", "b1"}},
			{review.Filter{Rule: "label"}, []string{"b1", "a2"}},
			{review.Filter{Rule: "label", Route: "b"}, []string{"b1"}},
			{review.Filter{Rule: "required", Status: review.StatusPending}, []string{"a1"}},
			{review.Filter{Rule: "required", Status: review.StatusApproved}, []string{"b2"}},
			{review.Filter{Rule: "required", Status: review.StatusApproved, Route: "b", Contract: "k_b"}, []string{"b2"}},
			{review.Filter{Rule: "required", Contract: "k_a"}, []string{"a1"}},
			{review.Filter{Rule: "nope"}, []string{}},
			{review.Filter{Rule: "label", Limit: 1}, []string{"b1"}},
		} {
			items, _, err := s.List(ctx(), c.f)
			must(t, err)
			eq(t, fmt.Sprintf("%+v", c.f), ids(items), c.want)
		}
		// rule filter pages too
		items, next, err := s.List(ctx(), review.Filter{Rule: "label", Limit: 1})
		must(t, err)
		items, _, err = s.List(ctx(), review.Filter{Rule: "label", Limit: 1, Cursor: next})
		must(t, err)
		eq(t, "rule page 2", ids(items), []string{"a2"})
	}},
	{"lists, exports and the dedupe poll keep their order across statuses", func(t *testing.T, s review.Store) {
		// Nine items one second apart whose statuses interleave
		// (pending, approved, rejected, ...), two routes, all with rule
		// "required" and every third also "enum": each filter without a
		// status, read whole and a page of 2 at a time, gives its matches
		// newest first, whatever their status.
		var all []string
		for i := range 9 {
			id := fmt.Sprintf("m%d", i)
			rules := []string{"required"}
			if i%3 == 0 {
				rules = append(rules, "enum")
			}
			it := NewItem(id, []string{"a", "b"}[i%2], base.Add(time.Duration(i)*time.Second), rules...)
			it.Dedupe = &review.Dedupe{Key: id, Until: base.Add(time.Hour), Answer: json.RawMessage(`{}`)}
			create(t, s, it)
			all = append([]string{id}, all...)
		}
		for i := range 9 {
			r := approve(base.Add(time.Hour - time.Duration(i)*time.Second))
			switch i % 3 {
			case 0:
				continue
			case 2:
				r.Status = review.StatusRejected
			}
			_, err := s.Resolve(ctx(), fmt.Sprintf("m%d", i), r)
			must(t, err)
		}
		for _, c := range []struct {
			f    review.Filter
			want []string
		}{
			{review.Filter{}, all},
			{review.Filter{Route: "a"}, []string{"m8", "m6", "m4", "m2", "m0"}},
			{review.Filter{Rule: "required"}, all},
			{review.Filter{Rule: "enum"}, []string{"m6", "m3", "m0"}},
			{review.Filter{Rule: "required", Route: "b"}, []string{"m7", "m5", "m3", "m1"}},
		} {
			items, _, err := s.List(ctx(), c.f)
			must(t, err)
			eq(t, fmt.Sprintf("%+v", c.f), ids(items), c.want)
			f, paged := c.f, []string{}
			f.Limit = 2
			for range 10 {
				items, next, err := s.List(ctx(), f)
				must(t, err)
				paged = append(paged, ids(items)...)
				if next == "" {
					break
				}
				f.Cursor = next
			}
			eq(t, fmt.Sprintf("%+v by pages of 2", c.f), paged, c.want)
		}
		var got []string
		must(t, s.Export(ctx(), review.ExportFilter{Status: review.StatusPending}, func(it *review.Item) error {
			got = append(got, it.ID)
			return nil
		}))
		eq(t, "pending export", got, []string{"m6", "m3", "m0"})
		got = nil
		must(t, s.Export(ctx(), review.ExportFilter{Status: review.StatusRejected, Since: base.Add(time.Hour - 5*time.Second)}, func(it *review.Item) error {
			got = append(got, it.ID)
			return nil
		}))
		eq(t, "rejected export, latest resolution first", got, []string{"m2", "m5"})
		recs, err := s.RecentDedupe(ctx(), base.Add(2*time.Second), base, 4)
		must(t, err)
		got = nil
		for _, r := range recs {
			got = append(got, r.ID)
		}
		eq(t, "dedupe poll, oldest first", got, []string{"m2", "m3", "m4", "m5"})
	}},
	{"resolve approves once; the second is ErrAlreadyResolved and changes nothing", func(t *testing.T, s review.Store) {
		create(t, s, NewItem("r1", "a", base))
		at := base.Add(time.Hour)
		it, err := s.Resolve(ctx(), "r1", approve(at))
		must(t, err)
		eq(t, "status", it.Status, review.StatusApproved)
		eq(t, "resolved_at", it.ResolvedAt, at)
		eq(t, "resolution", it.Resolution, approve(at).Resolution)
		_, err = s.Resolve(ctx(), "r1", review.Resolve{Status: review.StatusRejected, At: at.Add(time.Hour), Resolution: review.Resolution{By: review.ByReviewer, Reviewer: "bob"}})
		if !errors.Is(err, review.ErrAlreadyResolved) {
			t.Fatalf("second resolve: %v", err)
		}
		got, _ := s.Get(ctx(), "r1")
		eq(t, "after", got.Resolution.Reviewer, "ann")
		eq(t, "status after", got.Status, review.StatusApproved)
	}},
	{"resolve unknown is ErrNotFound; bad status refused", func(t *testing.T, s review.Store) {
		if _, err := s.Resolve(ctx(), "nope", approve(base)); !errors.Is(err, review.ErrNotFound) {
			t.Fatalf("got %v", err)
		}
		create(t, s, NewItem("r1", "a", base))
		if _, err := s.Resolve(ctx(), "r1", review.Resolve{Status: review.StatusPending, At: base}); err == nil {
			t.Fatal("resolve to pending accepted")
		}
	}},
	{"50 concurrent resolutions: exactly one wins", func(t *testing.T, s review.Store) {
		create(t, s, NewItem("r1", "a", base))
		var wins, lost atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < 50; i++ {
			wg.Go(func() {
				r := approve(base.Add(time.Duration(i) * time.Second))
				r.Resolution.Reviewer = fmt.Sprint("r", i)
				_, err := s.Resolve(ctx(), "r1", r)
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, review.ErrAlreadyResolved):
					lost.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 || lost.Load() != 49 {
			t.Fatalf("wins %d lost %d", wins.Load(), lost.Load())
		}
	}},
	{"append attempts keeps order, feeds the rule filter, refused once resolved", func(t *testing.T, s review.Store) {
		create(t, s, NewItem("r1", "a", base))
		extra := []review.Attempt{{AttemptReport: review.AttemptReport{Attempt: 3, Temperature: 0.7, Violations: []contracts.Violation{{Kind: "policy", Rule: "questions"}}}, Output: "x"}}
		it, err := s.AppendAttempts(ctx(), "r1", extra)
		must(t, err)
		eq(t, "attempt numbers", []int{it.Attempts[0].Attempt, it.Attempts[1].Attempt, it.Attempts[2].Attempt}, []int{1, 2, 3})
		items, _, err := s.List(ctx(), review.Filter{Rule: "questions"})
		must(t, err)
		eq(t, "rule", ids(items), []string{"r1"})
		items, _, err = s.List(ctx(), review.Filter{Rule: "questions", Route: "a", Contract: "k_a", Status: review.StatusPending})
		must(t, err)
		eq(t, "appended rule with the other filters", ids(items), []string{"r1"})
		_, err = s.Resolve(ctx(), "r1", approve(base))
		must(t, err)
		items, _, err = s.List(ctx(), review.Filter{Rule: "questions", Status: review.StatusPending})
		must(t, err)
		eq(t, "resolved item leaves the pending rule list", ids(items), []string{})
		items, _, err = s.List(ctx(), review.Filter{Rule: "questions", Status: review.StatusApproved})
		must(t, err)
		eq(t, "resolved item in the approved rule list", ids(items), []string{"r1"})
		if _, err := s.AppendAttempts(ctx(), "r1", extra); !errors.Is(err, review.ErrAlreadyResolved) {
			t.Fatalf("append after resolve: %v", err)
		}
		if _, err := s.AppendAttempts(ctx(), "nope", extra); !errors.Is(err, review.ErrNotFound) {
			t.Fatalf("append unknown: %v", err)
		}
	}},
	{"appended attempts continue the stored numbering, whatever the caller read", func(t *testing.T, s review.Store) {
		// Two reruns that read the item at once both number their attempts
		// 3 and 4; the second to land continues at 5, as a rerun that
		// ends in a resolution does after them.
		create(t, s, NewItem("r1", "a", base))
		stale := func(out string) []review.Attempt {
			return []review.Attempt{
				{AttemptReport: review.AttemptReport{Attempt: 3, Violations: []contracts.Violation{}}, Output: out + "3"},
				{AttemptReport: review.AttemptReport{Attempt: 4, Violations: []contracts.Violation{}}, Output: out + "4"},
			}
		}
		_, err := s.AppendAttempts(ctx(), "r1", stale("a"))
		must(t, err)
		in := stale("b")
		it, err := s.AppendAttempts(ctx(), "r1", in)
		must(t, err)
		if in[0].Attempt != 3 {
			t.Fatal("the caller's attempts were changed")
		}
		r := approve(base)
		r.Resolution.By = review.ByRerun
		r.Attempts = stale("c")[:1]
		it, err = s.Resolve(ctx(), "r1", r)
		must(t, err)
		var nums []int
		var outs []string
		for _, a := range it.Attempts {
			nums, outs = append(nums, a.Attempt), append(outs, a.Output)
		}
		eq(t, "attempt numbers", nums, []int{1, 2, 3, 4, 5, 6, 7})
		eq(t, "outputs in order", outs[2:], []string{"a3", "a4", "b3", "b4", "c3"})
	}},
	{"resolve with attempts appends them (rerun)", func(t *testing.T, s review.Store) {
		create(t, s, NewItem("r1", "a", base))
		r := approve(base)
		r.Resolution.By = review.ByRerun
		r.Attempts = []review.Attempt{{AttemptReport: review.AttemptReport{Attempt: 3, Violations: []contracts.Violation{}}, Output: `{"ok":true}`}}
		it, err := s.Resolve(ctx(), "r1", r)
		must(t, err)
		if len(it.Attempts) != 3 || it.Resolution.By != review.ByRerun {
			t.Fatalf("%+v", it)
		}
	}},
	{"pending counts per route", func(t *testing.T, s review.Store) {
		create(t, s, NewItem("a1", "a", base), NewItem("a2", "a", base), NewItem("b1", "b", base))
		_, err := s.Resolve(ctx(), "a1", approve(base))
		must(t, err)
		got, err := s.Pending(ctx())
		must(t, err)
		eq(t, "pending", got, map[string]int{"a": 1, "b": 1})
	}},
	{"retention deletes resolved items only", func(t *testing.T, s review.Store) {
		create(t, s, NewItem("old", "a", base), NewItem("new", "a", base), NewItem("pend", "a", base.Add(-1000*time.Hour)))
		_, err := s.Resolve(ctx(), "old", approve(base))
		must(t, err)
		_, err = s.Resolve(ctx(), "new", approve(base.Add(48*time.Hour)))
		must(t, err)
		n, err := s.DeleteResolvedBefore(ctx(), base.Add(24*time.Hour))
		must(t, err)
		eq(t, "deleted", n, 1)
		if _, err := s.Get(ctx(), "old"); !errors.Is(err, review.ErrNotFound) {
			t.Fatal("old survived")
		}
		for _, id := range []string{"new", "pend"} {
			if _, err := s.Get(ctx(), id); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
		}
		items, _, err := s.List(ctx(), review.Filter{Rule: "required"})
		must(t, err)
		eq(t, "rule index follows deletes", ids(items), []string{"new", "pend"})
	}},
	{"export streams by filter with output", func(t *testing.T, s review.Store) {
		create(t, s, NewItem("a1", "a", base), NewItem("a2", "a", base), NewItem("b1", "b", base))
		_, err := s.Resolve(ctx(), "a1", approve(base.Add(time.Hour)))
		must(t, err)
		_, err = s.Resolve(ctx(), "b1", approve(base.Add(2*time.Hour)))
		must(t, err)
		var got []string
		must(t, s.Export(ctx(), review.ExportFilter{Status: review.StatusApproved}, func(it *review.Item) error {
			got = append(got, it.ID)
			if it.Resolution == nil || string(it.Resolution.Output) != `{"ok":true}` {
				t.Errorf("%s: resolution %+v", it.ID, it.Resolution)
			}
			return nil
		}))
		eq(t, "approved", got, []string{"b1", "a1"})
		got = nil
		must(t, s.Export(ctx(), review.ExportFilter{Status: review.StatusApproved, Route: "a"}, func(it *review.Item) error {
			got = append(got, it.ID)
			return nil
		}))
		eq(t, "route a", got, []string{"a1"})
		got = nil
		must(t, s.Export(ctx(), review.ExportFilter{Status: review.StatusApproved, Since: base.Add(90 * time.Minute)}, func(it *review.Item) error {
			got = append(got, it.ID)
			return nil
		}))
		eq(t, "since", got, []string{"b1"})
		stop := errors.New("stop")
		if err := s.Export(ctx(), review.ExportFilter{}, func(*review.Item) error { return stop }); !errors.Is(err, stop) {
			t.Fatalf("callback error not returned: %v", err)
		}
	}},
	{"export pages through items resolved at the same instant, each once", func(t *testing.T, s review.Store) {
		// The suite's stores read 2 items per export query
		// (review.SmallBatches): 7 approved items, 5 of them resolved
		// at one instant, take four pages, three ending inside the tie.
		at := base.Add(time.Hour)
		for i := range 8 {
			id := fmt.Sprintf("e%d", i)
			create(t, s, NewItem(id, "a", base.Add(time.Duration(i)*time.Second)))
			r := approve(at)
			switch {
			case i == 5:
				r.At = base.Add(2 * time.Hour)
			case i == 6:
				r.At = base.Add(30 * time.Minute)
			case i == 7:
				r.Status = review.StatusRejected
			}
			_, err := s.Resolve(ctx(), id, r)
			must(t, err)
		}
		create(t, s, NewItem("p", "a", base.Add(3*time.Hour)))
		var got []string
		must(t, s.Export(ctx(), review.ExportFilter{Status: review.StatusApproved}, func(it *review.Item) error {
			got = append(got, it.ID)
			return nil
		}))
		eq(t, "approved", got, []string{"e5", "e4", "e3", "e2", "e1", "e0", "e6"})
		got = nil
		must(t, s.Export(ctx(), review.ExportFilter{}, func(it *review.Item) error {
			got = append(got, it.ID)
			return nil
		}))
		eq(t, "all", got, []string{"p", "e5", "e7", "e4", "e3", "e2", "e1", "e0", "e6"})
	}},
	{"webhook outbox: written with the change, claimed once per lease, finished", func(t *testing.T, s review.Store) {
		it := NewItem("r1", "a", base)
		_, err := s.Create(ctx(), it, true)
		must(t, err)
		r := approve(base)
		r.Webhook = true
		_, err = s.Resolve(ctx(), "r1", r)
		must(t, err)
		now := time.Now()
		ds, err := s.ClaimDeliveries(ctx(), now, 10, time.Minute)
		must(t, err)
		if len(ds) != 2 {
			t.Fatalf("%d deliveries", len(ds))
		}
		types := map[review.WebhookEvent]bool{}
		for _, d := range ds {
			types[d.Type] = true
			var body struct {
				Type   review.WebhookEvent `json:"type"`
				Review *review.Item        `json:"review"`
			}
			must(t, json.Unmarshal(d.Body, &body))
			if body.Type != d.Type || body.Review.ID != "r1" || body.Review.Request != nil || d.ReviewID != "r1" {
				t.Fatalf("body %s", d.Body)
			}
			if d.Type == review.EventResolved && body.Review.Status != review.StatusApproved {
				t.Fatalf("resolved body %s", d.Body)
			}
		}
		if !types[review.EventCreated] || !types[review.EventResolved] {
			t.Fatalf("types %v", types)
		}
		again, err := s.ClaimDeliveries(ctx(), now, 10, time.Minute)
		must(t, err)
		if len(again) != 0 {
			t.Fatal("claimed twice within the lease")
		}
		must(t, s.FinishDelivery(ctx(), ds[0].ID, true, time.Time{}))
		must(t, s.FinishDelivery(ctx(), ds[1].ID, false, now.Add(time.Second)))
		later, err := s.ClaimDeliveries(ctx(), now.Add(2*time.Second), 10, time.Minute)
		must(t, err)
		if len(later) != 1 || later[0].ID != ds[1].ID || later[0].Tries != 1 {
			t.Fatalf("after retry: %+v", later)
		}
	}},
	{"dedupe: recent open windows, oldest first, from since on, never after they end", func(t *testing.T, s review.Store) {
		it := NewItem("r1", "a", base)
		until := base.Add(time.Minute)
		it.Dedupe = &review.Dedupe{Key: "k1", Until: until, Answer: json.RawMessage(`{"error":{"code":"contract_violation"}}`)}
		later := NewItem("r2", "a", base.Add(time.Second))
		later.Dedupe = &review.Dedupe{Key: "k2", Until: base.Add(time.Hour), Answer: json.RawMessage(`{"n":2}`)}
		create(t, s, later, NewItem("plain", "a", base), it)
		recs, err := s.RecentDedupe(ctx(), base, base.Add(59*time.Second), 10)
		must(t, err)
		// Each record carries what the proxy renders its answer from:
		// the item's route, contract name and stored attempts.
		for i, want := range []*review.Item{it, later} {
			if i >= len(recs) {
				break
			}
			var atts []review.Attempt
			must(t, json.Unmarshal(recs[i].Attempts, &atts))
			eq(t, "attempts of "+want.ID, atts, want.Attempts)
			recs[i].Attempts = nil
		}
		eq(t, "records", recs, []review.DedupeRecord{
			{ID: "r1", CreatedAt: base, Route: "a", Contract: "k_a", Dedupe: *it.Dedupe},
			{ID: "r2", CreatedAt: base.Add(time.Second), Route: "a", Contract: "k_a", Dedupe: *later.Dedupe},
		})
		// A rerun's attempts follow the item's first ones.
		more := []review.Attempt{{AttemptReport: review.AttemptReport{Attempt: 3, FinishReason: "length"}, Output: "{"}}
		_, err = s.AppendAttempts(ctx(), "r1", more)
		must(t, err)
		recs, err = s.RecentDedupe(ctx(), base, base, 1)
		must(t, err)
		var atts []review.Attempt
		if len(recs) == 1 {
			must(t, json.Unmarshal(recs[0].Attempts, &atts))
		}
		eq(t, "attempts after a rerun", atts, append(slices.Clone(it.Attempts), more...))
		for _, c := range []struct {
			since, now time.Time
			limit      int
			want       []string
		}{
			{base, until, 10, []string{"r2"}},                 // r1's window ended
			{base.Add(time.Second), base, 10, []string{"r2"}}, // since bounds creation
			{base.Add(2 * time.Second), base, 10, []string{}}, // nothing newer
			{base, base, 1, []string{"r1"}},                   // limit, oldest first
			{base.Add(-time.Hour), base.Add(2 * time.Hour), 10, []string{}},
		} {
			recs, err := s.RecentDedupe(ctx(), c.since, c.now, c.limit)
			must(t, err)
			got := []string{}
			for _, r := range recs {
				got = append(got, r.ID)
			}
			eq(t, fmt.Sprintf("since %v now %v limit %d", c.since, c.now, c.limit), got, c.want)
		}
		got, err := s.Get(ctx(), "r1")
		must(t, err)
		if got.Dedupe != nil {
			t.Fatal("Get returns the dedupe answer: it is no part of the item")
		}
	}},
	{"retention deletes every expired item over several batches", func(t *testing.T, s review.Store) {
		// The suite's stores delete 3 items per retention batch
		// (review.SmallBatches): 5 approved and 4 rejected items
		// past retention take several batches of each status, one a
		// full batch exactly.
		var old []string
		for i := range 9 {
			id := fmt.Sprintf("old%d", i)
			old = append(old, id)
			create(t, s, NewItem(id, "a", base.Add(time.Duration(i)*time.Minute), "required", "enum"))
			r := approve(base.Add(time.Duration(i) * time.Minute))
			if i >= 5 {
				r.Status = review.StatusRejected
			}
			_, err := s.Resolve(ctx(), id, r)
			must(t, err)
		}
		create(t, s, NewItem("new", "a", base, "required", "enum"), NewItem("pend", "a", base.Add(-1000*time.Hour), "required", "enum"))
		_, err := s.Resolve(ctx(), "new", approve(base.Add(48*time.Hour)))
		must(t, err)
		n, err := s.DeleteResolvedBefore(ctx(), base.Add(24*time.Hour))
		must(t, err)
		eq(t, "deleted", n, 9)
		for _, id := range old {
			if _, err := s.Get(ctx(), id); !errors.Is(err, review.ErrNotFound) {
				t.Fatalf("%s survived: %v", id, err)
			}
		}
		for _, f := range []review.Filter{{}, {Rule: "enum"}, {Rule: "required", Status: review.StatusApproved}} {
			items, _, err := s.List(ctx(), f)
			must(t, err)
			want := []string{"new", "pend"}
			if f.Status == review.StatusApproved {
				want = []string{"new"}
			}
			eq(t, fmt.Sprintf("left after retention (%+v)", f), ids(items), want)
		}
		n, err = s.DeleteResolvedBefore(ctx(), base.Add(24*time.Hour))
		must(t, err)
		eq(t, "deleted by a second pass", n, 0)
	}},
	{"dedupe: resolution does not end a window; retention does", func(t *testing.T, s review.Store) {
		it := NewItem("r1", "a", base)
		it.Dedupe = &review.Dedupe{Key: "k", Until: base.Add(90 * time.Second), Answer: json.RawMessage(`{"n":1}`)}
		create(t, s, it)
		_, err := s.Resolve(ctx(), "r1", approve(base.Add(time.Second)))
		must(t, err)
		recs, err := s.RecentDedupe(ctx(), base, base.Add(2*time.Second), 10)
		must(t, err)
		eq(t, "after resolve", len(recs), 1)
		_, err = s.DeleteResolvedBefore(ctx(), base.Add(time.Hour))
		must(t, err)
		recs, err = s.RecentDedupe(ctx(), base, base.Add(3*time.Second), 10)
		must(t, err)
		eq(t, "after retention", len(recs), 0)
	}},
	{"dedupe: a repeated create of the id keeps the first answer", func(t *testing.T, s review.Store) {
		it := NewItem("r1", "a", base)
		it.Dedupe = &review.Dedupe{Key: "k", Until: base.Add(time.Minute), Answer: json.RawMessage(`{"n":1}`)}
		create(t, s, it)
		again := NewItem("r1", "a", base)
		again.Dedupe = &review.Dedupe{Key: "k2", Until: base.Add(time.Hour), Answer: json.RawMessage(`{"n":2}`)}
		ok, err := s.Create(ctx(), again, false)
		must(t, err)
		if ok {
			t.Fatal("second create reported created")
		}
		recs, err := s.RecentDedupe(ctx(), base, base, 10)
		must(t, err)
		if len(recs) != 1 || recs[0].Key != "k" || string(recs[0].Answer) != `{"n":1}` {
			t.Fatalf("%+v", recs)
		}
	}},
	{"webhook outbox: deliveries created before a time are purged, in batches, whatever their state", func(t *testing.T, s review.Store) {
		for i := range 3 {
			_, err := s.Create(ctx(), NewItem(fmt.Sprintf("old%d", i), "a", base), true)
			must(t, err)
		}
		// One old delivery claimed (leased) and one retried: both go too.
		claimed, err := s.ClaimDeliveries(ctx(), time.Now(), 2, time.Minute)
		must(t, err)
		if len(claimed) != 2 {
			t.Fatalf("claimed %d", len(claimed))
		}
		must(t, s.FinishDelivery(ctx(), claimed[1].ID, false, time.Now().Add(time.Hour)))
		time.Sleep(2 * time.Millisecond)
		cut := time.Now()
		time.Sleep(2 * time.Millisecond)
		for i := range 4 {
			_, err := s.Create(ctx(), NewItem(fmt.Sprintf("new%d", i), "a", base), true)
			must(t, err)
		}
		n, err := s.DeleteDeliveriesBefore(ctx(), cut)
		must(t, err)
		if n != 3 {
			t.Fatalf("purged %d, want the 3 created before the cut", n)
		}
		left, err := s.ClaimDeliveries(ctx(), time.Now().Add(2*time.Hour), 100, time.Minute)
		must(t, err)
		var ids []string
		for _, d := range left {
			if d.CreatedAt.Before(cut) {
				t.Errorf("delivery %s of %s created %v, before the cut, was kept", d.ID, d.ReviewID, d.CreatedAt)
			}
			ids = append(ids, d.ReviewID)
		}
		sort.Strings(ids)
		eq(t, "kept", ids, []string{"new0", "new1", "new2", "new3"})
		// More than one batch (SmallBatches: 3), and nothing left to purge.
		n, err = s.DeleteDeliveriesBefore(ctx(), time.Now().Add(3*time.Hour))
		must(t, err)
		if n != 4 {
			t.Fatalf("purged %d, want 4", n)
		}
		n, err = s.DeleteDeliveriesBefore(ctx(), time.Now().Add(3*time.Hour))
		must(t, err)
		if n != 0 {
			t.Fatalf("purged %d of an empty outbox", n)
		}
		// The items stay.
		if _, err := s.Get(ctx(), "old0"); err != nil {
			t.Fatal(err)
		}
	}},
	{"no webhook rows without webhook", func(t *testing.T, s review.Store) {
		create(t, s, NewItem("r1", "a", base))
		ds, err := s.ClaimDeliveries(ctx(), time.Now().Add(time.Hour), 10, time.Minute)
		must(t, err)
		if len(ds) != 0 {
			t.Fatalf("%d deliveries", len(ds))
		}
	}},
}

// Run runs every behaviour against a fresh store from open. open must
// register the store's cleanup (Close) with t.
func Run(t *testing.T, open func(t *testing.T) review.Store) {
	for _, b := range behaviours {
		t.Run(b.name, func(t *testing.T) {
			b.run(t, open(t))
		})
	}
}
