//go:build !unix

package manifest

import "time"

// cpuTime is unavailable here; the benchmark then omits cpu-s/op.
func cpuTime() time.Duration { return 0 }
