package openaigo_test

import (
	"errors"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestModels: Models.List and Models.Get decode the routes as the SDK's
// Model, with every member it requires.
func TestModels(t *testing.T) {
	t.Parallel()
	s := serve(t, "", "")
	client := s.client()
	page, err := client.Models.List(ctx20(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	ids := map[string]bool{}
	for _, m := range page.Data {
		ids[m.ID] = true
		if miss := missingRequired(m); len(miss) > 0 {
			t.Errorf("model %s lacks %v: %s", m.ID, miss, m.RawJSON())
		}
	}
	if !ids[goodRoute] || !ids[badRoute] {
		t.Errorf("models %v, want the routes", ids)
	}
	m, err := client.Models.Get(ctx20(t), goodRoute)
	if err != nil || m.ID != goodRoute || m.Object != "model" {
		t.Fatalf("Get: %+v, %v", m, err)
	}
	if miss := missingRequired(*m); len(miss) > 0 {
		t.Errorf("model lacks %v: %s", miss, m.RawJSON())
	}
	_, err = client.Models.Get(ctx20(t), "no-such-route")
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 404 || e.Code != "model_not_found" {
		t.Errorf("Get of an unknown route: %v", err)
	}
}
