//go:build !race

package v1alpha1_test

// raceGOFLAGS: see race_on_test.go.
const raceGOFLAGS = ""
