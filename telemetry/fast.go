package telemetry

import (
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics every request records (requests, attempts, violations,
// tokens and the four duration histograms) are kept by this file rather
// than by the OpenTelemetry SDK, and exposed on the same registry by a
// collector of their own. The SDK walks the attribute set it is handed on
// every Add and Record (about 0.4 µs a call, and a contract request makes
// eight) although each set here is built once per label combination; a
// series of its own is an atomic add. The exposition is the one the SDK's
// Prometheus exporter wrote for them, byte for byte
// (TestPerRequestMetricsMatchSDK): the same names, help, labels, buckets
// and values, and the SDK's cap of 2,000 label sets per metric, the rest
// summed under otel_metric_overflow="true". Exemplars were never on.

// seriesLimit is the SDK's default cardinality limit: a metric keeps
// seriesLimit-1 label sets, and the overflow series takes the rest.
const seriesLimit = 2000

// family is one per-request metric: a counter or a duration histogram.
type family struct {
	name   string // as exposed (OpenTelemetry's name translated)
	help   string
	bounds []float64 // histogram only: the upper bounds, +Inf excepted

	mu       sync.Mutex
	byKey    map[string]*series
	list     []*series
	overflow *series
}

// series is one label set of a family.
type series struct {
	desc *prometheus.Desc
	vals []string
	// live is set by the first measurement: a series is exposed from then
	// on, as the SDK's appeared with theirs (an Add of 0 included), not
	// when its labels are first looked up.
	live atomic.Bool
	n    atomic.Int64 // counter: its value (the SDK added negative values too)
	// histogram: the count per bucket (the last one above every bound)
	// and the sum's float64 bits.
	counts []atomic.Uint64
	sum    atomic.Uint64
}

func newFamily(name, help string, hist bool) *family {
	f := &family{name: name, help: help, byKey: map[string]*series{}}
	if hist {
		f.bounds = append([]float64(nil), Buckets...)
	}
	return f
}

// get is the series of the label set names=vals (names in the order
// given; Prometheus sorts them), made on first use. Callers keep what it
// returns: this is not the per-measurement path. A label set counts
// against the cap from its first lookup.
func (f *family) get(names, vals []string) *series {
	key := strings.Join(names, "\xff") + "\xfe" + strings.Join(vals, "\xff")
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.byKey[key]; s != nil {
		return s
	}
	if len(f.list) >= seriesLimit-1 {
		if f.overflow == nil {
			f.overflow = f.newSeries([]string{"otel_metric_overflow"}, []string{"true"})
		}
		return f.overflow
	}
	s := f.newSeries(names, vals)
	f.byKey[key] = s
	f.list = append(f.list, s)
	return s
}

func (f *family) newSeries(names, vals []string) *series {
	s := &series{desc: prometheus.NewDesc(f.name, f.help, names, nil), vals: vals}
	if f.bounds != nil {
		s.counts = make([]atomic.Uint64, len(f.bounds)+1)
	}
	return s
}

// add counts v on a counter's series.
func (s *series) add(v int64) {
	s.n.Add(v)
	s.setLive()
}

func (s *series) setLive() {
	if !s.live.Load() { // a load: no write to a shared line once live
		s.live.Store(true)
	}
}

// observe records v on a histogram's series of family f: in the bucket of
// the first bound at or above v, as the SDK does.
func (s *series) observe(f *family, v float64) {
	s.counts[sort.SearchFloat64s(f.bounds, v)].Add(1)
	for {
		old := s.sum.Load()
		if s.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			break
		}
	}
	s.setLive()
}

func (f *family) collect(ch chan<- prometheus.Metric) {
	f.mu.Lock()
	list := append(make([]*series, 0, len(f.list)+1), f.list...)
	if f.overflow != nil {
		list = append(list, f.overflow)
	}
	f.mu.Unlock()
	for _, s := range list {
		if !s.live.Load() {
			continue
		}
		if f.bounds == nil {
			ch <- prometheus.MustNewConstMetric(s.desc, prometheus.CounterValue, float64(s.n.Load()), s.vals...)
			continue
		}
		// The count is the buckets' total, so +Inf always agrees with them;
		// the sum may lag an observation in flight.
		buckets := make(map[float64]uint64, len(f.bounds))
		var total uint64
		for i, b := range f.bounds {
			total += s.counts[i].Load()
			buckets[b] = total
		}
		total += s.counts[len(f.bounds)].Load()
		ch <- prometheus.MustNewConstHistogram(s.desc, total, math.Float64frombits(s.sum.Load()), buckets, s.vals...)
	}
}

// families is the per-request metrics as one prometheus.Collector. It is
// unchecked (Describe sends nothing): a series' label names vary
// (http_route is left out when the request matched no pattern, and the
// overflow series has only its own), as the SDK's exporter's did.
type families []*family

func (fs families) Describe(chan<- *prometheus.Desc) {}

func (fs families) Collect(ch chan<- prometheus.Metric) {
	for _, f := range fs {
		f.collect(ch)
	}
}
