package peer

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
)

// ring is one immutable membership: the replicas' URLs, sorted, with
// each one's hash for rendezvous scoring.
type ring struct {
	urls   []string
	hashes []uint64
	self   int // index of this replica in urls
}

func newRing(urls []string, self string) *ring {
	r := &ring{urls: urls, hashes: make([]uint64, len(urls)), self: -1}
	for i, u := range urls {
		r.hashes[i] = hash64([]byte(u))
		if u == self {
			r.self = i
		}
	}
	return r
}

// has reports whether u is a member (urls are sorted).
func (r *ring) has(u string) bool {
	_, ok := slices.BinarySearch(r.urls, u)
	return ok
}

// hash64 is the first 8 bytes of a sha256: the same on every replica and
// every platform, and not steerable by whoever names the objects.
func hash64(b []byte) uint64 {
	s := sha256.Sum256(b)
	return binary.BigEndian.Uint64(s[:8])
}

// mix is a 64-bit finalizer (the constants of splitmix64): it spreads the
// combination of a member's and a frame's hashes over all 64 bits, so
// that the highest score is a fair draw among the members.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// owner returns the index of the member with the highest rendezvous score
// for a frame whose key hashes to kh, among those skip does not exclude
// (skip may be nil). Ties (probability 2^-64) go to the lower index. It
// returns -1 when every member is skipped.
func (r *ring) owner(kh uint64, skip func(i int) bool) int {
	best, bestScore := -1, uint64(0)
	for i, h := range r.hashes {
		if skip != nil && skip(i) {
			continue
		}
		if s := mix(h ^ kh); best < 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}
