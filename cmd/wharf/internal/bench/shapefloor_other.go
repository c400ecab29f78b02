//go:build !linux

package bench

import "time"

// threadCPU needs getrusage(RUSAGE_THREAD) (Linux): elsewhere the floor
// is timed by the wall clock.
func threadCPU() (time.Duration, bool) { return 0, false }
