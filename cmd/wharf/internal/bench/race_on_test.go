//go:build race

package bench

// raceDetector: this test binary runs under the race detector, whose
// shadow memory multiplies the process's resident set (5-10x by Go's
// documentation), so RSS bounds measure the detector, not wharf.
const raceDetector = true
