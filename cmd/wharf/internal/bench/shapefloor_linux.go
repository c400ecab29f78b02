//go:build linux

package bench

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time (user and system) the calling OS thread has
// used; the caller keeps its goroutine on the thread (LockOSThread).
func threadCPU() (time.Duration, bool) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
