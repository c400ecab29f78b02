package peer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
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

// TestPeerReplayRefused: a captured signed request sent again within the date
// window gets 403 and no bytes (counted in wharf_peer_replays_total); the
// same frame asked with a fresh nonce is served. Before the replay cache
// the second send got 200 and the whole frame.
func TestPeerReplayRefused(t *testing.T) {
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

// TestPeerReplayAfterRestart: a request dated before the owner's process
// started, though authentic, addressed to it and inside MaxSkew, may have
// been served by the owner's previous process (whose replay cache died
// with it): a replay of it is refused with 503 and no bytes, costing no
// backend request, while a request dated since the start is served. The
// old code served it (200 with the frame) to anyone who had captured it
// within the 30 s before a restart.
func TestPeerReplayAfterRestart(t *testing.T) {
	dir, key, files := testArchive(t, 4)
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	clock := &testClock{t: time.Now()}
	var rec *recorder
	rs := newFleet(t, 1, store, key, fleetOpts{
		cfg: func(_ int, c *Config) { c.Now = clock.now },
		peers: func(_ int, g *Group) chunkio.Peers {
			rec = &recorder{Group: g}
			return rec
		}})
	id := someFrame(t, rs, rec, files)
	g := rs[0].group
	before := store.Requests("")
	for _, ago := range []time.Duration{DefaultMaxSkew / 2, 2 * time.Second} {
		captured := signed(t, g, rs[0].url, id, clock.now().Add(-ago), nil)
		if code, n := send(t, captured); code != http.StatusServiceUnavailable || n != 0 {
			t.Fatalf("a request dated %v before the start: %d with %d bytes, want 503 and none", ago, code, n)
		}
	}
	if n := store.Requests("") - before; n != 0 {
		t.Errorf("the refusals cost %d backend requests", n)
	}
	clock.add(time.Second)
	if code, n := send(t, signed(t, g, rs[0].url, id, clock.now(), nil)); code != http.StatusOK || int64(n) != id.Size {
		t.Fatalf("a request dated after the start: %d with %d bytes, want 200 with %d", code, n, id.Size)
	}
}

// TestPeerReplayCacheFull: with room for two requests, a third inside the
// window is refused with 503 and no bytes (never served unremembered);
// once the first two are out of the date window there is room again, and
// the cache never holds more than its cap. A replay of an expired request
// is refused by its date.
func TestPeerReplayCacheFull(t *testing.T) {
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

// trickler answers like a peer holding the secret (a valid answer MAC and
// length) and then sends the body one byte every 10 ms: a slowloris
// answer. active counts the answers in progress.
type trickler struct {
	g      *Group
	active atomic.Int32
	sent   atomic.Int64
}

func (tr *trickler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tr.active.Add(1)
	defer tr.active.Add(-1)
	id, err := parseFrameQuery(r.URL.RawQuery, DefaultMaxFrame)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(id.Size, 10))
	w.Header().Set(hdrAnswer, authPre+hex.EncodeToString(tr.g.keys.answerMAC(r.Header.Get(hdrNonce), id.Size, id.Sum)))
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for range id.Size {
		if _, err := w.Write([]byte{0}); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
		tr.sent.Add(1)
		select {
		case <-r.Context().Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestTricklingPeerDeadline: an owner that answers its headers at once
// and then trickles the body (1 byte per 10 ms; a frame would take
// minutes) holds the asker's fetch no longer than FirstByte + size/MinRate
// (plus scheduling slack), the fetch fails as a timeout and costs a
// fallback, every byte read is exact, the asker's memory all goes back to
// its caches, and the trickling answers end (the asker closed them).
func TestTricklingPeerDeadline(t *testing.T) {
	dir, key, files := testArchive(t, 12)
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	const firstByte, minRate = 200 * time.Millisecond, 64 << 10
	tr := &trickler{}
	rs := newFleet(t, 2, store, key, fleetOpts{
		cfg: func(_ int, c *Config) { c.FirstByte, c.MinRate = firstByte, minRate },
		peers: func(i int, g *Group) chunkio.Peers {
			if i == 1 {
				tr.g = g // the trickler holds the secret
			}
			return g
		},
		wrap: func(i int, h http.Handler) http.Handler {
			if i == 1 {
				return tr
			}
			return h
		},
	})
	for k, b := range files {
		rs[0].readAll(t, k, b)
	}
	if fb := testutil.ToFloat64(rs[0].group.m.fallbacks.WithLabelValues(reasonTimeout)); fb == 0 {
		t.Fatal("no timeout fallback: was any frame owned by the trickling peer?")
	}
	rs[0].arch.Close()
	used, peak := rs[0].cache.MemoryInUse()
	held := rs[0].cache.Bytes() + rs[0].cache.PeerBytes()
	if _, pinned := rs[0].cache.Pinned(); used != held || pinned != 0 || peak > rs[0].cache.MemoryBudget() {
		t.Errorf("asker: %d bytes charged, %d held in the caches, %d pinned; peak %d of %d", used, held, pinned, peak, rs[0].cache.MemoryBudget())
	}

	// One fetch, timed: the deadline is the documented one.
	id := chunkio.FrameID{Bucket: "arch", Key: "team/x.tar.zst", Off: 0, Size: 32 << 10}
	limit := firstByte + time.Duration(float64(id.Size)/minRate*float64(time.Second))
	start := time.Now()
	err := rs[0].group.Fetch(context.Background(), rs[1].url, id, make([]byte, id.Size))
	took := time.Since(start)
	var fe *fetchError
	if !errors.As(err, &fe) || fe.reason != reasonTimeout {
		t.Fatalf("fetch from a trickling peer: %v, want a timeout", err)
	}
	if took < limit-50*time.Millisecond || took > limit+time.Second {
		t.Errorf("fetch took %v, want about its deadline %v", took, limit)
	}
	deadline := time.Now().Add(5 * time.Second)
	for tr.active.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := tr.active.Load(); n != 0 {
		t.Errorf("%d trickling answers still running after the asker gave up", n)
	}
	t.Logf("fetch gave up after %v (deadline %v); %d bytes trickled in all", took, limit, tr.sent.Load())
}

// smallBuffers gives every accepted connection a small send buffer, so
// that an answer larger than the socket buffers needs a reader.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4 << 10)
	}
	return c, err
}

// TestPeerSlowReadingAsker: an asker (holding the secret) that sends a valid
// request and then reads nothing cannot hold the owner's answer, its
// buffer or its answer slot past the write deadline (FirstByte +
// size/MinRate): the answer is cut there, the slot is free, the
// connection closed, and the owner's memory all goes back to its caches.
// Without the write deadline the answer waits for the reader for ever
// (the test fails).
func TestPeerSlowReadingAsker(t *testing.T) {
	dir, key, files := testArchiveWith(t, 1, 1<<20, cargopack.Options{FrameSize: 1 << 20})
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	const firstByte = 200 * time.Millisecond
	var rec *recorder
	rs := newFleet(t, 1, store, key, fleetOpts{
		cfg:        func(_ int, c *Config) { c.FirstByte = firstByte },
		listener:   func(_ int, ln net.Listener) net.Listener { return smallBuffers{ln} },
		cacheBytes: 16 << 20,
		peers: func(_ int, g *Group) chunkio.Peers {
			rec = &recorder{Group: g}
			return rec
		}})
	id := someFrame(t, rs, rec, files)
	g := rs[0].group
	limit := firstByte + time.Duration(float64(id.Size)/DefaultMinRate*float64(time.Second))

	conn, err := net.Dial("tcp", rs[0].ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	start := time.Now()
	if err := signed(t, g, rs[0].url, id, time.Now(), nil).Write(conn); err != nil {
		t.Fatal(err)
	}
	for len(g.serving) == 0 && time.Since(start) < time.Second {
		time.Sleep(time.Millisecond)
	}
	for len(g.serving) != 0 && time.Since(start) < limit+5*time.Second {
		time.Sleep(5 * time.Millisecond)
	}
	held := time.Since(start)
	if n := len(g.serving); n != 0 {
		t.Fatalf("the answer to a reader that reads nothing still holds its slot after %v (write deadline %v)", held, limit)
	}
	if held > limit+time.Second {
		t.Errorf("the answer held its slot %v, want at most its write deadline %v (+1 s)", held, limit)
	}
	out := testutil.ToFloat64(g.m.bytesOut)
	if out >= float64(id.Size) {
		t.Fatalf("all %v bytes went into the socket buffers: the frame (%d bytes) is too small to test a stalled reader", out, id.Size)
	}
	// The owner closed the connection: what is left in the buffers is
	// read, then the end, well before the read deadline.
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	got, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("the owner kept the connection open after cutting the answer")
	}
	if got >= id.Size {
		t.Errorf("the stalled reader got %d bytes, the whole frame (%d)", got, id.Size)
	}
	used, _ := rs[0].cache.MemoryInUse()
	if inCaches := rs[0].cache.Bytes() + rs[0].cache.PeerBytes(); used != inCaches {
		t.Errorf("owner: %d bytes charged, %d held in the caches", used, inCaches)
	}
	t.Logf("frame %d bytes: answer cut after %v (deadline %v), %v bytes sent, %d read", id.Size, held, limit, out, got)
}

// series is the number of series of the metric name in reg.
func series(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

// TestPeerMembersBounded: a DNS answer of 5,000 addresses makes a ring of at
// most MaxMembers replicas and self (the same lowest URLs on every
// replica), with as many verify-failure series; when the addresses change
// (pods replaced), the series and the states of the members that left go
// with them, so churn does not grow either. Before the cap the ring held
// all 5,001 and every address ever seen kept its series.
func TestPeerMembersBounded(t *testing.T) {
	res := &fakeResolver{}
	var many []string
	for i := range 5000 {
		many = append(many, fmt.Sprintf("10.1.%d.%d", i/250, i%250+1))
	}
	res.set(many, nil)
	reg := prometheus.NewRegistry()
	newGroup := func(self string, reg prometheus.Registerer) *Group {
		g, err := New(Config{Self: self, Peers: []string{"dns+http://wharf-peers.ns.svc:7946"},
			Secret: testSecret, Resolver: res, ResolveEvery: time.Hour, Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Close)
		g.Resolve(context.Background())
		return g
	}
	g := newGroup("http://10.1.0.1:7946", reg)
	other := newGroup("http://10.1.19.250:7946", nil)
	m := g.Members()
	if len(m) > MaxMembers+1 {
		t.Fatalf("%d members from a DNS answer of 5000 addresses, want at most %d", len(m), MaxMembers+1)
	}
	om := other.Members()
	if !slices.Equal(slices.DeleteFunc(slices.Clone(om), func(u string) bool { return u == other.Self() }), m[:MaxMembers]) {
		t.Errorf("two replicas with the same DNS answer keep different members")
	}
	if n := series(t, reg, "wharf_peer_verify_failures_total"); n > MaxMembers {
		t.Errorf("%d verify-failure series, want at most %d", n, MaxMembers)
	}
	gone := m[1]
	g.down(gone, errors.New("test"))

	res.set([]string{"10.2.0.1", "10.2.0.2", "10.1.0.1"}, nil)
	g.Resolve(context.Background())
	want := []string{"http://10.1.0.1:7946", "http://10.2.0.1:7946", "http://10.2.0.2:7946"}
	if got := g.Members(); !slices.Equal(got, want) {
		t.Fatalf("after the change: %v, want %v", got, want)
	}
	if n := series(t, reg, "wharf_peer_verify_failures_total"); n != 2 {
		t.Errorf("%d verify-failure series after the change, want 2 (the peers now)", n)
	}
	g.mu.Lock()
	_, kept := g.states[gone]
	g.mu.Unlock()
	if kept {
		t.Errorf("the state of %s, which left the ring, is still kept", gone)
	}
	g.down(gone, errors.New("a fetch that was in flight"))
	g.failedVerify(gone)
	if n := series(t, reg, "wharf_peer_verify_failures_total"); n != 2 {
		t.Errorf("a late failure of a departed member brought its series back (%d series)", n)
	}
}

// TestPeerRefusalLogBounded: a flood of unauthenticated requests (anyone who
// reaches the peer port) writes at most one log line per refusalLogEvery,
// even at debug level, and the next line counts what the previous ones
// left out. Before, every refusal was a line.
func TestPeerRefusalLogBounded(t *testing.T) {
	var logs bytes.Buffer
	clock := &testClock{t: time.Now()}
	g, err := New(Config{Self: "http://10.0.0.1:1", Peers: []string{"http://10.0.0.1:1"}, Secret: testSecret,
		Logger: zerolog.New(&logs).Level(zerolog.DebugLevel), Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	h := g.Handler(chunkio.NewFrameCache(1<<20, chunkio.WithPeers(g)))
	flood := func(n int) {
		for range n {
			r := httptest.NewRequest(http.MethodGet, "http://10.0.0.1:1"+framePath+"?"+frameQuery(chunkio.FrameID{Bucket: "b", Key: "k", Size: 1}), nil)
			r.Header.Set(hdrAuth, authPre+strings.Repeat("0", 64))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusForbidden {
				t.Fatalf("unsigned request: %d", w.Code)
			}
		}
	}
	lines := func() []string {
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			if strings.Contains(l, "refused") {
				out = append(out, l)
			}
		}
		return out
	}
	flood(500)
	if l := lines(); len(l) != 1 {
		t.Fatalf("500 refusals in one period: %d log lines, want 1", len(l))
	}
	clock.add(refusalLogEvery + time.Second)
	flood(1)
	l := lines()
	if len(l) != 2 || !strings.Contains(l[1], `"refused":500`) {
		t.Fatalf("the next period: lines %q, want a second one counting 500 refusals", l)
	}
}

// TestPeerListenerCapsConnections: with room for 3 connections, 3 idle
// connections that send nothing (no authentication yet) are held and a
// 4th is closed at once, counted; when one of the 3 goes, a new
// connection is served again. Without the cap the 4th stays open.
func TestPeerListenerCapsConnections(t *testing.T) {
	g, err := New(Config{Self: "http://10.0.0.1:1", Peers: []string{"http://10.0.0.1:1"}, Secret: testSecret, MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: g.Handler(chunkio.NewFrameCache(1<<20, chunkio.WithPeers(g))), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(g.Listener(ln))
	defer srv.Close()
	addr := ln.Addr().String()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// open reports whether c is still open 300 ms after it was made
	// (nothing is sent, so the server has nothing to answer).
	open := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout()
	}
	var held []net.Conn
	for i := range 3 {
		c := dial()
		defer c.Close()
		if !open(c) {
			t.Fatalf("connection %d of 3 closed", i+1)
		}
		held = append(held, c)
	}
	extra := dial()
	defer extra.Close()
	if open(extra) {
		t.Fatal("a 4th connection was held beyond the cap of 3")
	}
	if n := testutil.ToFloat64(g.m.connsRefused); n != 1 {
		t.Errorf("wharf_peer_connections_refused_total %v, want 1", n)
	}
	held[0].Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		c := dial()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		_ = req.Write(c)
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), req)
		c.Close()
		if err == nil && resp.StatusCode == http.StatusForbidden {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection served after one of the 3 closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPeerOversizeAnswers: an answer (from a peer holding the secret, so with
// valid MACs where it can) that is larger than what was asked is refused
// without reading past the frame: headers over 16 KiB, a length other than
// the frame's, no length (chunked); bytes beyond the declared length are
// never read. Before, the asker took headers up to net/http's 10 MB
// default.
func TestPeerOversizeAnswers(t *testing.T) {
	var mode atomic.Value
	var owner *Group
	answer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := parseFrameQuery(r.URL.RawQuery, DefaultMaxFrame)
		nonce := r.Header.Get(hdrNonce)
		mac := authPre + hex.EncodeToString(owner.keys.answerMAC(nonce, id.Size, id.Sum))
		switch mode.Load().(string) {
		case "huge headers":
			w.Header().Set(hdrAnswer, mac)
			for i := range 64 {
				w.Header().Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("p", 1000))
			}
			w.Header().Set("Content-Length", strconv.FormatInt(id.Size, 10))
			w.WriteHeader(http.StatusOK)
			w.Write(make([]byte, id.Size))
		case "longer than the frame":
			n := id.Size + 1<<20
			w.Header().Set(hdrAnswer, authPre+hex.EncodeToString(owner.keys.answerMAC(nonce, n, id.Sum)))
			w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
			w.WriteHeader(http.StatusOK)
			w.Write(make([]byte, n))
		case "chunked":
			w.Header().Set(hdrAnswer, mac)
			w.WriteHeader(http.StatusOK)
			for range 4 {
				w.Write(make([]byte, id.Size))
				http.NewResponseController(w).Flush()
			}
		case "more bytes than declared":
			conn, bw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s: %s\r\n\r\n", id.Size, hdrAnswer, mac)
			bw.Write(make([]byte, id.Size+1<<20))
			bw.Flush()
		}
	})
	dir, key, _ := testArchive(t, 1)
	rs := newFleet(t, 2, backend.NewFileStore(dir), key, fleetOpts{
		peers: func(i int, g *Group) chunkio.Peers {
			if i == 1 {
				owner = g
			}
			return g
		},
		wrap: func(i int, h http.Handler) http.Handler {
			if i == 1 {
				return answer
			}
			return h
		},
	})
	id := chunkio.FrameID{Bucket: "arch", Key: "team/x.tar.zst", Off: 0, Size: 16 << 10}
	for _, tc := range []struct {
		mode, reason string
		in           float64 // body bytes read
	}{
		{"huge headers", reasonConnect, 0},
		{"longer than the frame", reasonVerify, 0},
		{"chunked", reasonVerify, 0},
		{"more bytes than declared", "", float64(id.Size)},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			mode.Store(tc.mode)
			g := rs[0].group
			in := testutil.ToFloat64(g.m.bytesIn)
			err := g.Fetch(context.Background(), rs[1].url, id, make([]byte, id.Size))
			var fe *fetchError
			switch {
			case tc.reason == "" && err != nil:
				t.Fatalf("fetch: %v, want the declared bytes (checked by chunkio after)", err)
			case tc.reason != "" && (!errors.As(err, &fe) || fe.reason != tc.reason):
				t.Fatalf("fetch: %v, want a %s failure", err, tc.reason)
			}
			if got := testutil.ToFloat64(g.m.bytesIn) - in; got != tc.in {
				t.Errorf("%v body bytes read, want %v", got, tc.in)
			}
		})
	}
}

// TestPeerResolutionWarnings: a dns+ name whose addresses do not include this
// replica's advertised host (a careless --peer-advertise: a host name, or
// another address) is warned about once when it starts, not at every
// resolution, and again if it comes back; so is a ring cut to MaxMembers.
// Before, neither was logged.
func TestPeerResolutionWarnings(t *testing.T) {
	var logs bytes.Buffer
	res := &fakeResolver{}
	g, err := New(Config{Self: "http://10.0.0.1:7946", Peers: []string{"dns+http://wharf-peers.ns.svc:7946"},
		Secret: testSecret, Resolver: res, ResolveEvery: time.Hour, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	count := func(s string) int { return strings.Count(logs.String(), s) }
	const notSelf, cut = "advertised URL is not among the addresses", "more replicas than a ring holds"
	var many []string
	for i := range 300 {
		many = append(many, fmt.Sprintf("10.3.%d.%d", i/250, i%250+1))
	}
	for _, st := range []struct {
		name         string
		addrs        []string
		notSelf, cut int // lines so far
	}{
		{"self missing", []string{"10.0.0.2", "10.0.0.3"}, 1, 0},
		{"still missing", []string{"10.0.0.2", "10.0.0.3"}, 1, 0},
		{"still missing, another answer", []string{"10.0.0.3"}, 1, 0},
		{"self there", []string{"10.0.0.1", "10.0.0.3"}, 1, 0},
		{"missing again", []string{"10.0.0.3"}, 2, 0},
		{"too many, self there", append([]string{"10.0.0.1"}, many...), 2, 1},
		{"too many again", append([]string{"10.0.0.1"}, many...), 2, 1},
	} {
		res.set(st.addrs, nil)
		g.Resolve(context.Background())
		if n, m := count(notSelf), count(cut); n != st.notSelf || m != st.cut {
			t.Errorf("%s: %d lines about self, %d about the cut; want %d and %d", st.name, n, m, st.notSelf, st.cut)
		}
	}
}

// TestPeerAnswerSwapRefused: a proxy that keeps the owner's first answer for a
// frame (right bytes, right length, a valid answer MAC for that request's
// nonce) and plays it back to a later request of the same frame is not
// believed: the answer MAC binds the request's nonce.
func TestPeerAnswerSwapRefused(t *testing.T) {
	dir, key, files := testArchive(t, 4)
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	var mu sync.Mutex
	var kept *httptest.ResponseRecorder
	var rec *recorder
	rs := newFleet(t, 2, store, key, fleetOpts{
		peers: func(i int, g *Group) chunkio.Peers {
			if i == 0 {
				rec = &recorder{Group: g}
				return rec
			}
			return g
		},
		wrap: func(i int, h http.Handler) http.Handler {
			if i != 1 {
				return h
			}
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				if kept == nil {
					kept = httptest.NewRecorder()
					h.ServeHTTP(kept, r)
				}
				for k, v := range kept.Header() {
					w.Header()[k] = v
				}
				w.WriteHeader(kept.Code)
				w.Write(kept.Body.Bytes())
			})
		},
	})
	id := someFrame(t, rs, rec, files)
	mu.Lock()
	kept = nil // the reads may have asked for other frames: keep the next answer
	mu.Unlock()
	g := rs[0].group
	dst := make([]byte, id.Size)
	if err := g.Fetch(context.Background(), rs[1].url, id, dst); err != nil {
		t.Fatalf("first fetch: %v", err)
	}
	if sha256.Sum256(dst) != id.Sum {
		t.Fatal("first fetch: wrong bytes")
	}
	err := g.Fetch(context.Background(), rs[1].url, id, make([]byte, id.Size))
	var fe *fetchError
	if !errors.As(err, &fe) || fe.reason != reasonVerify {
		t.Fatalf("an answer played back to another request: %v, want a verify failure", err)
	}
}
