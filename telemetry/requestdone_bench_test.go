package telemetry_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/telemetry"
)

// BenchmarkRequestDone is the metrics a finished request records
// (RequestDone, spans not recorded): a passthrough request (the request
// counter and two histograms) and a contract request with one attempt
// (also the attempt and token counters).
func BenchmarkRequestDone(b *testing.B) {
	tel, err := telemetry.New(telemetry.Options{Registry: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	for _, ev := range []*audit.Event{
		{Route: "hop", Outcome: audit.OutcomePassthrough, DurationMS: 0.3,
			Attempts: []audit.Attempt{{Attempt: 1, Answered: true, LatencyMS: 0.2, Violations: []contracts.Violation{}}}},
		{Route: "triage", Outcome: audit.OutcomeValid, DurationMS: 0.4, Contract: &audit.Ref{Name: "triage"},
			Usage:    audit.Usage{PromptTokens: 500, CompletionTokens: 300},
			Attempts: []audit.Attempt{{Attempt: 1, Answered: true, LatencyMS: 0.2, Violations: []contracts.Violation{}}}},
	} {
		name := "passthrough"
		if ev.Contract != nil {
			name = "contract"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				tel.RequestDone(ctx, ev)
			}
		})
		// On every P at once, as requests finish on a busy server: the
		// series lookups' shared state is what they contend on.
		b.Run(name+"-parallel", func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tel.RequestDone(ctx, ev)
				}
			})
		})
	}
}
