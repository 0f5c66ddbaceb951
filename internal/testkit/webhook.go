package testkit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// WebhookReceiver is a review webhook endpoint. It checks that every post
// carries a delivery id (X-Contractd-Delivery) and is signed with the
// secret (X-Contractd-Signature: "sha256=" and the hex HMAC-SHA256 of the
// body), and counts the posts by delivery id and by event: "<type>
// <review id>" ("review.created req_…"), so that a test counts each event
// once however often it was retried. It answers 204, or 503 while
// refusing.
type WebhookReceiver struct {
	URL    string
	secret []byte

	mu         sync.Mutex
	refuse     bool
	deliveries map[string]int // accepted posts by delivery id
	delivered  map[string]int // accepted posts by event
	refused    map[string]int // refused posts by event
	unsigned   int
}

// NewWebhookReceiver starts a receiver for deliveries signed with secret;
// it is closed when t ends.
func NewWebhookReceiver(t testing.TB, secret string) *WebhookReceiver {
	h := &WebhookReceiver{secret: []byte(secret), deliveries: map[string]int{},
		delivered: map[string]int{}, refused: map[string]int{}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	h.URL = srv.URL
	return h
}

func (h *WebhookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m := hmac.New(sha256.New, h.secret)
	m.Write(body)
	delivery := r.Header.Get("X-Contractd-Delivery")
	event := webhookEvent(body)
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Header.Get("X-Contractd-Signature") != "sha256="+hex.EncodeToString(m.Sum(nil)) || delivery == "" {
		h.unsigned++
	}
	if h.refuse {
		h.refused[event]++
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	h.deliveries[delivery]++
	h.delivered[event]++
	w.WriteHeader(http.StatusNoContent)
}

// webhookEvent names a delivery by what it reports: "<type> <review id>".
func webhookEvent(body []byte) string {
	var ev struct {
		Type   string `json:"type"`
		Review struct {
			ID string `json:"id"`
		} `json:"review"`
	}
	_ = json.Unmarshal(body, &ev)
	return ev.Type + " " + ev.Review.ID
}

// Refuse makes the receiver answer 503 to every post, or with false
// accept them again.
func (h *WebhookReceiver) Refuse(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refuse = on
}

// Delivered is how many times event ("review.created req_…") was accepted.
func (h *WebhookReceiver) Delivered(event string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.delivered[event]
}

// Refused is how many times event was posted and refused.
func (h *WebhookReceiver) Refused(event string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused[event]
}

// Unsigned is how many posts had no valid signature or no delivery id.
func (h *WebhookReceiver) Unsigned() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.unsigned
}

// Accepted returns copies of the accepted posts' counts by delivery id and
// by event.
func (h *WebhookReceiver) Accepted() (byDelivery, byEvent map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.deliveries), maps.Clone(h.delivered)
}
