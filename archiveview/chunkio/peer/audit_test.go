package peer

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// testClock is a settable clock for a Group (Config.Now).
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// send sends r and returns the status and the body's length.
func send(t *testing.T, r *http.Request) (int, int) {
	t.Helper()
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, int(n)
}

// TestReplayRefused: a captured signed request sent again within the date
// window gets 403 and no bytes (counted in wharf_peer_replays_total); the
// same frame asked with a fresh nonce is served. Before the replay cache
// the second send got 200 and the whole frame.
func TestReplayRefused(t *testing.T) {
	dir, key, files := testArchive(t, 4)
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	var rec *recorder
	rs := newFleet(t, 1, store, key, fleetOpts{peers: func(_ int, g *Group) chunkio.Peers {
		rec = &recorder{Group: g}
		return rec
	}})
	id := someFrame(t, rs, rec, files)
	g := rs[0].group
	captured := signedNonce(t, g, rs[0].url, id, time.Now(), "00112233445566778899aabbccddeeff", nil)
	if code, n := send(t, captured); code != http.StatusOK || int64(n) != id.Size {
		t.Fatalf("first send: %d with %d bytes, want 200 with %d", code, n, id.Size)
	}
	before := store.Requests("")
	for i := range 3 {
		if code, n := send(t, captured); code != http.StatusForbidden || n != 0 {
			t.Fatalf("replay %d: %d with %d bytes, want 403 and none", i+1, code, n)
		}
	}
	if n := store.Requests("") - before; n != 0 {
		t.Errorf("replays cost %d backend requests", n)
	}
	if got := testutil.ToFloat64(g.m.replays); got != 3 {
		t.Errorf("wharf_peer_replays_total %v, want 3", got)
	}
	if code, n := send(t, signed(t, g, rs[0].url, id, time.Now(), nil)); code != http.StatusOK || int64(n) != id.Size {
		t.Fatalf("fresh nonce: %d with %d bytes, want 200", code, n)
	}
}

// TestReplayCacheFull: with room for two requests, a third inside the
// window is refused with 503 and no bytes (never served unremembered);
// once the first two are out of the date window there is room again, and
// the cache never holds more than its cap. A replay of an expired request
// is refused by its date.
func TestReplayCacheFull(t *testing.T) {
	dir, key, files := testArchive(t, 4)
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	clock := &testClock{t: time.Now()}
	var rec *recorder
	rs := newFleet(t, 1, store, key, fleetOpts{
		cfg: func(_ int, c *Config) { c.MaxReplay, c.Now = 2, clock.now },
		peers: func(_ int, g *Group) chunkio.Peers {
			rec = &recorder{Group: g}
			return rec
		}})
	id := someFrame(t, rs, rec, files)
	g := rs[0].group
	first := signed(t, g, rs[0].url, id, clock.now(), nil)
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusServiceUnavailable, http.StatusServiceUnavailable} {
		r := first
		if i > 0 {
			r = signed(t, g, rs[0].url, id, clock.now(), nil)
		}
		code, n := send(t, r)
		if code != want || (code != http.StatusOK && n != 0) {
			t.Fatalf("request %d: %d with %d bytes, want %d", i+1, code, n, want)
		}
		if l := g.replay.len(); l > 2 {
			t.Fatalf("replay cache holds %d, cap 2", l)
		}
	}
	clock.add(DefaultMaxSkew + 2*time.Second)
	if code, n := send(t, signed(t, g, rs[0].url, id, clock.now(), nil)); code != http.StatusOK || int64(n) != id.Size {
		t.Fatalf("after the window: %d with %d bytes, want 200", code, n)
	}
	if code, n := send(t, first); code != http.StatusForbidden || n != 0 {
		t.Fatalf("the expired first request again: %d with %d bytes, want 403", code, n)
	}
	if l := g.replay.len(); l != 1 {
		t.Errorf("replay cache holds %d after the sweep, want 1", l)
	}
}
