//go:build race

package pool

// propertySequences under the race detector, ten times slower: the full count runs without it
// (make test runs it, see the Makefile).
const propertySequences = 10_000
