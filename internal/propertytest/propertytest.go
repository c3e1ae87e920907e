// Package propertytest plays the property tests of kobe's pure decision cores (pool.State,
// lease.State): many random sequences of events, each checked against invariants after every
// step; the first sequence that breaks one is shrunk to the fewest steps that still break it and
// reported step by step.
//
// How many sequences, and from which seed, come from the environment so that a failure printed
// by CI can be replayed alone: PROPERTY_SEQUENCES and PROPERTY_SEED (the report names both).
package propertytest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Sequence is one random sequence of events and how to play it.
type Sequence[E any] struct {
	Events []E
	// Play plays events from a fresh start. It returns the index of the step after which an
	// invariant broke and what broke, or -1 when none did; -1 with a message says the start
	// itself was broken. stats, when not nil, counts what the sequence went through.
	Play func(events []E, stats map[string]int) (int, string)
	// Trace writes the events step by step with what each led to, for the report.
	Trace func(events []E) string
}

// Run plays the sequences generate makes from seeds PROPERTY_SEED (default 1) onwards:
// PROPERTY_SEQUENCES of them, or count (at most 10,000 with go test -short). It fails on the
// first sequence that breaks an invariant, with the shrunk sequence's trace, and logs what the
// sequences went through.
func Run[E any](t *testing.T, count int, generate func(seed uint64) Sequence[E]) {
	t.Helper()
	sequences := envInt(t, "PROPERTY_SEQUENCES", count)
	if testing.Short() {
		sequences = min(sequences, 10_000)
	}
	first := uint64(envInt(t, "PROPERTY_SEED", 1))
	start := time.Now()
	steps := 0
	stats := map[string]int{}
	for seed := first; seed < first+uint64(sequences); seed++ {
		seq := generate(seed)
		steps += len(seq.Events)
		at, msg := seq.Play(seq.Events, stats)
		if at < 0 {
			if msg != "" {
				t.Fatalf("sequence %d (PROPERTY_SEED=%d PROPERTY_SEQUENCES=1): %s", seed, seed, msg)
			}
			continue
		}
		small := Shrink(seq.Events[:at+1], seq.Play)
		_, smallMsg := seq.Play(small, nil)
		var b strings.Builder
		fmt.Fprintf(&b, "sequence %d (PROPERTY_SEED=%d PROPERTY_SEQUENCES=1) broke an invariant after step %d: %s\n", seed, seed, at+1, msg)
		fmt.Fprintf(&b, "shrunk to %d steps, which break: %s\n", len(small), smallMsg)
		b.WriteString(seq.Trace(small))
		t.Fatal(b.String())
	}
	t.Logf("%d sequences, %d steps, in %s", sequences, steps, time.Since(start).Round(time.Millisecond))
	kinds := make([]string, 0, len(stats))
	for k := range stats {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		t.Logf("  %-40s %d", k, stats[k])
	}
}

// Shrink drops events, in runs of halving length down to one, for as long as the sequence
// still breaks an invariant (cut after the step that breaks), and returns what is left.
func Shrink[E any](events []E, play func([]E, map[string]int) (int, string)) []E {
	for changed := true; changed; {
		changed = false
		for size := len(events) / 2; size >= 1; size /= 2 {
			for i := 0; i+size <= len(events); {
				candidate := append(slices.Clone(events[:i]), events[i+size:]...)
				if at, _ := play(candidate, nil); at >= 0 {
					events, changed = candidate[:at+1], true
					continue
				}
				i++
			}
		}
	}
	return events
}

// Weighted picks an index of weights at random, each with its weight's share of the total
// (a weight of 0 is never picked).
func Weighted(r *rand.Rand, weights []int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	x := r.IntN(total)
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}
