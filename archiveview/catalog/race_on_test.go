//go:build race

package catalog

// slowdown scales the wall-clock waits of tests that build large indexes:
// the race detector makes the manifest decode and the build about ten
// times slower, which is not what those tests measure.
const slowdown = 10
