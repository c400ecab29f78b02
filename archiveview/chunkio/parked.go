package chunkio

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
