//go:build !race

package lease

// propertySequences is how many random sequences TestLeaseDecisionsHoldTheirInvariants plays
// (go test -short: 10,000; under -race: state_property_race_test.go).
const propertySequences = 100_000
