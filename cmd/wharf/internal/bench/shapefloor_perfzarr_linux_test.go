package bench

import (
	"testing"
	"time"
)

// TestFloorPassesCountCPU: the shapes' CPU floor is the CPU a pass takes,
// not its wall time, so a machine whose cores are shared with other work
// (the time a pass waits for a core, here a pass that sleeps) does not
// raise it, while work that runs is counted in full.
func TestFloorPassesCountCPU(t *testing.T) {
	ms := time.Millisecond
	// spin runs d of the thread's CPU (at most 10 s of wall time).
	spin := func(d time.Duration) {
		t0, ok := threadCPU()
		if !ok {
			t.Fatal("no thread CPU on Linux")
		}
		for w0 := time.Now(); time.Since(w0) < 10*time.Second; {
			if now, _ := threadCPU(); now-t0 >= d {
				return
			}
		}
	}
	for _, tc := range []struct {
		name   string
		work   func() error
		lo, hi time.Duration
	}{
		{"a pass that waits 60 ms for a core", func() error { time.Sleep(60 * ms); return nil }, 0, 15 * ms},
		{"a pass that runs 40 ms, then waits 60 ms", func() error { spin(40 * ms); time.Sleep(60 * ms); return nil }, 35 * ms, 60 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := floorPasses(3, tc.work)
			if err != nil {
				t.Fatal(err)
			}
			if got < tc.lo || got > tc.hi {
				t.Fatalf("floorPasses = %v, want %v..%v (the pass's CPU, not its wall time)", got, tc.lo, tc.hi)
			}
		})
	}
}
