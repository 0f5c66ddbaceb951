package retry

import (
	"strings"
	"testing"
)

func text4K() string {
	s := strings.Repeat(prose+"\n", 4096/len(prose)+1)
	return s[:strings.LastIndexByte(s[:4096], ' ')]
}

func BenchmarkCount(b *testing.B) {
	s := text4K()
	for _, tc := range []struct {
		name string
		c    Counter
	}{{"o200k_base", CounterFor("gpt-4o")}, {"cl100k_base", CounterFor("gpt-4")}, {"estimator", Estimator{}}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				tc.c.Count(s)
			}
		})
	}
}

func BenchmarkCut(b *testing.B) {
	s := text4K()
	for _, tc := range []struct {
		name string
		c    Counter
	}{{"o200k_base", CounterFor("gpt-4o")}, {"estimator", Estimator{}}} {
		for _, keep := range []Keep{KeepHead, KeepHeadTail} {
			b.Run(tc.name+"/"+string(keep), func(b *testing.B) {
				b.SetBytes(int64(len(s)))
				for b.Loop() {
					Cut(s, 0.5, 0, keep, tc.c)
				}
			})
		}
	}
}
