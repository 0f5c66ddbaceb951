package proxy

import (
	"strings"
	"testing"
)

// Every needs_review 422 tells SDK retry loops to stop and names the review
// in error.message, on both edges; the whole body is golden (ids aside).
func TestNeedsReviewMessageAndNoRetry(t *testing.T) {
	tests := []struct {
		name, path, body, golden string
		up                       upHandler
		msg                      string // error.message with the id as ID
	}{
		{"root path", "", `{"model":"free","messages":[` + userHi + `]}`, "needs_review_free.json", always(invalidAnswer),
			"needs review ID: 2 attempts failed (prose_around_json at root); GET /v1/reviews/ID"},
		{"schema path", "", `{"model":"free","messages":[` + userHi + `]}`, "needs_review_path.json", always(`{"answer":"ok","extra":1}`),
			"needs review ID: 2 attempts failed (additionalProperties at /extra); GET /v1/reviews/ID"},
		{"responses edge", respPath, `{"model":"free","input":"hi"}`, "needs_review_responses.json", always(invalidAnswer),
			"needs review ID: 2 attempts failed (prose_around_json at root); GET /v1/reviews/ID"},
		{"budget before any attempt", "", `{"model":"broke","messages":[` + userHi + `]}`, "needs_review_budget.json", always(validAnswer),
			"needs review ID: 0 attempts failed (budget_exhausted at root); GET /v1/reviews/ID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.up, cfg{})
			r := h.post(tc.path, tc.body)
			if r.Status != 422 {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			if got := r.Header.Get("X-Should-Retry"); got != "false" {
				t.Errorf("x-should-retry %q, want false", got)
			}
			id := wantRequestID(t, r)
			if got, want := r.errorObj()["message"], strings.ReplaceAll(tc.msg, "ID", id); got != want {
				t.Errorf("message %q\n         want %q", got, want)
			}
			checkGolden(t, tc.golden, normIDs(r.Body))
		})
	}
}

// Other errors leave the SDK's own retry policy alone.
func TestShouldRetryOnlyOnNeedsReview(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{})
	for _, body := range []string{`{"model":"free","messages":[` + userHi + `]}`, `{"model":"nope","messages":[]}`, `{`} {
		if r := h.post("", body); r.Header.Get("X-Should-Retry") != "" {
			t.Errorf("%s: status %d carries x-should-retry %q", body, r.Status, r.Header.Get("X-Should-Retry"))
		}
	}
}
