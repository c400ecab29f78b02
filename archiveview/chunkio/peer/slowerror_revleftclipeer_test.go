package peer

import (
	"context"
	"net/http"
	"net/http/httptest"
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
func TestPeerSlowErrorAnswersBackedOff(t *testing.T) {
	const firstByte = 400 * time.Millisecond
	for _, tc := range []struct {
		name     string
		status   int
		delay    time.Duration
		wantDown bool
	}{
		{"slow 500", http.StatusInternalServerError, 300 * time.Millisecond, true},
		{"quick 500", http.StatusInternalServerError, 0, true},
		{"slow 404", http.StatusNotFound, 300 * time.Millisecond, true},
		{"slow 503", http.StatusServiceUnavailable, 300 * time.Millisecond, true},
		{"slow 409", http.StatusConflict, 300 * time.Millisecond, true},
		{"quick 400", http.StatusBadRequest, 0, true},
		{"quick 302", http.StatusFound, 0, true},
		{"slow 502", http.StatusBadGateway, 300 * time.Millisecond, true},
		{"quick 502", http.StatusBadGateway, 0, false},
		{"quick 409", http.StatusConflict, 0, false},
		{"quick 404", http.StatusNotFound, 0, false},
		{"quick 503", http.StatusServiceUnavailable, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
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
