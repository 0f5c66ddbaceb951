package openaigo_test

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

func responseParams(route string) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model: route,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(input(text))},
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
			OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "sentiment", Schema: routeSchema(), Strict: openai.Bool(true)}}},
	}
}

// sdkOnly are members the SDK's types require that describe OpenAI's own
// service and have no meaning for contractd: access_programs is the
// OpenAI access program a response was served under.
var sdkOnly = []string{".access_programs"}

func missingRequiredExcept(v any) []string {
	var out []string
	for _, p := range missingRequired(v) {
		if !slices.ContainsFunc(sdkOnly, func(s string) bool { return strings.HasSuffix(p, s) }) {
			out = append(out, p)
		}
	}
	return out
}

var echoMetadata = shared.Metadata{"team": "billing", "ticket": "T-1"}

// checkEcho: the response (as the SDK decoded it) echoes the request as
// used: metadata and top_p as sent, temperature the accepted attempt's
// (used: what the upstream got), instructions null (the route drops them).
func checkEcho(t *testing.T, where string, r *responses.Response, used any) {
	t.Helper()
	if !maps.Equal(r.Metadata, echoMetadata) || !r.JSON.Metadata.Valid() {
		t.Errorf("%s: metadata %v", where, r.Metadata)
	}
	if r.TopP != 0.25 || !r.JSON.TopP.Valid() {
		t.Errorf("%s: top_p %v (%s)", where, r.TopP, r.JSON.TopP.Raw())
	}
	if u, ok := used.(float64); !ok || r.Temperature != u || !r.JSON.Temperature.Valid() || u == 1.7 {
		t.Errorf("%s: temperature %v (%s), the accepted attempt's %v", where, r.Temperature, r.JSON.Temperature.Raw(), used)
	}
	if raw := r.JSON.Instructions.Raw(); raw != "null" {
		t.Errorf("%s: instructions %s", where, raw)
	}
}

// TestResponses: the SDK's Responses API calls (create with text.format
// json_schema, the streamed events, store accepted and
// previous_response_id refused) against a contract route.
func TestResponses(t *testing.T) {
	t.Parallel()
	s := serve(t, "", "")
	client := s.client()

	t.Run("create", func(t *testing.T) {
		var res *http.Response
		p := responseParams(goodRoute)
		p.Store = openai.Bool(true) // accepted; contractd keeps nothing for later turns
		// echoed as used: metadata and top_p as sent, temperature the
		// accepted attempt's (the route's, not the client's)
		p.Metadata = echoMetadata
		p.TopP = openai.Float(0.25)
		p.Temperature = openai.Float(1.7)
		r, err := client.Responses.New(ctx20(t), p, option.WithResponseInto(&res))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if r.OutputText() != goodContent {
			t.Fatalf("OutputText %q", r.OutputText())
		}
		var got sentiment
		if err := json.Unmarshal([]byte(r.OutputText()), &got); err != nil || got.Sentiment != "positive" {
			t.Errorf("output %q: %v", r.OutputText(), err)
		}
		if r.ID != "resp_"+res.Header.Get("X-Request-Id") || r.Object != "response" || r.Status != "completed" ||
			r.Model != "fake-good-2024-01-01" || r.CreatedAt == 0 {
			t.Errorf("id %q object %q status %q model %q created_at %v", r.ID, r.Object, r.Status, r.Model, r.CreatedAt)
		}
		if r.Usage.InputTokens != 50 || r.Usage.OutputTokens != 10 || r.Usage.TotalTokens != 60 {
			t.Errorf("usage %+v", r.Usage)
		}
		if len(r.Output) != 1 || r.Output[0].Type != "message" {
			t.Fatalf("output %+v", r.Output)
		}
		msg := r.Output[0].AsMessage()
		if msg.Role != "assistant" || msg.Status != "completed" || len(msg.Content) != 1 || msg.Content[0].AsOutputText().Text != goodContent {
			t.Errorf("message %+v", msg)
		}
		if _, ok := r.JSON.ExtraFields["contract"]; !ok {
			t.Errorf("no contract member")
		}
		if m := missingRequiredExcept(r); len(m) > 0 {
			t.Errorf("the response lacks members the SDK's Response requires: %v\n%s", m, r.RawJSON())
		}
		if res.Header.Get("X-Contract-Route") != goodRoute || res.Header.Get("X-Contract-Attempts") != "1" ||
			res.Header.Get("X-Contract-Schema-Replaced") != "" {
			t.Errorf("headers %v", res.Header)
		}
		// contractd ran the chat attempt plan upstream.
		last := s.up.Calls()[len(s.up.Calls())-1]
		if last.Path != "/v1/chat/completions" || last.JSON["model"] != "fake-good" {
			t.Errorf("upstream %s %v", last.Path, last.JSON["model"])
		}
		checkEcho(t, "create", r, last.JSON["temperature"])
	})

	t.Run("stream", func(t *testing.T) {
		p := responseParams(goodRoute)
		p.Metadata = echoMetadata
		p.TopP = openai.Float(0.25)
		stream := client.Responses.NewStreaming(ctx20(t), p)
		defer stream.Close()
		var types []string
		var deltas strings.Builder
		var completed responses.Response
		for stream.Next() {
			ev := stream.Current()
			if ev.SequenceNumber != int64(len(types)) {
				t.Errorf("event %d %s: sequence_number %d", len(types), ev.Type, ev.SequenceNumber)
			}
			types = append(types, ev.Type)
			var m []string
			switch e := ev.AsAny().(type) {
			case responses.ResponseCreatedEvent:
				m = missingRequiredExcept(e)
				if e.Response.Status != "in_progress" {
					t.Errorf("response.created status %q", e.Response.Status)
				}
				checkEcho(t, ev.Type, &e.Response, s.up.Calls()[len(s.up.Calls())-1].JSON["temperature"])
			case responses.ResponseInProgressEvent:
				m = missingRequiredExcept(e)
				checkEcho(t, ev.Type, &e.Response, s.up.Calls()[len(s.up.Calls())-1].JSON["temperature"])
			case responses.ResponseOutputItemAddedEvent, responses.ResponseContentPartAddedEvent,
				responses.ResponseContentPartDoneEvent, responses.ResponseOutputItemDoneEvent:
				m = missingRequired(e)
			case responses.ResponseTextDeltaEvent:
				m = missingRequired(e)
				deltas.WriteString(e.Delta)
			case responses.ResponseTextDoneEvent:
				m = missingRequired(e)
				if e.Text != goodContent {
					t.Errorf("output_text.done text %q", e.Text)
				}
			case responses.ResponseCompletedEvent:
				m = missingRequiredExcept(e)
				completed = e.Response
				checkEcho(t, ev.Type, &e.Response, s.up.Calls()[len(s.up.Calls())-1].JSON["temperature"])
			default:
				t.Errorf("event %s decoded as %T", ev.Type, e)
			}
			if len(m) > 0 {
				t.Errorf("%s lacks members the SDK requires: %v\n%s", ev.Type, m, ev.RawJSON())
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
			"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
			"response.completed"}
		if !slices.Equal(types, want) {
			t.Errorf("events %v\nwant %v", types, want)
		}
		if deltas.String() != goodContent || completed.OutputText() != goodContent || completed.Status != "completed" ||
			completed.Usage.TotalTokens != 60 {
			t.Errorf("deltas %q, completed %q %s usage %+v", deltas.String(), completed.OutputText(), completed.Status, completed.Usage)
		}
	})

	t.Run("needs_review", func(t *testing.T) {
		_, err := client.Responses.New(ctx20(t), responseParams(badRoute))
		assertNeedsReview(t, err)
		stream := client.Responses.NewStreaming(ctx20(t), responseParams(badRoute))
		defer stream.Close()
		for stream.Next() {
			t.Fatalf("an event on a needs_review route: %s", stream.Current().RawJSON())
		}
		assertNeedsReview(t, stream.Err())
	})

	// contractd keeps nothing for later turns: a response, stored or not,
	// cannot be retrieved, deleted, listed or cancelled by its id. Each
	// call is a typed 404 response_not_found whose message says why
	// (before: not_found, "no such endpoint").
	t.Run("retrieve, delete, input items and cancel by id", func(t *testing.T) {
		first, err := client.Responses.New(ctx20(t), responseParams(goodRoute))
		if err != nil {
			t.Fatal(err)
		}
		notStored := func(call string, err error) {
			t.Helper()
			var e *openai.Error
			if !errors.As(err, &e) || e.StatusCode != 404 || e.Type != "invalid_request_error" || e.Code != "response_not_found" ||
				!strings.Contains(e.Message, first.ID) || !strings.Contains(e.Message, "does not store responses") {
				t.Errorf("%s: %v, want 404 response_not_found naming %s", call, err, first.ID)
			}
		}
		_, err = client.Responses.Get(ctx20(t), first.ID, responses.ResponseGetParams{})
		notStored("Get", err)
		notStored("Delete", client.Responses.Delete(ctx20(t), first.ID))
		_, err = client.Responses.InputItems.List(ctx20(t), first.ID, responses.InputItemListParams{})
		notStored("InputItems.List", err)
		_, err = client.Responses.Cancel(ctx20(t), first.ID)
		notStored("Cancel", err)
	})

	// contractd keeps nothing for later turns, so a follow-up by
	// previous_response_id is refused, naming the parameter.
	t.Run("previous_response_id", func(t *testing.T) {
		first, err := client.Responses.New(ctx20(t), responseParams(goodRoute))
		if err != nil {
			t.Fatal(err)
		}
		p := responseParams(goodRoute)
		p.PreviousResponseID = openai.String(first.ID)
		_, err = client.Responses.New(ctx20(t), p)
		var e *openai.Error
		if !errors.As(err, &e) || e.StatusCode != 400 || e.Type != "invalid_request_error" || e.Code != "unsupported_parameter" ||
			e.Param != "previous_response_id" {
			t.Fatalf("previous_response_id: %v, want 400 unsupported_parameter on previous_response_id", err)
		}
	})
}
