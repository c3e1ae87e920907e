package propertytest

import (
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
