// Package metrics exposes the Temporal SDK's client and worker metrics to Prometheus.
package metrics

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// SDKCollector implements client.MetricsHandler for the Temporal SDK and prometheus.Collector
// for the registry that /metrics serves.
//
// The SDK does not declare its metrics up front and tags one metric name with different tag
// sets in different places, which prometheus' Vec types cannot express. So the collector keeps
// its own series and, for each name, exports the union of the tag keys seen (missing ones empty).
type SDKCollector struct {
	mu     sync.Mutex
	series map[string]*family // by sanitized metric name
}

type family struct {
	kind    string // counter, gauge or histogram
	keys    map[string]struct{}
	entries map[string]*entry // by canonical tag string
}

type entry struct {
	tags  map[string]string
	value float64 // counter and gauge
	hist  *histogramValue
}

type histogramValue struct {
	count uint64
	sum   float64
	raw   []uint64 // per-bucket (not cumulative) counts
}

// timerBuckets (seconds) span what is timed: poll latencies and lease binds to cluster creations.
var timerBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// NewSDKCollector returns an empty collector.
func NewSDKCollector() *SDKCollector {
	return &SDKCollector{series: map[string]*family{}}
}

// Handler returns the client.MetricsHandler to pass to client.Options.
func (c *SDKCollector) Handler() client.MetricsHandler { return handler{c: c} }

type handler struct {
	c    *SDKCollector
	tags map[string]string
}

func (h handler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := make(map[string]string, len(h.tags)+len(tags))
	for k, v := range h.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[k] = v
	}
	return handler{c: h.c, tags: merged}
}

func (h handler) Counter(name string) client.MetricsCounter {
	return counterFunc(func(d int64) { h.c.add(name, "counter", h.tags, float64(d)) })
}

func (h handler) Gauge(name string) client.MetricsGauge {
	return gaugeFunc(func(v float64) { h.c.set(name, h.tags, v) })
}

func (h handler) Timer(name string) client.MetricsTimer {
	return timerFunc(func(d time.Duration) { h.c.observe(name, h.tags, d.Seconds()) })
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == ':' {
			return r
		}
		return '_'
	}, name)
}

func canonical(tags map[string]string) string {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(tags[k])
		b.WriteByte(0)
	}
	return b.String()
}

func (c *SDKCollector) entry(name, kind string, tags map[string]string) *entry {
	name = sanitize(name)
	f := c.series[name]
	if f != nil && f.kind != kind {
		// One name used as two kinds: keep both, apart.
		return c.entry(name+"_"+kind, kind, tags)
	}
	if f == nil {
		f = &family{kind: kind, keys: map[string]struct{}{}, entries: map[string]*entry{}}
		c.series[name] = f
	}
	key := canonical(tags)
	e := f.entries[key]
	if e == nil {
		clean := make(map[string]string, len(tags))
		for k, v := range tags {
			k = sanitize(k)
			clean[k] = v
			f.keys[k] = struct{}{}
		}
		e = &entry{tags: clean}
		if kind == "histogram" {
			e.hist = &histogramValue{raw: make([]uint64, len(timerBuckets))}
		}
		f.entries[key] = e
	}
	return e
}

func (c *SDKCollector) add(name, kind string, tags map[string]string, d float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entry(name, kind, tags).value += d
}

func (c *SDKCollector) set(name string, tags map[string]string, v float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entry(name, "gauge", tags).value = v
}

func (c *SDKCollector) observe(name string, tags map[string]string, seconds float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.entry(name, "histogram", tags).hist
	h.count++
	h.sum += seconds
	for i, ub := range timerBuckets {
		if seconds <= ub {
			h.raw[i]++
			break
		}
	}
}

// Describe sends nothing: the metric set is only known as the SDK emits it (an unchecked collector).
func (c *SDKCollector) Describe(chan<- *prometheus.Desc) {}

// Collect exports every series seen so far.
func (c *SDKCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, f := range c.series {
		keys := make([]string, 0, len(f.keys))
		for k := range f.keys {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		desc := prometheus.NewDesc(name, "Temporal SDK metric "+name+".", keys, nil)
		for _, e := range f.entries {
			values := make([]string, len(keys))
			for i, k := range keys {
				values[i] = e.tags[k]
			}
			var m prometheus.Metric
			var err error
			switch f.kind {
			case "counter":
				m, err = prometheus.NewConstMetric(desc, prometheus.CounterValue, e.value, values...)
			case "gauge":
				m, err = prometheus.NewConstMetric(desc, prometheus.GaugeValue, e.value, values...)
			case "histogram":
				buckets := make(map[float64]uint64, len(timerBuckets))
				var cum uint64
				for i, ub := range timerBuckets {
					cum += e.hist.raw[i]
					buckets[ub] = cum
				}
				m, err = prometheus.NewConstHistogram(desc, e.hist.count, e.hist.sum, buckets, values...)
			}
			if err == nil {
				ch <- m
			}
		}
	}
}
