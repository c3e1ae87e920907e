package propertytest

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// playSevens breaks after the step that brings the second 7: the shortest sequence that breaks
// is the two 7s.
func playSevens(events []int, stats map[string]int) (int, string) {
	sevens := 0
	for i, e := range events {
		if e == 7 {
			sevens++
		}
		if sevens == 2 {
			return i, "two sevens"
		}
	}
	return -1, ""
}

func TestShrinkKeepsOnlyWhatBreaks(t *testing.T) {
	events := []int{1, 7, 3, 4, 5, 6, 7, 8, 7, 9}
	at, _ := playSevens(events, nil)
	got := Shrink(events[:at+1], playSevens)
	if !slices.Equal(got, []int{7, 7}) {
		t.Fatalf("Shrink = %v, want [7 7]", got)
	}
	if !slices.Equal(events, []int{1, 7, 3, 4, 5, 6, 7, 8, 7, 9}) {
		t.Fatalf("Shrink changed its input: %v", events)
	}
}

func TestRunPlaysEverySequenceFromTheSeed(t *testing.T) {
	t.Setenv("PROPERTY_SEED", "5")
	t.Setenv("PROPERTY_SEQUENCES", "3")
	var seeds []uint64
	Run(t, 1000, func(seed uint64) Sequence[int] {
		seeds = append(seeds, seed)
		return Sequence[int]{Events: []int{int(seed)}, Play: playSevens, Trace: func([]int) string { return "" }}
	})
	if !slices.Equal(seeds, []uint64{5, 6, 7}) {
		t.Fatalf("seeds played: %v, want [5 6 7]", seeds)
	}
}

func TestWeightedNeverPicksAZeroWeight(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	counts := make([]int, 4)
	for range 10_000 {
		counts[Weighted(r, []int{1, 0, 3, 0})]++
	}
	if counts[1] != 0 || counts[3] != 0 {
		t.Fatalf("picked a zero weight: %v", counts)
	}
	// 1:3, within a wide margin.
	if counts[2] < 2*counts[0] || counts[2] > 4*counts[0] {
		t.Fatalf("counts %v are not about 1:3", counts)
	}
}
