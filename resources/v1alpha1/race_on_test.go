//go:build race

package v1alpha1_test

// raceGOFLAGS is given to the go commands controller-gen runs when the tests run with -race (as
// `make test` runs them): its loading of the packages then reads the compiled dependencies the
// test build left in the build cache instead of compiling them a second time without -race.
const raceGOFLAGS = "-race"
