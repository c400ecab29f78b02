package bench

import (
	"crypto/sha256"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// frameRef is one frame of a manifest: chunk index and frame index.
type frameRef struct{ chunk, frame int }

// shapeFloor is the CPU work wharf cannot avoid for one shape: the sha256
// of the covering frames' compressed bytes (each is checked before any of
// its bytes is served) and their zstd decode, on one goroutine, measured
// in the run on the same bytes as the CPU time of one thread
// (floorPasses; the best of three passes: the floor, not a typical time).
// The frames' bytes are read from the S3 model's directory before the
// clock starts.
func shapeFloor(e *env, m *manifest.Manifest, frames []frameRef) (time.Duration, error) {
	objs := map[int][]byte{}
	var comps [][]byte
	var maxU int64
	for _, r := range frames {
		c := m.Chunks[r.chunk]
		obj, ok := objs[r.chunk]
		if !ok {
			var err error
			if obj, err = os.ReadFile(e.objectPath(m, c)); err != nil {
				return 0, fmt.Errorf("shapes floor: %w", err)
			}
			objs[r.chunk] = obj
		}
		f := c.Frames[r.frame]
		if f.CompressedOffset < 0 || f.CompressedOffset+f.CompressedSize > int64(len(obj)) {
			return 0, fmt.Errorf("shapes floor: frame %d of chunk %s is outside its object", r.frame, c.S3Key)
		}
		comps = append(comps, obj[f.CompressedOffset:f.CompressedOffset+f.CompressedSize])
		maxU = max(maxU, f.UncompressedSize)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<40)) // the bench's own frames
	if err != nil {
		return 0, err
	}
	defer dec.Close()
	out := make([]byte, 0, maxU)
	return floorPasses(3, func() error {
		for _, comp := range comps {
			_ = sha256.Sum256(comp)
			if _, err := dec.DecodeAll(comp, out[:0]); err != nil {
				return fmt.Errorf("shapes floor: %w", err)
			}
		}
		return nil
	})
}

// floorPasses runs work passes times on one OS thread and returns the
// least CPU time (the thread's, getrusage RUSAGE_THREAD) one pass took:
// on a machine whose cores are shared with other processes, the time a
// pass waits for a core is not the work's (by the wall clock the floor
// read 0.6 s where its CPU was 70 ms, at load average 15). Where thread
// CPU cannot be read, the wall clock times the passes.
func floorPasses(passes int, work func() error) (time.Duration, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	clock := func() time.Duration {
		if d, ok := threadCPU(); ok {
			return d
		}
		return time.Duration(time.Now().UnixNano())
	}
	best := time.Duration(-1)
	for pass := 0; pass < passes; pass++ {
		t0 := clock()
		if err := work(); err != nil {
			return 0, err
		}
		if d := clock() - t0; best < 0 || d < best {
			best = d
		}
	}
	return best, nil
}

// floorCores is how many cores a shape's 1.5x goal needs on this machine
// at the CPU floor: within 1.5 times the plain object's wall, no byte
// arrives before the first-byte latency, so the floor work (floor) and
// the work the plain run's client and S3 model did (plainCPU, a lower
// bound of theirs in wharf's run, which moves more bytes) must fit in
// the rest of that time.
func floorCores(floor, plainCPU, plainWall, latency time.Duration) float64 {
	room := time.Duration(1.5*float64(plainWall)) - latency
	if room <= 0 {
		return 0
	}
	return float64(floor+plainCPU) / float64(room)
}
