package proxy

// Server.Swap under load (a request keeps the Runtime it started
// with): no request fails while runtimes are swapped, and an in-flight
// request finishes on its runtime even when the new one drops its route.

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/config"
)

func TestReloadUnderLoad(t *testing.T) {
	check := noLeaks(t)
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		time.Sleep(time.Millisecond)
		reply(w, 200, completion(validClassify, "stop", 3, 2))
	}, cfg{})
	rts := []cfg{{ClassifyTemp: "0.7"}, {ClassifyTemp: "0.25", MaxBody: 8192}, {ClassifyTemp: "1.5", Drop: []string{"raw", "tight"}}}
	var compiled []*config.Runtime
	for _, c := range rts {
		compiled = append(compiled, loadRuntime(t, h.up.URL(), c))
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	var mu sync.Mutex
	var failures []string
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				body := classifyReq
				if g%2 == 1 {
					body = `{"model":"classify","stream":true,"messages":[` + classifyMsg + `]}`
				}
				req, _ := http.NewRequest("POST", h.front.URL+"/v1/chat/completions", stringsReader(body))
				req.Header.Set("Authorization", "Bearer "+clientKey)
				resp, err := h.client.Do(req)
				if err != nil {
					failed.Add(1)
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					continue
				}
				drain(resp)
				if resp.StatusCode != 200 || resp.Header.Get("X-Contract-Attempts") != "1" {
					failed.Add(1)
					mu.Lock()
					failures = append(failures, fmt.Sprint(resp.StatusCode))
					mu.Unlock()
					continue
				}
				ok.Add(1)
			}
		})
	}
	// 400 ms and then until there were 20 swaps and 20 requests: on a
	// loaded machine each 2 ms sleep can last far longer and 400 ms held
	// as few as 10 swaps and 27 requests. 10 s bounds the wait.
	start := time.Now()
	swaps := 0
	for time.Since(start) < 400*time.Millisecond || (swaps < 20 || ok.Load() < 20) && time.Since(start) < 10*time.Second {
		h.srv.Swap(compiled[swaps%len(compiled)])
		swaps++
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Errorf("%d of %d requests failed during %d swaps: %v", failed.Load(), failed.Load()+ok.Load(), swaps, failures[:min(len(failures), 5)])
	}
	if ok.Load() < 20 || swaps < 20 {
		t.Errorf("too little load: %d requests, %d swaps", ok.Load(), swaps)
	}
	// Every runtime's temperature was used: requests ran on each.
	seen := map[float64]bool{}
	for _, c := range h.up.Calls() {
		seen[c.Temperature()] = true
	}
	for _, temp := range []float64{0.7, 0.25, 1.5} {
		if !seen[temp] {
			t.Errorf("no request ran at temperature %v", temp)
		}
	}
	h.Close()
	check()
}

func TestInFlightKeepsItsRuntime(t *testing.T) {
	inAttempt2 := make(chan struct{}, 1)
	release := make(chan struct{})
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		if c.Temperature() > 0 {
			reply(w, 200, completion(invalidClassify, "stop", 10, 5))
			return
		}
		// Attempt 2 waits while the runtime is swapped under it.
		inAttempt2 <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		reply(w, 200, completion(validClassify, "stop", 8, 4))
	}, cfg{})
	done := make(chan *result, 1)
	go func() { done <- h.post("", classifyReq) }()
	select {
	case <-inAttempt2:
	case <-time.After(3 * time.Second):
		t.Fatal("attempt 2 never started")
	}
	// The new runtime has no classify route (and a different body limit).
	h.reload(cfg{Drop: []string{"classify"}, MaxBody: 100})
	if r := h.post("", classifyReq); r.Status != 404 && r.Status != 413 {
		t.Errorf("new request on the new runtime: %d", r.Status)
	}
	if r := h.post("", `{"model":"classify"}`); r.Status != 404 {
		t.Errorf("new request for the dropped route: %d %s", r.Status, r.Body)
	}
	close(release)
	r := <-done
	if r.Status != 200 {
		t.Fatalf("in-flight request: %d %s", r.Status, r.Body)
	}
	wantContractHeaders(t, r, "classify", 2)
	// Both attempts ran on the old route.
	if h.up.Hits() != 2 {
		t.Errorf("upstream hits %d", h.up.Hits())
	}
}
