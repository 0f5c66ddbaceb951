package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/e2e/goclient"
)

// TestGoOpenAISnippet runs the go-openai snippet docs/clients.md quotes
// (e2e/goclient) against the binary: a typed chat completion decodes the
// route's answer; a needs_review gives its code and review id through
// ReviewOf, although go-openai drops error.review; WaitReview, held on
// that id, returns the reviewer's approved output once an admin approves.
func TestGoOpenAISnippet(t *testing.T) {
	t.Parallel()
	f := newSDKFixture(t)
	client := goclient.NewClient(f.d.BaseURL(), clientKey)

	got, err := goclient.Classify(ctx20(t), client, "review-sentiment", "The delivery was fast and the food was great.")
	if err != nil || got != (goclient.Sentiment{Sentiment: "positive", Summary: "Fast delivery and great food."}) {
		t.Fatalf("Classify: %+v, %v", got, err)
	}

	_, err = goclient.Classify(ctx20(t), client, "review-always-bad", "Cold soup.")
	code, id, ok := goclient.ReviewOf(err)
	if !ok || code != "contract_violation" || !strings.HasPrefix(id, "req_") {
		t.Fatalf("ReviewOf(%v) = %q, %q, %v; want contract_violation and the review id", err, code, id, ok)
	}
	_, err = goclient.Classify(ctx20(t), client, "no-such-route", "Cold soup.")
	if _, _, ok := goclient.ReviewOf(err); ok || err == nil {
		t.Errorf("ReviewOf(%v) took an unknown route's 404 for a review", err)
	}

	type result struct {
		r   goclient.Review
		err error
	}
	waited := make(chan result, 1)
	go func() {
		r, err := goclient.WaitReview(ctx20(t), f.d.BaseURL(), clientKey, id, "30s")
		waited <- result{r, err}
	}()
	time.Sleep(200 * time.Millisecond) // the poll is held
	approve := `{"output": {"sentiment": "negative", "summary": "Cold soup."}, "reviewer": "ann"}`
	resp, err := http.Post("http://"+f.d.Admin+"/admin/reviews/"+id+"/approve", "application/json", strings.NewReader(approve))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("approve %s: status %d", id, resp.StatusCode)
	}
	res := <-waited
	if res.err != nil || res.r.ID != id || res.r.Status != "approved" || res.r.Resolution == nil ||
		!jsonEqual(res.r.Resolution.Output, []byte(`{"sentiment": "negative", "summary": "Cold soup."}`)) {
		t.Fatalf("WaitReview: %+v, %v; want the approval", res.r, res.err)
	}
	if _, err := goclient.WaitReview(ctx20(t), f.d.BaseURL(), clientKey, "req_nope", "1s"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("WaitReview of an unknown id: %v, want the 404", err)
	}
}
