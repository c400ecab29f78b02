package chunkio

import (
	"context"
	"time"
)

// Parked stream decoders. A giant frame or an unframed chunk read by a
// series of ranged requests keeps its decoder between requests, positioned
// where the last one stopped, so the series costs O(size) decode work in
// total. Parked decoders are kept by the FrameCache for every Set: at most
// maxParked per Set, and, since each holds its window in the memory budget,
// they are dropped (oldest first) whenever memory is needed. A decoder
// parked by a read that ended where its client asked keeps the parts its
// reader had fetched or launched ahead (at most its window, charged to the
// budget), so a client reading a giant frame as sequential ranges (the
// SDK downloaders) fetches each byte once; one parked by an abandoned
// read holds no connection and no part.

// Shared decode passes. Concurrent ranged readers of one giant frame or
// unframed chunk (a downloader's ranges, several clients) share one decode
// pass instead of each decoding from the start: a read of [u0,u1) that
// will park its decoder at u1 announces it (a promise), and a read that
// finds no parked decoder at or before its u0 waits for the promise
// closest below u0, holding nothing of the limits, then continues the
// decoder parked there. A promise is kept whatever the read's end: it is
// fulfilled when the read parks or drops its decoder, and a reader whose
// promise was not kept (a read abandoned midway, a failure) looks again
// and decodes from the start only when nothing is parked or promised
// below it. Waits end at MemoryWait (then the reader decodes on its own)
// or with the reader's context. A reader waits only on promises below its
// own start, which are below its own promise: waits cannot form a cycle.

// promise is a decoder of stream (set, ci, frame) that a read in progress
// is expected to park at at.
type promise struct {
	set   *Set
	ci    int32
	frame int
	at    int64
	done  chan struct{}
}

// promise announces that a read will park stream (ci, frame)'s decoder at
// at; the caller fulfils it (keep) after parking or dropping the decoder.
func (c *FrameCache) promise(s *Set, ci int32, frame int, at int64) *promise {
	p := &promise{set: s, ci: ci, frame: frame, at: at, done: make(chan struct{})}
	c.parkMu.Lock()
	c.promises = append(c.promises, p)
	c.parkMu.Unlock()
	return p
}

// keep ends p (nil: none): its waiters look for a parked decoder again.
func (c *FrameCache) keep(p *promise) {
	if p == nil {
		return
	}
	c.parkMu.Lock()
	for i, q := range c.promises {
		if q == p {
			c.promises = append(c.promises[:i], c.promises[i+1:]...)
			break
		}
	}
	c.parkMu.Unlock()
	close(p.done)
}

// joinStream returns the parked decoder of stream (ci, frame) positioned
// furthest but not past pos, if take accepts its position, unless a
// promise (not mine) will park one closer below pos: then it returns that
// promise's done channel to wait on. from is the position of the best
// parked decoder (0, the stream's start, when none is).
func (c *FrameCache) joinStream(s *Set, ci int32, frame int, pos int64, mine *promise, take func(from int64) bool) (z *zstream, wait <-chan struct{}, from int64) {
	c.parkMu.Lock()
	defer c.parkMu.Unlock()
	best := -1
	for i, z := range c.parked {
		if z.set == s && z.ci == ci && z.frame == frame && z.pos <= pos && (best < 0 || z.pos > c.parked[best].pos) {
			best = i
		}
	}
	var p *promise
	for _, q := range c.promises {
		if q != mine && q.set == s && q.ci == ci && q.frame == frame && q.at <= pos && (p == nil || q.at > p.at) {
			p = q
		}
	}
	if best >= 0 {
		from = c.parked[best].pos
	}
	if p != nil && (best < 0 || p.at > from) {
		return nil, p.done, from
	}
	if best < 0 || !take(from) {
		return nil, nil, from
	}
	z = c.parked[best]
	c.parked = append(c.parked[:best], c.parked[best+1:]...)
	return z, nil, from
}

// shareSkip is how far below its start a read takes a parked decoder
// without waiting: decoding that much to skip it costs little.
const shareSkip = 1 << 20

// shareGrace is how long a read that would decode more than shareSkip
// before its start (from the stream's start, or from a decoder parked far
// below) waits once for the reads of the bytes in between to announce
// themselves: the concurrent ranges of one download arrive in any order.
const shareGrace = 50 * time.Millisecond

// sharedStream returns a decoder of stream (ci, frame) positioned at or
// before pos that another read parked, waiting (at most MemoryWait, holding
// nothing) for the closest promise below pos; nil when there is none, the
// wait ran out, or ctx ended (err).
func (c *FrameCache) sharedStream(ctx context.Context, s *Set, ci int32, frame int, pos int64, mine *promise) (*zstream, error) {
	var timeout <-chan time.Time
	graced := false
	take := func(from int64) bool { return graced || pos-from <= shareSkip }
	for {
		z, wait, from := c.joinStream(s, ci, frame, pos, mine, take)
		if z != nil {
			return z, nil
		}
		if wait == nil && (graced || pos-from <= shareSkip) {
			return nil, nil
		}
		if timeout == nil {
			t := time.NewTimer(s.lim.wait)
			defer t.Stop()
			timeout = t.C
		}
		if wait == nil { // far from anything parked: give earlier ranges a moment to announce
			graced = true
			g := time.NewTimer(shareGrace)
			select {
			case <-g.C:
			case <-ctx.Done():
				g.Stop()
				return nil, ctx.Err()
			}
			continue
		}
		select {
		case <-wait:
		case <-timeout:
			graced = true
			z, _, _ := c.joinStream(s, ci, frame, pos, mine, take)
			if z == nil {
				z = c.unpark(s, ci, frame, pos)
			}
			return z, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// park keeps a healthy stream decoder of s for a later read that continues
// where it stopped. With keepParts its parts already fetched or in flight
// stay with it (charged to the budget, dropped with it); otherwise they are
// dropped now. The Set's oldest parked decoder is dropped past maxParked; a
// closed Set parks nothing.
func (c *FrameCache) park(s *Set, z *zstream, keepParts bool) {
	if keepParts {
		z.src.pause()
	} else {
		z.src.suspend()
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		z.discard(c, true)
		return
	}
	c.parkMu.Lock()
	c.parked = append(c.parked, z)
	var drop *zstream
	n, oldest := 0, -1
	for i, p := range c.parked {
		if p.set == s {
			if oldest < 0 {
				oldest = i
			}
			n++
		}
	}
	if n > maxParked {
		drop = c.parked[oldest]
		c.parked = append(c.parked[:oldest], c.parked[oldest+1:]...)
	}
	c.parkMu.Unlock()
	if drop != nil {
		drop.discard(c, true)
	}
	c.lim.signal() // a parked decoder can be dropped for whoever waits
}

// unpark takes s's parked decoder of stream (ci, frame) positioned
// furthest but not past pos, or nil.
func (c *FrameCache) unpark(s *Set, ci int32, frame int, pos int64) *zstream {
	c.parkMu.Lock()
	defer c.parkMu.Unlock()
	best := -1
	for i, z := range c.parked {
		if z.set == s && z.ci == ci && z.frame == frame && z.pos <= pos && (best < 0 || z.pos > c.parked[best].pos) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	z := c.parked[best]
	c.parked = append(c.parked[:best], c.parked[best+1:]...)
	return z
}

// dropParked discards the oldest parked decoder of any Set, returning its
// memory; false when none is parked.
func (c *FrameCache) dropParked() bool {
	c.parkMu.Lock()
	if len(c.parked) == 0 {
		c.parkMu.Unlock()
		return false
	}
	z := c.parked[0]
	c.parked = c.parked[1:]
	c.parkMu.Unlock()
	z.discard(c, true)
	return true
}

// dropParkedFetching discards the oldest parked decoder whose parts ahead
// still have GETs in flight (a demand read is short of GET slots: the
// discard stops those GETs); false when no parked decoder has any.
func (c *FrameCache) dropParkedFetching() bool {
	return c.dropParkedFirst(func(z *zstream) bool {
		return len(z.src.slots) > 0 // a stream slot is held exactly while its GET runs
	})
}

// dropParkedFirst discards the oldest parked decoder for which match
// (called under parkMu) is true; false when there is none.
func (c *FrameCache) dropParkedFirst(match func(z *zstream) bool) bool {
	c.parkMu.Lock()
	var z *zstream
	for i, p := range c.parked {
		if match(p) {
			z = p
			c.parked = append(c.parked[:i], c.parked[i+1:]...)
			break
		}
	}
	c.parkMu.Unlock()
	if z == nil {
		return false
	}
	z.discard(c, true)
	return true
}

// chargedTo reports whether parked decoder z holds memory charged to cl:
// its window and segment, or a part it kept ahead (z is parked: nobody
// changes its reader).
func (z *zstream) chargedTo(cl *clientUse) bool {
	if z.cl == cl {
		return true
	}
	for _, p := range z.src.queue {
		if p.cl == cl {
			return true
		}
	}
	return false
}

// dropParkedOwn discards the oldest parked decoder whose admission is
// counted for client cl (a client at its share of the decoders asks for
// one); false when none is parked.
func (c *FrameCache) dropParkedOwn(cl *clientUse) bool {
	if cl == nil {
		return false
	}
	return c.dropParkedFirst(func(z *zstream) bool { return z.adm == cl })
}

// dropParkedOf discards every parked decoder of s (Set.Close).
func (c *FrameCache) dropParkedOf(s *Set) {
	c.parkMu.Lock()
	var drop []*zstream
	kept := c.parked[:0]
	for _, z := range c.parked {
		if z.set == s {
			drop = append(drop, z)
		} else {
			kept = append(kept, z)
		}
	}
	clear(c.parked[len(kept):])
	c.parked = kept
	c.parkMu.Unlock()
	for _, z := range drop {
		z.discard(c, true)
	}
}
