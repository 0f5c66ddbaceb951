package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// newClient is the load generator's HTTP client: keep-alive pool at least
// as large as the concurrency, no compression, no HTTP/2.
func newClient(conc int) *http.Client {
	t := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conc * 2,
		MaxIdleConnsPerHost: conc * 2,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: t, Timeout: 30 * time.Second}
}

// target is one endpoint under load.
type target struct {
	Name string // "direct" or "contractd"
	URL  string
	// check verifies a sampled reply body (nil: status only).
	check func(body []byte) error
}

// stats are one phase's results.
type stats struct {
	Target      string
	Concurrency int
	Duration    time.Duration
	Requests    int
	Errors      int
	FirstError  string
	RPS         float64
	P50, P90    time.Duration
	P99, Max    time.Duration
	PeakRSS     int64 // bytes; contractd only
}

// run drives t with conc workers for d and returns the results. Each worker
// sends body, reads the whole reply, and records the latency; every 64th
// reply of each worker is checked in full.
func run(ctx context.Context, client *http.Client, t target, body []byte, conc int, d time.Duration) stats {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	type worker struct {
		lat   []time.Duration
		errs  int
		first string
		_     [64]byte // keep workers' counters off each other's cache lines
	}
	ws := make([]worker, conc)
	var wg sync.WaitGroup
	var stop atomic.Bool
	go func() { <-ctx.Done(); stop.Store(true) }()
	start := time.Now()
	for i := range ws {
		w := &ws[i]
		wg.Go(func() {
			w.lat = make([]time.Duration, 0, 1<<14)
			buf := bytes.NewBuffer(make([]byte, 0, 8<<10))
			for n := 0; !stop.Load(); n++ {
				// The phase deadline bounds the run, not the request: a
				// request in flight at the deadline finishes and counts.
				req, _ := http.NewRequest(http.MethodPost, t.URL, bytes.NewReader(body))
				req.Header["Content-Type"] = []string{"application/json"}
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					buf.Reset()
					_, err = io.Copy(buf, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, buf.Bytes())
					}
					if err == nil && t.check != nil && n%64 == 0 {
						err = t.check(buf.Bytes())
					}
				}
				el := time.Since(t0)
				if err != nil {
					w.errs++
					if w.first == "" {
						w.first = err.Error()
					}
					if errors.Is(err, context.Canceled) {
						return
					}
					continue
				}
				w.lat = append(w.lat, el)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	s := stats{Target: t.Name, Concurrency: conc, Duration: elapsed}
	for _, w := range ws {
		all = append(all, w.lat...)
		s.Errors += w.errs
		if s.FirstError == "" {
			s.FirstError = w.first
		}
	}
	slices.Sort(all)
	s.Requests = len(all)
	s.RPS = float64(len(all)) / elapsed.Seconds()
	s.P50, s.P90, s.P99 = pct(all, 50), pct(all, 90), pct(all, 99)
	if len(all) > 0 {
		s.Max = all[len(all)-1]
	}
	return s
}

// pct is the nearest-rank percentile of sorted durations.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// reply is what checkContent and checkResponse read of a reply: a chat
// completion's choices or a Responses reply's output, and the contract
// member contractd adds to either on a contract route.
type reply struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Object string `json:"object"`
	Output []struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
	Contract *struct {
		Attempts int `json:"attempts"`
	} `json:"contract"`
}

func parseReply(body []byte) (*reply, error) {
	var r reply
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("reply is not JSON: %v", err)
	}
	return &r, nil
}

// firstAttempt checks that the reply carries the contract member with
// attempts 1: the output accepted was the first attempt's.
func (r *reply) firstAttempt() error {
	if r.Contract == nil || r.Contract.Attempts != 1 {
		return fmt.Errorf("reply has no contract member with attempts 1")
	}
	return nil
}

// checkContent returns a check that a chat completion's content is want
// (contractd returns exactly the accepted object's bytes).
func checkContent(want string, contract bool) func([]byte) error {
	return func(body []byte) error {
		c, err := parseReply(body)
		if err != nil {
			return err
		}
		if len(c.Choices) != 1 || c.Choices[0].Message.Content != want {
			return fmt.Errorf("reply content differs from the expected output")
		}
		if contract {
			return c.firstAttempt()
		}
		return nil
	}
}

// checkResponse checks a Responses API reply: the one output_text is the
// expected output, with a contract member of 1 attempt.
func checkResponse(want string) func([]byte) error {
	return func(body []byte) error {
		r, err := parseReply(body)
		if err != nil {
			return err
		}
		if r.Object != "response" || len(r.Output) != 1 || len(r.Output[0].Content) != 1 || r.Output[0].Content[0].Text != want {
			return fmt.Errorf("response output differs from the expected output")
		}
		return r.firstAttempt()
	}
}
