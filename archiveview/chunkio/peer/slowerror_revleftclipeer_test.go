package peer

import (
	"context"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
)

// TestPeerSlowErrorAnswersBackedOff: a peer that answers every ask with an
// error status, but only just within the first-byte deadline, costs each
// ask that whole wait. Such a peer goes into its back-off as a peer that
// times out does: its next frames go to their next owner; so does one
// answering a status no wharf peer answers. A quick 404 (the owner has not
// opened the archive yet), 409, 502 (it could not read that frame) or 503
// (no room just now) still costs no back-off: the owner answered at once,
// about that frame or that moment. Before, no
// error status but 403 backed the peer off, so a peer answering 500 (or
// 404, or 503) after 1.9 s of a 2 s deadline held every frame read of the
// asker 1.9 s, for as long as it kept doing it.
//
// The deadline is the default 2 s and a slow answer takes just past
// half of it (slow): a sleep is a lower bound whatever the load, so a
// slow answer is always over half, and a quick one (no sleep) has 1 s
// of the machine's slowness before it would count as slow. (With 400
// ms and 300 ms, a quick answer had 200 ms, which a loaded 2-core
// machine under -race can take.) The subtests run in parallel: each
// slow one waits about a second.
func TestPeerSlowErrorAnswersBackedOff(t *testing.T) {
	const firstByte = DefaultFirstByte
	const slow = firstByte/2 + 25*time.Millisecond // just past half (frameOnly errors: over FirstByte/2)
	for _, tc := range []struct {
		name     string
		status   int
		delay    time.Duration
		wantDown bool
	}{
		{"slow 500", http.StatusInternalServerError, slow, true},
		{"quick 500", http.StatusInternalServerError, 0, true},
		{"slow 404", http.StatusNotFound, slow, true},
		{"slow 503", http.StatusServiceUnavailable, slow, true},
		{"slow 409", http.StatusConflict, slow, true},
		{"quick 400", http.StatusBadRequest, 0, true},
		{"quick 302", http.StatusFound, 0, true},
		{"slow 502", http.StatusBadGateway, slow, true},
		{"quick 502", http.StatusBadGateway, 0, false},
		{"quick 409", http.StatusConflict, 0, false},
		{"quick 404", http.StatusNotFound, 0, false},
		{"quick 503", http.StatusServiceUnavailable, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(tc.delay)
				w.WriteHeader(tc.status)
			}))
			defer owner.Close()
			clock := &testClock{t: time.Unix(1_800_000_000, 0)}
			self := "http://127.0.0.1:1"
			g, err := New(Config{Self: self, Peers: []string{self, owner.URL}, Secret: testSecret, Now: clock.now, FirstByte: firstByte})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			id := chunkio.FrameID{Bucket: "b", Key: "k", Size: 1024, Sum: [32]byte{1}}
			if err := g.Fetch(context.Background(), owner.URL, id, make([]byte, id.Size)); err == nil {
				t.Fatal("an error answer was taken")
			}
			var st MemberPage
			for _, m := range g.Page().Ring {
				if m.URL == owner.URL {
					st = m
				}
			}
			if down := st.State == "down"; down != tc.wantDown {
				t.Errorf("after a %d in %v (deadline %v): %s (%d failures), want down %v", tc.status, tc.delay, firstByte, st.State, st.Failures, tc.wantDown)
			}
			if o, ok := g.Owner(id); tc.wantDown && ok && o == owner.URL {
				t.Errorf("the peer in its back-off still owns the next frame")
			}
		})
	}
}

// TestPeerUnaskableFrameNotAsked: a frame whose name the owner's rules
// refuse (a hostile manifest's chunk key holding a control character, or
// longer than an S3 key: 600 two-byte runes) is
// not asked at all: the owner would answer 400 to every such ask, and an
// answer no wharf peer gives backs the owner off, so one such archive
// would take the owner out of every other frame's reads. The frame is
// read from the backend (an error, no request, no back-off). Before, the
// ask was sent, refused with 400, and the owner put in its back-off.
func TestPeerUnaskableFrameNotAsked(t *testing.T) {
	var asked atomic.Int64
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if _, err := parseFrameQuery(r.URL.RawQuery, DefaultMaxFrame); err != nil {
			w.WriteHeader(http.StatusBadRequest) // as Handler does
			return
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	defer owner.Close()
	clock := &testClock{t: time.Unix(1_800_000_000, 0)}
	self := "http://127.0.0.1:1"
	g, err := New(Config{Self: self, Peers: []string{self, owner.URL}, Secret: testSecret, Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, key := range []string{"chunks/a\x01b.tar.zst", strings.Repeat("\u00e9", 600)} {
		id := chunkio.FrameID{Bucket: "b", Key: key, Size: 1024, Sum: [32]byte{1}}
		if err := g.Fetch(context.Background(), owner.URL, id, make([]byte, id.Size)); err == nil {
			t.Fatalf("key %q: fetched", key)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the owner was asked %d times for frames it refuses to name", n)
	}
	for _, m := range g.Page().Ring {
		if m.URL == owner.URL && m.State == "down" {
			t.Errorf("the owner is in its back-off after frames this replica should not have asked: %s", m.LastError)
		}
	}
}

// TestPeerSlowAnswersBackedOff: a peer answering right bytes under a
// valid MAC, but each time just within the deadline, made every read of
// the frames it owns wait that long, and was never backed off (the
// answer's success ended any back-off). An answer taking over half its
// deadline is used, and puts the peer in its back-off, which that
// answer's Accepted does not end; once it is over, a quick answer ends
// it. A quick answer never backs off.
//
// The deadline is the default 2 s and the slow answer takes just past
// half its limit (slow, from answerLimit: a sleep is a lower bound under
// any load), so it has almost 1 s of the machine's slowness before it
// would time out, and a quick one 1 s before it would count as slow.
// (With 400 ms and 300 ms: 100 ms and 200 ms.)
func TestPeerSlowAnswersBackedOff(t *testing.T) {
	const firstByte = DefaultFirstByte
	var asker *Group
	var delay atomic.Int64
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Duration(delay.Load()))
		id, _ := parseFrameQuery(r.URL.RawQuery, DefaultMaxFrame)
		w.Header().Set("Content-Length", strconv.FormatInt(id.Size, 10))
		w.Header().Set(hdrAnswer, authPre+hex.EncodeToString(asker.keys.answerMAC(r.Header.Get(hdrNonce), id.Size, id.Sum)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(make([]byte, id.Size))
	}))
	defer owner.Close()
	clock := &testClock{t: time.Unix(1_800_000_000, 0)}
	self := "http://127.0.0.1:1"
	var err error
	asker, err = New(Config{Self: self, Peers: []string{self, owner.URL}, Secret: testSecret, Now: clock.now, FirstByte: firstByte})
	if err != nil {
		t.Fatal(err)
	}
	defer asker.Close()
	id := chunkio.FrameID{Bucket: "b", Key: "k", Size: 1024, Sum: [32]byte{1}}
	slow := asker.answerLimit(id.Size)/2 + 25*time.Millisecond // just past half
	state := func() MemberPage {
		for _, m := range asker.Page().Ring {
			if m.URL == owner.URL {
				return m
			}
		}
		t.Fatal("owner not in the ring")
		return MemberPage{}
	}
	ask := func() {
		t.Helper()
		if err := asker.Fetch(context.Background(), owner.URL, id, make([]byte, id.Size)); err != nil {
			t.Fatal(err)
		}
		asker.Accepted(owner.URL, id) // the bytes pass (chunkio's check)
	}
	ask() // quick
	if st := state(); st.State != "up" {
		t.Fatalf("after a quick answer: %s, want up", st.State)
	}
	delay.Store(int64(slow)) // over half of the answer's limit
	ask()
	if st := state(); st.State != "down" || st.Failures != 1 {
		t.Fatalf("after an answer in %v of %v: %s (%d failures), want down", slow, asker.answerLimit(id.Size), st.State, st.Failures)
	}
	clock.add(time.Second + time.Millisecond)
	ask() // slow again, after the back-off: a longer one
	if st := state(); st.State != "down" || st.Failures != 2 || st.DownUntil.Sub(clock.now()) != 2*time.Second {
		t.Fatalf("after a second slow answer: %s (%d failures) until %v, want down for 2s", st.State, st.Failures, st.DownUntil.Sub(clock.now()))
	}
	clock.add(2*time.Second + time.Millisecond)
	delay.Store(0)
	ask()
	if st := state(); st.State != "up" || st.Failures != 0 {
		t.Errorf("after a quick answer again: %s (%d failures), want up", st.State, st.Failures)
	}
}
