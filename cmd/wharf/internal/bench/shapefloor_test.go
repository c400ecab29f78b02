package bench

import (
	"math"
	"testing"
	"time"
)

// TestFloorCores: the cores a 1.5x goal needs are the floor work plus the
// plain run's CPU over what is left of 1.5x the plain wall after the
// first byte; no room at all is reported as 0 (not a division by zero).
func TestFloorCores(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name                            string
		floor, plainCPU, plainWall, lat time.Duration
		want                            float64
	}{
		{"zarr 16 on this class of machine", 50 * ms, 15 * ms, 30 * ms, 20 * ms, 65.0 / 25},
		{"fits on one core", 10 * ms, 5 * ms, 100 * ms, 20 * ms, 15.0 / 130},
		{"no room after the first byte", 10 * ms, 5 * ms, 10 * ms, 20 * ms, 0},
		{"exactly 1.5x the latency", 10 * ms, 0, 20 * ms, 30 * ms, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := floorCores(tc.floor, tc.plainCPU, tc.plainWall, tc.lat)
			if math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("floorCores = %v, want %v", got, tc.want)
			}
		})
	}
}
