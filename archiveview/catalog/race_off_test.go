//go:build !race

package catalog

// slowdown scales the wall-clock waits of tests that build large indexes
// (10 under the race detector, race_on_test.go).
const slowdown = 1
