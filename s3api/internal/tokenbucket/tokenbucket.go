// Package tokenbucket is a token bucket per key, the one rate rule of
// package s3api's restore budget (bytes per access key per hour) and of
// the console's login limit (attempts per client address).
//
// A key's bucket starts full, at its capacity, and refills continuously
// at a fixed rate up to the capacity. Take lets a request through when the
// bucket holds what it asks or, for a request larger than the whole
// capacity, when the bucket is full; the bucket may then go below zero and
// the key waits until it has refilled. A clock that goes back refills
// nothing. The keys tracked may be bounded: a new key beyond the bound is
// refused after forgetting the keys whose buckets have refilled (a full
// bucket is the same as none); that walk over every key runs at most once
// per token's refill time, so that a flood of new keys does not walk them
// all per request.
package tokenbucket

import (
	"math"
	"sync"
	"time"
)

// Buckets is a token bucket per key. It is safe for concurrent use.
type Buckets struct {
	capacity float64
	refill   float64       // tokens added per every
	every    time.Duration // > 0
	maxKeys  int           // 0 = unbounded

	mu   sync.Mutex
	keys map[string]*state
	// swept is when the keys were last swept for full buckets (at most
	// once per token's refill time: each sweep walks every key).
	swept time.Time
}

type state struct {
	tokens float64
	at     time.Time
}

// New returns buckets of capacity tokens, refilled by refill tokens every
// every (continuously), tracking at most maxKeys keys (0: no bound, for
// keys from a bounded set such as configured access keys). every must be
// positive.
func New(capacity, refill float64, every time.Duration, maxKeys int) *Buckets {
	return &Buckets{capacity: capacity, refill: refill, every: every, maxKeys: maxKeys, keys: map[string]*state{}}
}

// Capacity returns the tokens of a full bucket.
func (b *Buckets) Capacity() float64 { return b.capacity }

// refilled is s's tokens at now.
func (b *Buckets) refilled(s *state, now time.Time) float64 {
	d := now.Sub(s.at)
	if d <= 0 {
		return s.tokens
	}
	return math.Min(b.capacity, s.tokens+b.refill*float64(d)/float64(b.every))
}

// tokenTime is how long one token takes to refill.
func (b *Buckets) tokenTime() time.Duration {
	return time.Duration(float64(b.every) / b.refill)
}

// stateLocked returns key's bucket brought to now, making a full one for a
// new key; nil when the key is new and maxKeys keys are tracked even after
// forgetting the full ones (b.mu held).
func (b *Buckets) stateLocked(key string, now time.Time) *state {
	s := b.keys[key]
	if s == nil {
		if b.maxKeys > 0 && len(b.keys) >= b.maxKeys {
			if !b.swept.IsZero() && now.Sub(b.swept) < b.tokenTime() {
				return nil // swept lately: new keys wait, not a walk each
			}
			b.swept = now
			for k, o := range b.keys {
				if b.refilled(o, now) >= b.capacity {
					delete(b.keys, k)
				}
			}
			if len(b.keys) >= b.maxKeys {
				return nil
			}
		}
		s = &state{tokens: b.capacity, at: now}
		b.keys[key] = s
		return s
	}
	s.tokens = b.refilled(s, now)
	s.at = now
	return s
}

// Take takes n tokens from key's bucket at now when it holds n, or is full
// when n is more than the capacity (it then goes below zero). Otherwise
// nothing is taken, ok is false and wait is how long until the bucket
// holds enough (0 when the key could not be tracked: maxKeys others have
// tokens missing).
func (b *Buckets) Take(key string, n float64, now time.Time) (ok bool, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.stateLocked(key, now)
	if s == nil {
		return false, 0
	}
	want := math.Min(n, b.capacity)
	if s.tokens >= want {
		s.tokens -= n
		return true, 0
	}
	periods := (want - s.tokens) / b.refill
	return false, time.Duration(math.Ceil(periods * float64(b.every)))
}

// TakeAtMost takes from key's bucket at now as many whole tokens as it
// holds, at most n, and returns how many it took (0 when it holds less
// than one, or the key could not be tracked).
func (b *Buckets) TakeAtMost(key string, n int, now time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.stateLocked(key, now)
	if s == nil || n <= 0 || s.tokens < 1 {
		return 0
	}
	k := min(n, int(math.Floor(s.tokens)))
	s.tokens -= float64(k)
	return k
}

// Give puts n tokens back into key's bucket at now (up to its capacity):
// what a request took and did not use. A bucket it fills is forgotten, so
// that a client taking and giving back all it took (a HEAD of a file
// that needed no refresh) leaves nothing tracked.
func (b *Buckets) Give(key string, n float64, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.keys[key]
	if s == nil {
		return // untracked: full
	}
	s.tokens = math.Min(b.capacity, b.refilled(s, now)+n)
	s.at = now
	if s.tokens >= b.capacity {
		delete(b.keys, key) // full: the same as untracked
	}
}
