package peer

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestPeerAsksPerOwnerBounded: a replica with 100 misses at once of frames
// one owner holds asks it at most DefaultMaxAsking of them at a time, over
// at most that many connections; the rest fall back at once (reason busy,
// no back-off: the owner stays in the ring). Before, all 100 were asked at
// once over 100 connections: one busy replica took every serving slot of
// the owner (64) and, past 1,024, every connection its listener holds, so
// the other replicas' asks were refused and put the owner in their
// back-off.
func TestPeerAsksPerOwnerBounded(t *testing.T) {
	const asks = 100
	release := make(chan struct{})
	var active, peak, conns, peakConns atomic.Int32
	raise := func(v *atomic.Int32, n int32) {
		for {
			p := v.Load()
			if n <= p || v.CompareAndSwap(p, n) {
				return
			}
		}
	}
	var asker *Group
	owner := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raise(&peak, active.Add(1))
		defer active.Add(-1)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		id, err := parseFrameQuery(r.URL.RawQuery, DefaultMaxFrame)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(id.Size, 10))
		w.Header().Set(hdrAnswer, authPre+hex.EncodeToString(asker.keys.answerMAC(r.Header.Get(hdrNonce), id.Size, id.Sum)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(make([]byte, id.Size))
	}))
	owner.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			raise(&peakConns, conns.Add(1))
		case http.StateClosed, http.StateHijacked:
			conns.Add(-1)
		}
	}
	owner.Start()
	defer owner.Close()
	self := "http://127.0.0.1:1"
	var err error
	asker, err = New(Config{Self: self, Peers: []string{self, owner.URL}, Secret: testSecret, FirstByte: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer asker.Close()

	var wg sync.WaitGroup
	var busy, ok, other atomic.Int32
	for i := range asks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := chunkio.FrameID{Bucket: "b", Key: "k", Off: int64(i) * 1024, Size: 1024}
			err := asker.Fetch(context.Background(), owner.URL, id, make([]byte, id.Size))
			var fe *fetchError
			switch {
			case err == nil:
				ok.Add(1)
			case errors.As(err, &fe) && fe.reason == reasonBusy:
				busy.Add(1)
			default:
				other.Add(1)
				t.Errorf("ask %d: %v", i, err)
			}
		}()
	}
	// Wait until every ask is either at the owner or has fallen back.
	deadline := time.Now().Add(5 * time.Second)
	for active.Load()+busy.Load()+other.Load() < asks && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // any more asks would arrive now
	atOnce, connsAtOnce := peak.Load(), peakConns.Load()
	close(release)
	wg.Wait()
	if atOnce > DefaultMaxAsking || connsAtOnce > DefaultMaxAsking {
		t.Errorf("%d asks and %d connections at the owner at once, want at most %d", atOnce, connsAtOnce, DefaultMaxAsking)
	}
	if ok.Load() == 0 || ok.Load()+busy.Load() != asks {
		t.Errorf("%d answered, %d busy, %d other of %d", ok.Load(), busy.Load(), other.Load(), asks)
	}
	if fb := testutil.ToFloat64(asker.m.fallbacks.WithLabelValues(reasonBusy)); int32(fb) != busy.Load() {
		t.Errorf("wharf_peer_fallbacks_total{reason=busy} %v, want %d", fb, busy.Load())
	}
	if got, remote := asker.Owner(chunkio.FrameID{Bucket: "b", Key: "k", Size: 1}); remote && got != owner.URL {
		t.Errorf("owner %s", got)
	}
	for _, m := range asker.Page().Ring {
		if m.State == "down" {
			t.Errorf("%s in its back-off after asks held back here", m.URL)
		}
	}
	t.Logf("%d asks, %d connections at once; %d answered, %d fell back (busy)", atOnce, connsAtOnce, ok.Load(), busy.Load())
}

// TestPeerOwnerWaitBounded: an owner asked for a frame it must fetch from
// a backend that has stopped sending gives up within the asker's own
// deadline (FirstByte + size/MinRate) and answers 503 (the asker reads the
// backend, no back-off), whatever the connection does: here the request's
// context never ends, as when an asker (or a proxy) keeps the connection
// open, or pipelines a byte so that net/http does not cancel it. Before,
// the answer slot and the frame's memory were held until the backend's
// own deadline (S3's 60 s idle read) or for ever.
func TestPeerOwnerWaitBounded(t *testing.T) {
	dir, key, files := testArchive(t, 4)
	var stall atomic.Bool
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(faults.Request) faults.Fault {
		if stall.Load() {
			return faults.Fault{Kind: faults.FaultStall}
		}
		return faults.Fault{}
	}})
	const firstByte = 200 * time.Millisecond
	var rec *recorder
	rs := newFleet(t, 1, store, key, fleetOpts{
		cfg:   func(_ int, c *Config) { c.FirstByte = firstByte },
		cache: []chunkio.CacheOption{chunkio.WithPeerCache(1)}, // no compressed copy is kept
		peers: func(_ int, g *Group) chunkio.Peers {
			rec = &recorder{Group: g}
			return rec
		},
	})
	id := someFrame(t, rs, rec, files)
	stall.Store(true)
	g := rs[0].group
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // ends the old code's wait
	req := signed(t, g, g.Self(), id, g.now(), nil).WithContext(ctx)
	w := httptest.NewRecorder()
	done := make(chan struct{})
	start := time.Now()
	go func() {
		g.Handler(rs[0].cache).ServeHTTP(w, req)
		close(done)
	}()
	limit := firstByte + time.Duration(float64(id.Size)/DefaultMinRate*float64(time.Second))
	select {
	case <-done:
	case <-time.After(limit + 5*time.Second):
		t.Fatalf("the owner still waits for the stalled backend %v after the ask, the asker's deadline being %v", time.Since(start).Round(time.Millisecond), limit)
	}
	took := time.Since(start)
	if w.Code != http.StatusServiceUnavailable || w.Body.Len() != 0 {
		t.Errorf("answer %d with %d bytes, want 503 and none", w.Code, w.Body.Len())
	}
	if took < limit || took > limit+2*time.Second {
		t.Errorf("the owner gave up after %v, want its deadline %v", took, limit)
	}
	if n := len(g.serving); n != 0 {
		t.Errorf("%d answer slots held after the answer", n)
	}
	t.Logf("owner gave up after %v (deadline %v)", took.Round(time.Millisecond), limit)
}

// TestPeerCachedFramesDoNotLockOutTheirAsker: the compressed frames an
// owner fetched for an asker and keeps for the others (its peer cache) are
// charged to that asker's client share ("peer <URL>"), which its later
// asks must then find room in. A client short of its share evicts its own
// cached frames; before, only decoded ones, so once the peer cache held a
// share's worth of one asker's frames, the owner refused that asker (503,
// read from the backend) for as long as they stayed cached, with its
// memory nowhere near full. Here a share of 0.8 MiB and a peer cache of
// 8 MiB: every ask must be answered.
func TestPeerCachedFramesDoNotLockOutTheirAsker(t *testing.T) {
	dir, key, files := testArchiveWith(t, 240, 20<<10, cargopack.Options{FrameSize: 16 << 10})
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	rs := newFleet(t, 2, store, key, fleetOpts{
		cacheBytes: 16 << 20,
		cache:      []chunkio.CacheOption{chunkio.WithMemory(16 << 20), chunkio.WithClientShare(0.05), chunkio.WithPeerCache(8 << 20)},
	})
	for k, b := range files {
		rs[0].readAll(t, k, b)
	}
	owner := rs[1]
	served := testutil.ToFloat64(owner.group.m.served.WithLabelValues("200"))
	busy := testutil.ToFloat64(owner.group.m.served.WithLabelValues("503"))
	share, _ := owner.cache.Limits().ClientShare()
	t.Logf("owner answered %v, refused %v (503); peer cache %d bytes, the asker's share %d", served, busy, owner.cache.PeerBytes(), share)
	if served == 0 {
		t.Fatal("no ask was answered: did the owner own any frame?")
	}
	if busy != 0 {
		t.Errorf("the owner refused %v asks (503) with %d of %d bytes in use; its peer cache holds %d bytes, the asker's share is %d",
			busy, func() int64 { u, _ := owner.cache.MemoryInUse(); return u }(), owner.cache.MemoryBudget(), owner.cache.PeerBytes(), share)
	}
	if fb := testutil.ToFloat64(rs[0].group.m.fallbacks.WithLabelValues(reasonBusy)); fb != busy {
		t.Errorf("asker: %v busy fallbacks, owner: %v refusals", fb, busy)
	}
}

// TestPeerBackoffGrowsForBodyLies: a peer whose answers pass their MAC and
// length but whose bytes fail the frame's sha256 (a peer holding the
// secret that lies, or a proxy flipping body bytes, which the answer MAC
// does not cover) is skipped for a back-off that doubles while it keeps
// lying (1 s, 2 s, 4 s, 8 s), as for any other failure; an answer whose
// bytes pass ends it. Before, Fetch counted the answer a success (failures
// back to 0) before chunkio checked its bytes, so the back-off stayed at
// 1 s for ever: one lie per second per asker instead of one per 30 s.
func TestPeerBackoffGrowsForBodyLies(t *testing.T) {
	var asker *Group
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := parseFrameQuery(r.URL.RawQuery, DefaultMaxFrame)
		w.Header().Set("Content-Length", strconv.FormatInt(id.Size, 10))
		w.Header().Set(hdrAnswer, authPre+hex.EncodeToString(asker.keys.answerMAC(r.Header.Get(hdrNonce), id.Size, id.Sum)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(make([]byte, id.Size)) // the frame's length, not its bytes
	}))
	defer owner.Close()
	clock := &testClock{t: time.Unix(1_800_000_000, 0)}
	self := "http://127.0.0.1:1"
	var err error
	asker, err = New(Config{Self: self, Peers: []string{self, owner.URL}, Secret: testSecret, Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	defer asker.Close()
	id := chunkio.FrameID{Bucket: "b", Key: "k", Size: 1024, Sum: [32]byte{1}}
	state := func() MemberPage {
		for _, m := range asker.Page().Ring {
			if m.URL == owner.URL {
				return m
			}
		}
		t.Fatal("owner not in the ring")
		return MemberPage{}
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		// What chunkio does: Fetch, then the sha256 check fails: Rejected.
		if err := asker.Fetch(context.Background(), owner.URL, id, make([]byte, id.Size)); err != nil {
			t.Fatalf("lie %d: %v", i+1, err)
		}
		asker.Rejected(owner.URL, id, errors.New("sha256 mismatch"))
		st := state()
		if got := st.DownUntil.Sub(clock.now()); st.State != "down" || got != want {
			t.Errorf("after lie %d: %s for %v (%d failures), want down for %v", i+1, st.State, got, st.Failures, want)
		}
		clock.add(want + time.Millisecond) // the back-off ends: the owner is asked again
	}
	// An answer whose bytes pass ends the back-off.
	if err := asker.Fetch(context.Background(), owner.URL, id, make([]byte, id.Size)); err != nil {
		t.Fatal(err)
	}
	asker.Accepted(owner.URL, id)
	if st := state(); st.State != "up" || st.Failures != 0 {
		t.Errorf("after a good answer: %s, %d failures; want up, 0", st.State, st.Failures)
	}
}

// TestPeerBackoffCountsOneIncidentOnce: asks in flight together that fail
// together (a peer that stalls for a moment) are one failure, not one
// each: the peer is skipped for 1 s, as after any first failure. Before,
// each of the 10 asks counted, and one stall put the peer in its longest
// back-off (30 s) at once, its frames read from the backend meanwhile.
func TestPeerBackoffCountsOneIncidentOnce(t *testing.T) {
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // stalls until the asker gives up
	}))
	defer owner.Close()
	clock := &testClock{t: time.Unix(1_800_000_000, 0)}
	self := "http://127.0.0.1:1"
	g, err := New(Config{Self: self, Peers: []string{self, owner.URL}, Secret: testSecret, Now: clock.now, FirstByte: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := chunkio.FrameID{Bucket: "b", Key: "k", Off: int64(i) * 1024, Size: 1024}
			if err := g.Fetch(context.Background(), owner.URL, id, make([]byte, id.Size)); err == nil {
				t.Error("a stalled ask succeeded")
			}
		}()
	}
	wg.Wait()
	if fb := testutil.ToFloat64(g.m.fallbacks.WithLabelValues(reasonTimeout)); fb != 10 {
		t.Errorf("%v timeout fallbacks, want 10", fb)
	}
	for _, m := range g.Page().Ring {
		if m.URL != owner.URL {
			continue
		}
		if got := m.DownUntil.Sub(clock.now()); m.State != "down" || got != time.Second || m.Failures != 1 {
			t.Errorf("after one stall: %s for %v with %d failures, want down for 1s with 1", m.State, got, m.Failures)
		}
	}
}

// TestPeerAsksLeaveOwnReadsGetSlots: peers' asks of frames the owner must
// fetch from a backend that is slow to answer them take at most half of
// the owner's backend GET slots (here 2 of 4); the rest get 503 (the
// askers read the backend themselves), so the owner's own client still
// gets a GET slot at once. Before, a peer's fetch took GET slots like a
// read and eight asks took all four: the owner's own read waited its
// MemoryWait for a slot and failed (ErrBusy), its client refused while
// the peers' fetches stalled.
func TestPeerAsksLeaveOwnReadsGetSlots(t *testing.T) {
	dir, key, files := testArchive(t, 12)
	var names []string
	for k := range files {
		names = append(names, k)
	}
	slices.Sort(names)
	var stalled sync.Map                // frame offsets whose GETs stall
	var hit sync.Map                    // stalled offsets whose GET came in
	settled := make(chan struct{}, 256) // one per ask: its GET stalls, or it was answered
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		if _, ok := stalled.Load(r.Off); ok && r.Op == "range" {
			if _, again := hit.LoadOrStore(r.Off, true); !again {
				settled <- struct{}{}
			}
			return faults.Fault{Kind: faults.FaultStall}
		}
		return faults.Fault{}
	}})
	var rec *recorder
	rs := newFleet(t, 1, store, key, fleetOpts{
		cfg: func(_ int, c *Config) { c.FirstByte = 3 * time.Second },
		cache: []chunkio.CacheOption{chunkio.WithPeerCache(1), chunkio.WithMaxParts(4),
			chunkio.WithMemoryWait(time.Second), chunkio.WithMemory(64 << 20)},
		peers: func(_ int, g *Group) chunkio.Peers {
			rec = &recorder{Group: g}
			return rec
		},
	})
	for _, k := range names[:8] { // their frames are known (and cached decoded, not compressed)
		rs[0].readAll(t, k, files[k])
	}
	rec.mu.Lock()
	var ids []chunkio.FrameID
	seen := map[int64]bool{}
	for _, id := range rec.ids {
		if !seen[id.Off] {
			seen[id.Off] = true
			ids = append(ids, id)
		}
	}
	rec.mu.Unlock()
	if len(ids) < 8 {
		t.Fatalf("%d frames known, want 8", len(ids))
	}
	g := rs[0].group
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, id := range ids[:8] {
		stalled.Store(id.Off, true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.Handler(rs[0].cache).ServeHTTP(httptest.NewRecorder(), signed(t, g, g.Self(), id, g.now(), nil).WithContext(ctx))
			if _, ok := hit.Load(id.Off); !ok {
				settled <- struct{}{} // answered without a GET (503)
			}
		}()
	}
	waitSettled(t, settled, 8) // every ask's fetch is out, stalled, or it was answered
	start := time.Now()
	k := names[10] // not read yet: its frames need the backend
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	f, _ := rs[0].arch.Stat(k)
	rc, err := rs[0].arch.Open(rctx, f, 0, f.Size)
	var got []byte
	if err == nil {
		got, err = io.ReadAll(rc)
		rc.Close()
	}
	took := time.Since(start)
	if err != nil || !bytes.Equal(got, files[k]) {
		t.Fatalf("the owner's own read while peers' asks stall: %v after %v (%d bytes)", err, took.Round(time.Millisecond), len(got))
	}
	// A read that waited for what the stalled asks hold fails at its
	// memory wait (they hold it until the test ends): one that took as
	// long without failing waited too. (Not a guess of the machine's
	// speed: the read itself takes a few ms.)
	if took >= time.Second {
		t.Errorf("the owner's own read took %v while peers' asks stall, its whole memory wait", took)
	}
	t.Logf("own read %v; peer answers 503: %v", took.Round(time.Millisecond), testutil.ToFloat64(g.m.served.WithLabelValues("503")))
}

// TestPeerAsksLeaveOwnReadsMemory: peers' asks of frames the owner must
// fetch from a backend that is slow to answer them hold at most half of
// its read memory while they wait (the rest get 503, and the askers read
// the backend themselves), so the owner's own client still finds memory.
// Before, their takes were bounded only per asker (the client share, off
// here as with --client-memory-share 1, or split among several askers):
// stalled peer fetches held all of it, and the owner's own read waited its
// MemoryWait and failed (ErrBusy).
func TestPeerAsksLeaveOwnReadsMemory(t *testing.T) {
	dir, key, files := testArchiveWith(t, 40, 300<<10, cargopack.Options{FrameSize: 256 << 10})
	var names []string
	for k := range files {
		names = append(names, k)
	}
	slices.Sort(names)
	var stalled sync.Map
	var hit sync.Map                    // stalled offsets whose GET came in
	settled := make(chan struct{}, 256) // one per ask: its GET stalls, or it was answered
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		if _, ok := stalled.Load(r.Off); ok && r.Op == "range" {
			if _, again := hit.LoadOrStore(r.Off, true); !again {
				settled <- struct{}{}
			}
			return faults.Fault{Kind: faults.FaultStall}
		}
		return faults.Fault{}
	}})
	const memory = 3 << 20
	var rec *recorder
	rs := newFleet(t, 1, store, key, fleetOpts{
		cfg:        func(_ int, c *Config) { c.FirstByte = 3 * time.Second },
		cacheBytes: memory,
		cache: []chunkio.CacheOption{chunkio.WithPeerCache(1), chunkio.WithMemory(memory), chunkio.WithClientShare(1),
			chunkio.WithMemoryWait(time.Second)},
		peers: func(_ int, g *Group) chunkio.Peers {
			rec = &recorder{Group: g}
			return rec
		},
	})
	for _, k := range names[:24] {
		rs[0].readAll(t, k, files[k])
	}
	rec.mu.Lock()
	var ids []chunkio.FrameID
	seen := map[int64]bool{}
	for _, id := range rec.ids {
		if !seen[id.Off] {
			seen[id.Off] = true
			ids = append(ids, id)
		}
	}
	rec.mu.Unlock()
	const asks = 30
	if len(ids) < asks {
		t.Fatalf("%d frames known, want %d", len(ids), asks)
	}
	var askBytes int64
	for _, id := range ids[:asks] {
		askBytes += id.Size
	}
	if askBytes < memory {
		t.Fatalf("the asks' frames are %d bytes, less than the %d of memory: the test shows nothing", askBytes, memory)
	}
	g := rs[0].group
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, id := range ids[:asks] {
		stalled.Store(id.Off, true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.Handler(rs[0].cache).ServeHTTP(httptest.NewRecorder(), signed(t, g, g.Self(), id, g.now(), nil).WithContext(ctx))
			if _, ok := hit.Load(id.Off); !ok {
				settled <- struct{}{} // answered without a GET (503)
			}
		}()
	}
	waitSettled(t, settled, asks) // every ask's fetch is out, stalled, or it was answered
	used, _ := rs[0].cache.MemoryInUse()
	start := time.Now()
	k := names[30] // not read yet
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	f, _ := rs[0].arch.Stat(k)
	rc, err := rs[0].arch.Open(rctx, f, 0, f.Size)
	var got []byte
	if err == nil {
		got, err = io.ReadAll(rc)
		rc.Close()
	}
	took := time.Since(start)
	if err != nil || !bytes.Equal(got, files[k]) {
		t.Fatalf("the owner's own read while peers' asks stall (%d of %d bytes in use): %v after %v", used, memory, err, took.Round(time.Millisecond))
	}
	// A read that waited for what the stalled asks hold fails at its
	// memory wait (they hold it until the test ends): one that took as
	// long without failing waited too. (Not a guess of the machine's
	// speed: the read itself takes a few ms.)
	if took >= time.Second {
		t.Errorf("the owner's own read took %v while peers' asks stall, its whole memory wait", took)
	}
	t.Logf("%d of %d bytes in use while %d asks stall; own read %v; 503: %v", used, memory, asks, took.Round(time.Millisecond), testutil.ToFloat64(g.m.served.WithLabelValues("503")))
}

// waitSettled waits for n events on settled (each ask: its backend GET
// stalls, or it was answered without one), a minute at most.
func waitSettled(t *testing.T, settled <-chan struct{}, n int) {
	t.Helper()
	timeout := time.After(time.Minute)
	for i := range n {
		select {
		case <-settled:
		case <-timeout:
			t.Fatalf("%d of %d asks settled (a GET stalled, or answered) in a minute", i, n)
		}
	}
}
