package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPercentileNearestRank(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		var out []time.Duration
		for _, v := range vs {
			out = append(out, time.Duration(v)*time.Millisecond)
		}
		return out
	}
	// Unsorted on purpose: Percentile sorts a copy and leaves the input alone.
	ten := ms(10, 1, 9, 2, 8, 3, 7, 4, 6, 5)
	assert.Equal(t, 5*time.Millisecond, Percentile(ten, 0.50))
	assert.Equal(t, 10*time.Millisecond, Percentile(ten, 0.95), "with 10 samples p95 is the 10th")
	assert.Equal(t, 10*time.Millisecond, Percentile(ten, 0.99))
	assert.Equal(t, 1*time.Millisecond, Percentile(ten, 0.01))
	assert.Equal(t, 10*time.Millisecond, ten[0], "input not reordered")

	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(100-i) * time.Millisecond
	}
	assert.Equal(t, 50*time.Millisecond, Percentile(hundred, 0.50))
	assert.Equal(t, 95*time.Millisecond, Percentile(hundred, 0.95))
	assert.Equal(t, 99*time.Millisecond, Percentile(hundred, 0.99))

	assert.Equal(t, 7*time.Millisecond, Percentile(ms(7), 0.5), "one sample is every percentile")
	assert.Equal(t, 7*time.Millisecond, Percentile(ms(7), 0.99))
	assert.Equal(t, time.Duration(0), Percentile(nil, 0.5))
}

func TestSummarize(t *testing.T) {
	l := Summarize([]time.Duration{3 * time.Millisecond, 1500 * time.Microsecond, 2 * time.Millisecond, 100 * time.Millisecond})
	assert.Equal(t, 4, l.N)
	assert.Equal(t, 2.0, l.P50Ms)
	assert.Equal(t, 100.0, l.P95Ms)
	assert.Equal(t, 100.0, l.P99Ms)
	assert.Equal(t, 100.0, l.MaxMs)
	assert.Equal(t, 26.625, l.MeanMs)
	assert.Equal(t, []float64{3, 1.5, 2, 100}, l.SamplesMs, "samples in the order taken")

	empty := Summarize(nil)
	assert.Equal(t, 0, empty.N)
	assert.NotNil(t, empty.SamplesMs, "an empty list, not null, in JSON")
}

func TestRatio(t *testing.T) {
	assert.Equal(t, 12.35, Ratio(24.7, 2))
	assert.Equal(t, 0.0, Ratio(1, 0))
}
