package chunkio

// readahead.go: when the reads of a chunk earn a readahead window.
//
// Readahead prefetches frames past the ones a read covers; on a stream
// (a tree walk, a file read in consecutive ranges, a client's downloader
// sending ranges one after another or several at once) that hides the
// next frames' first-byte latency, and on random windows (COG tiles, HDF5
// hyperslabs, Zarr chunks, Parquet column chunks) every frame it fetches is
// wasted. So a window is earned by evidence only: a read tiles when it
// starts where one of the chunk's last few reads ended (within
// maxTileGap bytes after it, which covers the tar headers and padding
// between the members of a tree walk and a client's small coalescing
// holes), the first read of a chunk's beginning tiles with its start, and
// the window grows with the run of consecutive tiling reads: none for the
// first (the first read of a chunk's start is a run of one), then 2, 4,
// 8, ... frames up to Options.Readahead. A read that does not tile starts
// a run of none. Backward runs earn nothing (no prefetch runs
// backwards). Frames are never the evidence: random windows in adjacent
// frames are not a stream.

import "sync"

const (
	// maxTileGap is how far past a recent read's end a read may start and
	// still tile: 16 KiB (tar headers with a PAX record, the 512-byte
	// padding, an 8 KiB coalescing hole).
	maxTileGap = 16 << 10
	// evidenceEnds is how many recent read ends a read may continue, so
	// that concurrent ranges of one stream (up to this many in flight, in
	// any completion order) still tile.
	evidenceEnds = 8
	// minRunForReadahead is the run of tiling reads that earns the first
	// frame of readahead.
	minRunForReadahead = 2
	maxRun             = 62
)

// streamEvidence is what one chunk's reads showed: their recent ends, each
// with the run of tiling reads it ends. Each read continues the run of the
// end it starts at, so several streams over one chunk (clients walking
// their parts of a tree, the concurrent ranges of a downloader) each keep
// their own run. The zero value is a chunk nobody read.
type streamEvidence struct {
	mu      sync.Mutex
	started bool
	ends    [evidenceEnds]tileEnd
	next    int // ring position of the next end
}

// tileEnd is where a recent read ended (-1: none) and its run.
type tileEnd struct {
	at  int64
	run int
}

// record notes a read of tar-stream bytes [u0,u1) and returns its run of
// tiling reads: the run of the recent read it starts at plus one, 0 when it
// tiles with none.
func (e *streamEvidence) record(u0, u1 int64) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.started {
		e.started = true
		for i := range e.ends {
			e.ends[i] = tileEnd{at: -1}
		}
		e.ends[0], e.next = tileEnd{at: 0}, 1 // the chunk's beginning: a walk starts there
	}
	run := 0
	for _, end := range e.ends {
		if end.at >= 0 && u0 >= end.at && u0-end.at <= maxTileGap {
			run = max(run, min(end.run+1, maxRun))
		}
	}
	for i, end := range e.ends {
		if end.at == u1 {
			e.ends[i].run = max(end.run, run)
			return run
		}
	}
	e.ends[e.next] = tileEnd{at: u1, run: run}
	e.next = (e.next + 1) % evidenceEnds
	return run
}

// readaheadFor is the readahead window (frames) a run of tiling reads
// earns: 0 below minRunForReadahead, then doubling from 2 up to limit.
func readaheadFor(run, limit int) int {
	if run < minRunForReadahead || limit <= 0 {
		return 0
	}
	shift := run - minRunForReadahead + 1
	if shift >= 30 {
		return limit
	}
	return min(limit, 1<<shift)
}
