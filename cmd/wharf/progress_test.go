package main

// Response progress deadlines (issue 20, finding 2): a client that stops
// reading, over HTTP/1.1 or on an HTTP/2 stream whose flow-control window
// stays closed, is cut off after --send-timeout, its handler returns and
// releases what it held, and another client's reads keep their normal
// latency meanwhile.

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// stallSize is what each stalled reader asks for.
const stallSize = 12 << 20

// otherSize is the file the other client reads 1 MiB ranges of, each
// range a new one, so that no read of it is a cache hit: each needs read
// memory of its own, the budget the stalled readers hold part of.
const otherSize = 40 << 20

// progressServer serves big.bin (16 MiB), which the stalled readers ask
// for, and other.bin (otherSize), which the other client reads, over TLS
// (HTTP/2 and HTTP/1.1) with the given send timeout and every other read
// and admission setting at its default (--cache-bytes, --read-memory,
// --client-memory-share, --max-inflight-per-key).
func progressServer(t *testing.T, send time.Duration) (addr string, logs *lockedBuffer, pki *testPKI, big, other []byte) {
	t.Helper()
	pki = newTestPKI(t)
	cert, key := pki.pair(t, "s3", validNow)
	big, other = secRand(20, 16<<20), secRand(21, otherSize)
	store, man := packServeTree(t, map[string][]byte{"big.bin": big, "other.bin": other})
	def := defaultServeConfig()
	addr, _, logs, _ = startServe(t, serveConfig{Listen: "127.0.0.1:0", StoreURL: store,
		Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true, CacheBytes: def.CacheBytes,
		MaxInflightPerKey: def.MaxInflightPerKey, SendTimeout: send, LogFormat: "json",
		frontDoorConfig: frontDoorConfig{TLSCert: cert, TLSKey: key}})
	return addr, logs, pki, big, other
}

// otherClient is a TLS client of pki dialling from 127.0.0.2: anonymous
// clients are told apart by address, so it is another client than the
// stalled readers (127.0.0.1), with its own memory share and request
// budget.
func otherClient(pki *testPKI, h2 bool) *http.Client {
	c := pki.client(h2)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
	c.Transport.(*http.Transport).DialContext = d.DialContext
	return c
}

// abortedLines counts access lines of aborted GETs of big.bin.
func abortedLines(logs *lockedBuffer) int { return len(abortedDurations(logs)) }

// abortedDurations are the durations of the aborted GETs of big.bin, from
// their access lines.
func abortedDurations(logs *lockedBuffer) []time.Duration {
	var out []time.Duration
	for _, l := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(l, `"message":"request"`) || !strings.Contains(l, `"aborted":true`) || !strings.Contains(l, `"key":"big.bin"`) {
			continue
		}
		var line struct {
			Duration float64 `json:"duration"` // milliseconds
		}
		if err := json.Unmarshal([]byte(l), &line); err == nil {
			out = append(out, time.Duration(line.Duration*float64(time.Millisecond)))
		}
	}
	return out
}

// noneBefore fails if a stalled response was cut off sooner than send
// after its request came in.
func noneBefore(t *testing.T, logs *lockedBuffer, send time.Duration) {
	t.Helper()
	for _, d := range abortedDurations(logs) {
		if d < send {
			t.Errorf("a stalled response was aborted after %v, before the send timeout %v", d, send)
		}
	}
}

// otherReader reads 1 MiB ranges of other.bin through c, each at the
// next offset (wrapping), and returns each read's latency; every read must
// be a 206 with the right bytes.
type otherReader struct {
	t     *testing.T
	c     *http.Client
	addr  string
	other []byte
	next  int
}

// reads reads every 100ms until stop closes (fewer reads than
// other.bin has ranges in a test's 4 s).
func (o *otherReader) reads(stop <-chan struct{}) []time.Duration {
	var lat []time.Duration
	for {
		select {
		case <-stop:
			return lat
		default:
		}
		off := (o.next % (len(o.other) >> 20)) << 20
		o.next++
		req, _ := http.NewRequest("GET", "https://"+o.addr+"/data/other.bin", nil)
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+1<<20-1))
		start := time.Now()
		resp, err := o.c.Do(req)
		if err != nil {
			o.t.Errorf("other client: %v", err)
			return lat
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 206 || !bytes.Equal(b, o.other[off:off+1<<20]) {
			o.t.Errorf("other client, range at %d: %d, %d bytes, %v", off, resp.StatusCode, len(b), err)
			return lat
		}
		lat = append(lat, time.Since(start))
		time.Sleep(100 * time.Millisecond)
	}
}

// readsFor reads for d.
func (o *otherReader) readsFor(d time.Duration) []time.Duration {
	stop := make(chan struct{})
	time.AfterFunc(d, func() { close(stop) })
	return o.reads(stop)
}

func maxDur(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

func medianDur(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// normalLatency is nil if the other client's reads during the stall kept
// their normal latency: median within 3x (+20ms) of the baseline's,
// slowest within 4x the baseline's slowest (+300ms; a loaded 2-core
// machine). A read waiting for memory the stalled readers hold takes
// until their send timeout (seconds), far past either bound, and leaves
// fewer than 5 reads in the stall's 3 s.
func normalLatency(base, during []time.Duration) error {
	if len(base) == 0 || len(during) < 5 {
		return fmt.Errorf("other client: %d reads before and %d during the stall", len(base), len(during))
	}
	var errs []string
	if m, b := medianDur(during), medianDur(base); m > 3*b+20*time.Millisecond {
		errs = append(errs, fmt.Sprintf("other client's median read during the stall %v, baseline %v", m, b))
	}
	if m, b := maxDur(during), maxDur(base); m > 4*b+300*time.Millisecond {
		errs = append(errs, fmt.Sprintf("other client's slowest read during the stall %v, baseline's slowest %v", m, b))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// checkNormalLatencyTwice runs round (a new server, the other client's
// baseline, the stall and every check of the stall itself, which holds in
// each round) and checks the other client's latency (normalLatency). A
// miss is measured once more in a new round, against that round's own
// baseline; only two misses fail. A load spike on a shared machine misses
// one round; the defect this guards (reads waiting seconds for memory the
// stalled readers hold) misses both.
func checkNormalLatencyTwice(t *testing.T, round func() (base, during []time.Duration)) {
	t.Helper()
	base, during := round()
	first := normalLatency(base, during)
	if first == nil || t.Failed() {
		return
	}
	t.Logf("latency missed in the first round (%v); measuring once more", first)
	base, during = round()
	if second := normalLatency(base, during); second != nil {
		t.Errorf("latency missed in both rounds: %v; then %v", first, second)
	}
}

// smallWindowDialer dials with a 16 KiB receive buffer set before the
// connection is made (so the TCP window stays small): a stalled reader
// then takes little more than its status line, as a paused download does
// once its buffers are full.
func smallWindowDialer() *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10)
		})
		if err != nil {
			return err
		}
		return serr
	}}
}

// TestServeSendTimeoutHTTP1: 40 HTTP/1.1 connections each ask for 12 MiB,
// read the status line and then nothing. Each is aborted once it has made
// no progress for --send-timeout (not before, not much after); the
// handlers return (their access lines, aborted, are written after the
// reader and its buffers were released); and another client (another
// address) reading 1 MiB ranges meanwhile keeps its normal latency
// (checkNormalLatencyTwice: a miss is measured once more in a new round),
// at the default read settings, every read a 206 with the right bytes.
func TestServeSendTimeoutHTTP1(t *testing.T) {
	checkNormalLatencyTwice(t, func() (base, during []time.Duration) { return sendTimeoutHTTP1Round(t) })
}

// sendTimeoutHTTP1Round is one round of TestServeSendTimeoutHTTP1 on a new
// server: it checks the aborts and returns the other client's latencies
// before and during the stall.
func sendTimeoutHTTP1Round(t *testing.T) (base, during []time.Duration) {
	t.Helper()
	const send = 4 * time.Second
	addr, logs, pki, _, otherData := progressServer(t, send)
	other := &otherReader{t: t, c: otherClient(pki, false), addr: addr, other: otherData}
	other.readsFor(time.Millisecond) // connect: the first read also dials
	base = other.readsFor(1500 * time.Millisecond)

	conns := make([]net.Conn, 40)
	for i := range conns {
		c, err := tls.DialWithDialer(smallWindowDialer(), "tcp", addr, &tls.Config{RootCAs: pki.pool(), NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := fmt.Fprintf(c, "GET /data/big.bin HTTP/1.1\r\nHost: %s\r\nRange: bytes=0-%d\r\n\r\n", addr, stallSize-1); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	// Read each status line (the client saw its response start), then stop.
	for i, c := range conns {
		line, err := bufio.NewReaderSize(c, 16).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 206") {
			t.Fatalf("stalled reader %d: %q %v", i, line, err)
		}
	}
	stalled := time.Now()

	// The other client reads while all 40 are stalled: for send-1s, before
	// the first of them can be cut off.
	var wg sync.WaitGroup
	wg.Go(func() { during = other.readsFor(send - time.Second) })

	// A response is cut off send after its last progress: the kernel's
	// buffers took some bytes after the status line.
	deadline := stalled.Add(send + 10*time.Second)
	for abortedLines(logs) < len(conns) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(stalled)
	wg.Wait()
	if n := abortedLines(logs); n != len(conns) {
		t.Fatalf("%d of %d stalled responses aborted %v after they stalled (send timeout %v)\n%s", n, len(conns), took, send, logs.String())
	}
	noneBefore(t, logs, send)
	// Each connection is closed by the server: draining it ends, short.
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := io.Copy(io.Discard, c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("stalled connection %d still open after its abort", i)
		}
		if n >= stallSize {
			t.Errorf("stalled connection %d got %d bytes, the whole range", i, n)
		}
	}
	t.Logf("40 stalled HTTP/1.1 readers aborted %v after they stalled (send timeout %v); other client: %d reads during the stall, median %v, max %v (baseline %d reads, median %v, max %v)",
		took.Round(time.Millisecond), send, len(during), medianDur(during).Round(time.Millisecond), maxDur(during).Round(time.Millisecond),
		len(base), medianDur(base).Round(time.Millisecond), maxDur(base).Round(time.Millisecond))
	return base, during
}

// TestServeSendTimeoutHTTP2: one HTTP/2 connection announces a zero
// initial window and opens 40 streams, each a GET of 12 MiB. No DATA can
// flow; each stream is reset (RST_STREAM) once it has made no progress for
// --send-timeout, the connection itself stays usable (a PING is still
// answered), the handlers return, and another client (another address)
// keeps its normal latency meanwhile (checkNormalLatencyTwice: a miss is
// measured once more in a new round), at the default read settings. On the code before the per-client
// memory share and hold-and-wait fix (a590fd8) the defaults case fails:
// the other client's read times out and only 10 of the 40 streams are
// answered at all.
func TestServeSendTimeoutHTTP2(t *testing.T) {
	checkNormalLatencyTwice(t, func() (base, during []time.Duration) { return sendTimeoutHTTP2Round(t) })
}

// sendTimeoutHTTP2Round is one round of TestServeSendTimeoutHTTP2 on a new
// server: it checks the resets and returns the other client's latencies
// before and during the stall.
func sendTimeoutHTTP2Round(t *testing.T) (base, during []time.Duration) {
	t.Helper()
	const send = 4 * time.Second
	addr, logs, pki, _, otherData := progressServer(t, send)
	other := &otherReader{t: t, c: otherClient(pki, true), addr: addr, other: otherData}
	other.readsFor(time.Millisecond) // connect: the first read also dials
	base = other.readsFor(1500 * time.Millisecond)

	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pki.pool(), NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	const streams = 40
	sent := map[uint32]time.Time{} // when each stream's request was written
	for i := range streams {
		hb.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", addr}, {":path", "/data/big.bin"},
			{"range", fmt.Sprintf("bytes=0-%d", stallSize-1)}} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		sent[uint32(2*i+1)] = time.Now()
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}

	type event struct {
		kind   string
		stream uint32
		at     time.Time
	}
	events := make(chan event, 256)
	var writeMu sync.Mutex // the reader answers SETTINGS and PING
	go func() {
		defer close(events)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					writeMu.Lock()
					_ = fr.WriteSettingsAck()
					writeMu.Unlock()
				}
			case *http2.HeadersFrame:
				events <- event{"headers", f.StreamID, time.Now()}
			case *http2.DataFrame:
				if len(f.Data()) > 0 {
					events <- event{"data", f.StreamID, time.Now()}
				}
			case *http2.RSTStreamFrame:
				events <- event{"rst", f.StreamID, time.Now()}
			case *http2.PingFrame:
				if f.IsAck() {
					events <- event{"pong", 0, time.Now()}
				} else {
					// The server's health check: a live client answers.
					writeMu.Lock()
					_ = fr.WritePing(true, f.Data)
					writeMu.Unlock()
				}
			case *http2.GoAwayFrame:
				events <- event{"goaway", f.LastStreamID, time.Now()}
			}
		}
	}()

	// The other client reads while the 40 streams are stalled: for send-1s,
	// before the first of them can be reset.
	var wg sync.WaitGroup
	wg.Go(func() { during = other.readsFor(send - time.Second) })

	started := map[uint32]time.Time{}
	reset := map[uint32]time.Time{}
	// The streams are answered in waves: one client's share of the read
	// memory (--client-memory-share) admits 13 or 14 of the 12 MiB ranges
	// at once, the others wait holding nothing, and each wave is reset one
	// send timeout after its headers, which frees the memory for the next.
	// So 40 streams take 3 or 4 waves (measured: resets at 4, 8, 12 and
	// 16 s); every stream's own reset is checked against its headers below.
	limit := 5*send + 10*time.Second
	timeout := time.After(limit)
loop:
	for len(reset) < streams {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatalf("the server closed the HTTP/2 connection: %d streams answered, %d reset", len(started), len(reset))
			}
			switch e.kind {
			case "headers":
				started[e.stream] = e.at
			case "rst":
				reset[e.stream] = e.at
			case "data":
				t.Fatalf("DATA on stream %d through a zero window", e.stream)
			case "goaway":
				t.Fatalf("GOAWAY (last stream %d): the whole connection was dropped", e.stream)
			}
		case <-timeout:
			break loop
		}
	}
	wg.Wait()
	if len(reset) != streams || len(started) != streams {
		t.Fatalf("%d of %d streams answered, %d reset within %v", len(started), streams, len(reset), limit)
	}
	// What the server promises: a stream is reset send after its last
	// progress, here the deadline it set just before its first write
	// (D), and soon after. The client sees neither D nor the server's
	// reset, only two bounds of them: its request was written before D
	// (sent <= D), and the headers arrive after D (the server sets the
	// deadline, then writes the headers with the first DATA): under
	// -race and a shared machine up to 280 ms after it, measured with D
	// logged by the server, while the reset arrived 0.6 to 170 ms after
	// D+send. So:
	//   - reset-sent >= send holds whatever the load (the reset comes no
	//     sooner than D+send, and sent <= D): a reset before the send
	//     timeout of a first-wave stream, whose D is a few ms after sent
	//     on a quiet machine, fails it;
	//   - reset-headers >= send/2 lets the headers be up to half the
	//     send timeout (2 s) late (1.1 s seen under -race at load 15),
	//     and fails a deadline that is not moved on by the write (one
	//     set when the request came in: the later waves wait a send
	//     timeout or more for memory, and are reset about when their
	//     headers come);
	//   - reset-headers <= send+3s: the reset is not much after D+send
	//     (headers-D only makes it shorter).
	var longest, shortest, soonest time.Duration
	shortest, soonest = time.Hour, time.Hour
	for id, at := range reset {
		d := at.Sub(started[id])
		longest, shortest = max(longest, d), min(shortest, d)
		soonest = min(soonest, at.Sub(sent[id]))
	}
	if soonest < send {
		t.Errorf("a stream was reset %v after its request was written, before the send timeout %v", soonest, send)
	}
	if shortest < send/2 || longest > send+3*time.Second {
		t.Errorf("streams reset %v to %v after their headers, want about %v (the headers arrive after the server set its deadline)", shortest, longest, send)
	}
	// The connection survives its streams: a PING is answered.
	writeMu.Lock()
	err = fr.WritePing(false, [8]byte{1})
	writeMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-events:
		if e.kind != "pong" {
			t.Errorf("after the resets: %s on stream %d, want the PING answered", e.kind, e.stream)
		}
	case <-time.After(5 * time.Second):
		t.Error("PING not answered after the resets")
	}
	deadline := time.Now().Add(5 * time.Second)
	for abortedLines(logs) < streams && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := abortedLines(logs); n != streams {
		t.Errorf("%d of %d handlers returned (aborted access lines)", n, streams)
	}
	noneBefore(t, logs, send)
	t.Logf("40 zero-window HTTP/2 streams reset %v to %v after their headers, the first %v after its request (send timeout %v); other client: %d reads during the stall, median %v, max %v (baseline %d reads, median %v, max %v)",
		shortest.Round(time.Millisecond), longest.Round(time.Millisecond), soonest.Round(time.Millisecond), send, len(during), medianDur(during).Round(time.Millisecond), maxDur(during).Round(time.Millisecond),
		len(base), medianDur(base).Round(time.Millisecond), maxDur(base).Round(time.Millisecond))
	return base, during
}

// TestServeSendTimeoutKeepAlive: the progress deadline of one response
// does not outlive it on a keep-alive connection (net/http clears the
// connection's write deadline after each response; this pins that wharf
// relies on it): after a response and an idle pause longer than the send
// timeout, the next request on the same connection is answered, also when
// net/http answers it itself (431 for oversized headers) before any
// handler sets a new deadline.
func TestServeSendTimeoutKeepAlive(t *testing.T) {
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	const send = 300 * time.Millisecond
	addr, _, _, _ := startServe(t, serveConfig{Listen: "127.0.0.1:0", StoreURL: store,
		Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true, CacheBytes: 16 << 20,
		SendTimeout: send, MaxHeaderBytes: 4 << 10})
	c := rawConn(t, addr)
	br := bufio.NewReader(c)
	roundTrip := func(extra string) int {
		t.Helper()
		if _, err := fmt.Fprintf(c, "GET /data/a.txt HTTP/1.1\r\nHost: %s\r\n%s\r\n", addr, extra); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("after an idle pause past the send timeout: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := roundTrip(""); code != 200 {
		t.Fatalf("first request: %d", code)
	}
	time.Sleep(3 * send)
	if code := roundTrip(""); code != 200 {
		t.Errorf("second request after idling: %d", code)
	}
	time.Sleep(3 * send)
	if code := roundTrip("X-Pad: " + strings.Repeat("a", 16<<10) + "\r\n"); code != 431 {
		t.Errorf("oversized request after idling: %d, want 431", code)
	}
}
