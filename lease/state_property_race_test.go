//go:build race

package lease

// propertySequences under the race detector, ten times slower: the full count runs without it
// (make test runs it, see hack/test.sh).
const propertySequences = 10_000
