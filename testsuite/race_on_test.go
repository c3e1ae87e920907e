//go:build race

package testsuite_test

// raceDetector is true when the tests run with -race.
const raceDetector = true
