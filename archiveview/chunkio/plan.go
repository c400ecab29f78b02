package chunkio

// The read planner: the one place that turns a read into backend byte
// ranges. It decides which ranges to fetch (nextFramePart, nextRange), how to
// split each into concurrent sub-range GETs (splitSubs), and how many to
// keep in flight ahead of the reader (window). Every read path uses it:
// framed zstd (framed.go), plain tar and direct objects, giant frames and
// unframed zstd (stream.go), small-extent verification and Verify.
//
// The rules, each pinned by plan_test.go:
//
//   - Coalesce, never bridge. Adjacent frames (no gap between their
//     compressed spans) are merged into one part up to PartSize; a gap
//     (a skippable frame, another file's frames that are cached) ends the
//     part, because fetching a gap only to save a request was measured to
//     be slower (VirtualiZarr: merged adjacent ranges 2.8x faster, bridged
//     1 MiB gaps slower).
//   - Parts follow the data's own boundaries: a part holds whole frames,
//     so each frame is hashed and decoded as soon as its part has arrived;
//     a frame larger than PartSize is a part of its own, and a part holds
//     at most maxPartFrames frames. Plain ranges are cut every PartSize
//     bytes.
//   - Split for parallelism. S3 serves about 85-90 MB/s per connection, so
//     a part is fetched as several concurrent sub-ranges when the stream
//     has fewer parts in flight than StreamParts: a stream keeps about
//     StreamParts GETs in flight however large its parts are. No
//     sub-range is smaller than minSubRange. A cold read of one large frame
//     thus arrives over several connections at once, hashed in order as it
//     lands.
//   - The window (parts in flight ahead of the reader) starts at
//     initialWindow and doubles, up to StreamParts, each time the reader
//     had to wait for data; a reader that stalls stops the window from
//     being refilled, and a seek starts a new stream at the initial
//     window.
//   - Limits: StreamParts per stream, MaxParts GETs per process, and every
//     buffer from the one memory budget (limits.go). Parts beyond a
//     stream's first are speculative: they are fetched only when memory
//     and GET slots are free, and never take a stream past its fair share
//     of the budget.

// Planner defaults.
const (
	DefaultPartSize    = 8 << 20
	DefaultStreamParts = 8
	DefaultMaxParts    = 64
	minSubRange        = 1 << 20
	initialWindow      = 2
	// maxPartFrames bounds the frames of one part: each is a claim (a
	// flight other readers may join) and a slot of its worker, not charged
	// to the budget, so a manifest of millions of tiny frames cannot make
	// one part claim a million of them.
	maxPartFrames = 1024
)

// partPlan is one backend read the planner decided: object bytes
// [off, end) of one chunk, holding frames lo..hi of a framed chunk (lo > hi
// for a plain range), fetched as len(subs)-1 concurrent GETs of
// [subs[i], subs[i+1]).
type partPlan struct {
	off, end int64
	lo, hi   int
	subs     []int64
}

// size is the part's byte count.
func (p partPlan) size() int64 { return p.end - p.off }

// planFrames groups frames lo..hi of a framed chunk, all of which need a
// fetch, into parts: maximal runs of frames whose compressed spans are
// adjacent (the next starts where the previous ends) and whose total stays
// within partSize. A frame larger than partSize is a part alone. Sub-ranges
// are not chosen here (splitSubs does, at launch).
func planFrames(fr []Frame, lo, hi int, partSize int64) []partPlan {
	var out []partPlan
	for i := lo; i <= hi; {
		p := nextFramePart(hi-lo+1, func(k int) Frame { return fr[lo+k] }, i-lo, partSize, nil)
		p.lo, p.hi = p.lo+lo, p.hi+lo
		out = append(out, p)
		i = p.hi + 1
	}
	return out
}

// nextFramePart is the planner's one rule for frames, which every framed
// read path follows (framedSource, prefetch, Verify, through planFrames in
// its test): the part that starts with frame k0 of a sequence of n frames
// in object order (frame(k) returns the k-th) takes the frames after it
// while each starts exactly where the previous ends, the part stays within
// partSize and maxPartFrames frames, and join(k) allows frame k in (nil:
// always). join is asked in
// order and not again after it refused: it may claim the frame it allows
// (a flight) and note the one it refuses. The plan's lo and hi are
// sequence indexes (k0 and the last frame taken).
func nextFramePart(n int, frame func(k int) Frame, k0 int, partSize int64, join func(k int) bool) partPlan {
	first := frame(k0)
	p := partPlan{off: first.COff, end: first.COff + first.CSize, lo: k0, hi: k0}
	for k := k0 + 1; k < n && k-k0 < maxPartFrames; k++ {
		f := frame(k)
		if f.COff != p.end || p.size()+f.CSize > partSize || (join != nil && !join(k)) {
			break
		}
		p.end, p.hi = f.COff+f.CSize, k
	}
	return p
}

// nextRange is the part of a plain range [at, end) that starts at at: up
// to the next multiple of partSize from byte 0 (so two readers of one
// object cut it the same way), and no further than end. A stream asks for
// its parts one at a time.
func nextRange(at, end, partSize int64) partPlan {
	return partPlan{off: at, end: min(end, (at/partSize+1)*partSize), lo: 1, hi: 0}
}

// planRange cuts object bytes [off, end) into parts of at most partSize,
// as a stream asking nextRange for each part in turn does.
func planRange(off, end, partSize int64) []partPlan {
	var out []partPlan
	for at := off; at < end; {
		p := nextRange(at, end, partSize)
		out = append(out, p)
		at = p.end
	}
	return out
}

// splitSubs returns the sub-range boundaries of a part of bytes [off, end)
// fetched as up to ways concurrent GETs, none smaller than minSub (the last
// may be up to twice minSub). ways < 1 counts as 1.
func splitSubs(off, end int64, ways int, minSub int64) []int64 {
	n := end - off
	k := int64(max(ways, 1))
	if minSub > 0 {
		k = min(k, max(1, n/minSub))
	}
	subs := make([]int64, 0, k+1)
	for i := int64(0); i <= k; i++ {
		subs = append(subs, off+n*i/k)
	}
	return subs
}

// waysFor is how many sub-ranges each part gets when a stream has
// inFlight parts in flight: about streamParts GETs in all.
func waysFor(streamParts, inFlight int) int {
	return max(1, streamParts/max(1, inFlight))
}

// window is a stream's count of parts allowed in flight ahead of its
// reader. It is not safe for concurrent use (its owner locks).
type window struct {
	n, max int
}

func newWindow(maxParts int) window {
	maxParts = max(maxParts, 1)
	return window{n: min(initialWindow, maxParts), max: maxParts}
}

// starved doubles the window (up to max): the reader had to wait for data,
// so more parts in flight would have helped.
func (w *window) starved() { w.n = min(w.max, w.n*2) }
