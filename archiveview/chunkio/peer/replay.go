package peer

import (
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// DefaultMaxReplay is how many authenticated requests an owner remembers
// at once to refuse their replays (Config.MaxReplay). Each costs about 80
// bytes with the map's overhead (4.9 MiB for all 65,536, measured);
// 65,536 within the 30 s window is about 2,000 answers a second, more
// than 64 answers in flight move at any realistic speed.
const DefaultMaxReplay = 1 << 16

var (
	// errReplay: a request whose (sender, nonce) was served already.
	errReplay = errors.New("a replay of a request already served (same sender and nonce)")
	// errReplayFull: the replay cache is full of requests still inside the
	// window; a new one cannot be remembered, so it is not served.
	errReplayFull = errors.New("replay cache full")
	// errBeforeStart: an authentic request dated before this process
	// started. The previous process of this replica may have served it,
	// and its replay cache did not survive the restart, so the request
	// cannot be told from a replay: it is not served (503: the asker
	// reads the backend, no back-off; an asker whose clock is behind this
	// replica's is refused so for as long as it is behind).
	errBeforeStart = errors.New("dated before this replica started (a request its previous process may have served)")
)

// replayKey names one request: its nonce and the hash of its sender.
type replayKey struct {
	nonce [16]byte
	from  uint64
}

// replayCache remembers the (sender, nonce) of every authenticated
// request until its date leaves the skew window (after which the date
// check refuses it anyway), so that each signed request is served once.
// Its size is capped: when it is full of requests still inside their
// window, new requests are refused (errReplayFull) rather than an entry
// forgotten, which would let that request be replayed. Only requests with
// a valid MAC get here, so only a holder of the secret can fill it, and a
// refusal costs the asker one backend fetch (503 is "busy", no back-off).
type replayCache struct {
	mu   sync.Mutex
	max  int
	seen map[replayKey]int64 // Unix second after which the entry can go
	// next is the earliest expiry in seen: no sweep is worth doing
	// before it (so a full cache refuses in O(1)).
	next int64
}

func newReplayCache(max int) *replayCache {
	return &replayCache{max: max, seen: make(map[replayKey]int64)}
}

// admit records the request (nonce, from) dated date, remembered until
// date+skew, and fails with errReplay when it was seen and errReplayFull
// when there is no room.
func (c *replayCache) admit(nonce, from string, date time.Time, skew time.Duration, now time.Time) error {
	var k replayKey
	if _, err := hex.Decode(k.nonce[:], []byte(nonce)); err != nil {
		return err // validNonce was checked: not reached
	}
	k.from = hash64([]byte(from))
	exp := date.Add(skew).Unix() + 1
	t := now.Unix()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.seen[k]; ok && t < e {
		return errReplay
	}
	if len(c.seen) >= c.max && t >= c.next {
		c.sweep(t)
	}
	if len(c.seen) >= c.max {
		return errReplayFull
	}
	c.seen[k] = exp
	if len(c.seen) == 1 || exp < c.next {
		c.next = exp
	}
	return nil
}

// sweep drops the entries expired at t and recomputes next.
func (c *replayCache) sweep(t int64) {
	c.next = 0
	for k, e := range c.seen {
		if t >= e {
			delete(c.seen, k)
		} else if c.next == 0 || e < c.next {
			c.next = e
		}
	}
}

// len is the number of requests remembered.
func (c *replayCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}
