package bench

import (
	"math"
	"slices"
	"time"
)

// Latency summarises a set of timed samples. Times are in milliseconds (float, microsecond
// precision) because that is what a reader compares; the raw samples are kept so that a JSON
// consumer can recompute anything else.
type Latency struct {
	N         int       `json:"n"`
	P50Ms     float64   `json:"p50Ms"`
	P95Ms     float64   `json:"p95Ms"`
	P99Ms     float64   `json:"p99Ms"`
	MaxMs     float64   `json:"maxMs"`
	MeanMs    float64   `json:"meanMs"`
	SamplesMs []float64 `json:"samplesMs"`
}

// Percentile returns the p-th percentile (0 < p <= 1) of ds by the nearest-rank method: the
// smallest sample such that at least p of all samples are less than or equal to it. It never
// interpolates, so every figure reported is a latency that really happened; with few samples
// the high percentiles are the maximum (p99 of 10 samples is the 10th). It returns 0 for no
// samples.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p * float64(len(s)))) // 1-based
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// Summarize computes the percentiles of ds.
func Summarize(ds []time.Duration) Latency {
	l := Latency{N: len(ds), SamplesMs: make([]float64, 0, len(ds))}
	if len(ds) == 0 {
		return l
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
		l.SamplesMs = append(l.SamplesMs, Ms(d))
	}
	l.P50Ms = Ms(Percentile(ds, 0.50))
	l.P95Ms = Ms(Percentile(ds, 0.95))
	l.P99Ms = Ms(Percentile(ds, 0.99))
	l.MaxMs = Ms(slices.Max(ds))
	l.MeanMs = Ms(sum / time.Duration(len(ds)))
	return l
}

// Ms converts a duration to milliseconds, rounded to the microsecond.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Ratio returns a/b, or 0 when b is 0 (a figure that is missing makes no ratio).
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return math.Round(a/b*100) / 100
}
