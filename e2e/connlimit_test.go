package e2e

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// At max_connections, a keep-alive connection idle between requests is
// closed for a client waiting to connect, so a new client is served at
// once rather than after the idle timeout (2 minutes), while the idle
// connections of earlier clients hold every slot.
func TestMaxConnectionsIdleGivesWay(t *testing.T) {
	t.Parallel()
	d := startOneConnection(t)
	get := func(tr *http.Transport) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.BaseURL()+"/models", nil)
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			t.Errorf("GET /models: %d", resp.StatusCode)
		}
		return nil
	}
	// Two clients, each with its own keep-alive connection.
	a, b := &http.Transport{}, &http.Transport{}
	defer a.CloseIdleConnections()
	defer b.CloseIdleConnections()
	if err := get(a); err != nil {
		t.Fatal(err)
	}
	if err := get(b); err != nil {
		t.Fatalf("a second client while the only slot is an idle connection: %v (want it served at once)", err)
	}
	// And the first again: its connection was closed for b's, and b's
	// idle one now gives way to it.
	if err := get(a); err != nil {
		t.Fatalf("the first client again: %v", err)
	}
}
