package chunkio

// Forgetting remembered corruption. A chunk whose bytes failed a check on
// the data itself (a span or whole object that failed its sha256 twice, a
// tar walk or ustar header check that failed on the data, a whole-object
// zstd stream past its bound) has that failure remembered in its
// chunkState, so its reads are refused without a request instead of
// reading (and decoding) the bad object again for every client. The
// memory is bounded twice:
//
//   - in time: after Options.ForgetCorruptAfter the failures are dropped
//     in place (the chunk's ETag pin and its checked units stay), and the
//     next read that needs one runs its check again: at most two whole
//     reads of a corrupt span per chunk per period;
//   - by the object: a GET or HEAD of a chunk that holds a remembered
//     failure and whose pinned ETag no longer matches (the operator
//     replaced the object) starts the chunk's state afresh (no pin, no
//     checks, no failures), unless a unit of it was checked whole and is
//     relied on by later ranged reads: those are only safe under the pin,
//     so such a chunk stays pinned (refused with ErrChanged) until a
//     restart. A state started afresh so is not started afresh again
//     within ForgetCorruptAfter: a store whose ETag flaps (replicas that
//     disagree, an object overwritten again and again) cannot have the
//     failure forgotten at every response, so the bound above holds.
//
// In entries it needs no bound of its own: it is one timestamp per chunk
// state and the kept results of memos keyed by what the manifest
// describes (a unit, a member's header, the chunk's one walk), all
// bounded by the manifest.

import (
	"time"
)

// markFailed records that a data failure of the chunk is remembered now.
func (rs *chunkState) markFailed(now time.Time) {
	rs.corrupt.Store(true)
	rs.failedAt.CompareAndSwap(0, max(now.UnixNano(), 1))
}

// keepFailure is the Memo keep function of rs's checks: a data failure is
// kept (and dated, for forgetExpired), any other is retried.
func (s *Set) keepFailure(rs *chunkState) func(error) bool {
	return func(err error) bool {
		if !dataFailure(err) {
			return false
		}
		rs.markFailed(s.now())
		return true
	}
}

// forgetExpired drops rs's remembered data failures once they are older
// than the Set's ForgetCorruptAfter.
func (s *Set) forgetExpired(rs *chunkState) {
	at := rs.failedAt.Load()
	if at == 0 || s.now().UnixNano()-at < int64(s.forgetAfter) {
		return
	}
	if !rs.failedAt.CompareAndSwap(at, 0) {
		return // another reader forgets them
	}
	rs.mu.Lock()
	rs.streamErr = nil
	rs.mu.Unlock()
	rs.wholeMismatch.Store(false)
	rs.walk.forgetFailure()
	rs.hdrChecks.Range(func(_, v any) bool {
		v.(*Memo[struct{}]).forgetFailure()
		return true
	})
	rs.units.mu.Lock()
	for u, m := range rs.units.checks {
		if m.forgetFailure() {
			delete(rs.units.checks, u)
		}
	}
	rs.units.mismatched = nil
	rs.units.mu.Unlock()
	s.log.Info().Str("archive", s.name).Int64("age_seconds", (s.now().UnixNano()-at)/int64(time.Second)).
		Msg("forgetting a chunk's remembered data failure: its next read checks it again")
}

// repinChanged starts chunk ci's state afresh when rs, its current state,
// holds a remembered data failure and a response said its object is no
// longer the pinned one: the replaced object is then read and checked as
// a new one. A state with a unit checked whole keeps its pin (ranged reads
// rely on it); the swap happens under the units' lock, so a check that
// marks its unit done after it sees the swap (ensureUnitsIn) and fails.
func (s *Set) repinChanged(ci int32, rs *chunkState) {
	if !rs.corrupt.Load() {
		return
	}
	rs.units.mu.Lock()
	defer rs.units.mu.Unlock()
	if len(rs.units.done) > 0 {
		return
	}
	now := max(s.now().UnixNano(), 1)
	if rs.replacedAt != 0 && now-rs.replacedAt < int64(s.forgetAfter) {
		// Started afresh less than ForgetCorruptAfter ago: a store whose
		// ETag flaps would otherwise forget the failure at every response
		// and have the corrupt span read whole again for every read.
		return
	}
	fresh := newChunkState()
	fresh.replacedAt = now // not pinned to the ETag the open's listing saw (pinListed)
	if s.states[ci].CompareAndSwap(rs, fresh) {
		s.log.Info().Str("archive", s.name).Str("chunk", s.chunks[ci].Key).
			Msg("an object remembered as corrupt was replaced: reading it as a new one")
	}
}
