// Package review keeps every needs_review answer as a work item a person can
// see, correct, approve, reject or rerun. The Store interface is small on
// purpose: the proxy, the admin endpoints and every backend (the embedded
// SQLite file here, PostgreSQL for several replicas) share one behaviour,
// checked by the suite in review/storetest.
package review

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/contracts"
)

// Status of an item.
type Status string

// Statuses an item moves through: pending, then approved or rejected once.
const (
	StatusPending  Status = "pending"
	StatusApproved Status = "approved"
	StatusRejected Status = "rejected"
)

// Valid reports whether s is one of the three statuses.
func (s Status) Valid() bool {
	return s == StatusPending || s == StatusApproved || s == StatusRejected
}

// ResolvedBy says who resolved an item.
type ResolvedBy string

// Who resolved an item.
const (
	ByReviewer ResolvedBy = "reviewer"
	ByRerun    ResolvedBy = "rerun"
)

// Ref names a prompt or contract and the hash of its definition.
type Ref = audit.Ref

// AttemptReport is one attempt as the 422 reports it to the client
// (proxy.ReviewAttempt): one type, so the stored item and the 422 agree.
type AttemptReport struct {
	Attempt      int                   `json:"attempt"`
	Temperature  float64               `json:"temperature"`
	Shortened    bool                  `json:"shortened"`
	FinishReason string                `json:"finish_reason"`
	Usage        audit.Usage           `json:"usage"`
	Violations   []contracts.Violation `json:"violations"`
}

// Attempt is one attempt as the 422 reports it, plus the model's output
// text. encoding/json inlines the embedded report: the stored JSON is flat.
type Attempt struct {
	AttemptReport
	OutputSHA256 string `json:"output_sha256"`
	Output       string `json:"output"`
}

// Resolution says who resolved an item and, when approved, the output.
type Resolution struct {
	By       ResolvedBy      `json:"by"`
	Reviewer string          `json:"reviewer"`
	Note     string          `json:"note"`
	Output   json.RawMessage `json:"output"` // the approved JSON object; null when rejected
}

// Item is one review case. Request is nil in list results.
type Item struct {
	ID         string          `json:"id"`
	Status     Status          `json:"status"`
	CreatedAt  time.Time       `json:"created_at"`
	ResolvedAt *time.Time      `json:"resolved_at"`
	Route      string          `json:"route"`
	Prompt     Ref             `json:"prompt"`
	Contract   Ref             `json:"contract"`
	KeyID      string          `json:"key_id"`
	Input      json.RawMessage `json:"input"`
	Request    json.RawMessage `json:"request,omitempty"`
	Attempts   []Attempt       `json:"attempts"`
	Resolution *Resolution     `json:"resolution"`
	// Dedupe is set on a new item when review.dedupe_window is on. It is
	// no part of the item's JSON shape (admin, webhook); the spool keeps it.
	Dedupe *Dedupe `json:"-"`
}

// Rules lists the distinct violation rules of every attempt, in first-seen
// order: what the rule= filter matches.
func (it *Item) Rules() []string {
	return rulesOf(it.Attempts, nil)
}

func rulesOf(atts []Attempt, seen map[string]bool) []string {
	if seen == nil {
		seen = map[string]bool{}
	}
	var out []string
	for _, a := range atts {
		for _, v := range a.Violations {
			if !seen[v.Rule] {
				seen[v.Rule] = true
				out = append(out, v.Rule)
			}
		}
	}
	return out
}

// Errors every Store returns (wrapped or not) for the caller to map.
var (
	ErrNotFound        = errors.New("review not found")
	ErrAlreadyResolved = errors.New("review already resolved")
	ErrBadCursor       = errors.New("bad cursor")
)
