package main

// Response progress deadlines (issue 20, finding 2): a client that stops
// reading, over HTTP/1.1 or on an HTTP/2 stream whose flow-control window
// stays closed, is cut off after --send-timeout, its handler returns and
// releases what it held, and other clients are served meanwhile.

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

// progressServer serves big.bin (16 MiB) and one.bin (1 MiB) over TLS
// (HTTP/2 and HTTP/1.1) with the given send timeout.
func progressServer(t *testing.T, send time.Duration) (addr string, logs *lockedBuffer, pki *testPKI, big, one []byte) {
	t.Helper()
	pki = newTestPKI(t)
	cert, key := pki.pair(t, "s3", validNow)
	big, one = secRand(20, 16<<20), secRand(21, 1<<20)
	store, man := packServeTree(t, map[string][]byte{"big.bin": big, "one.bin": one})
	addr, _, logs, _ = startServe(t, serveConfig{Listen: "127.0.0.1:0", StoreURL: store,
		Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true, CacheBytes: 16 << 20,
		MaxInflightPerKey: 64, SendTimeout: send, LogFormat: "json",
		frontDoorConfig: frontDoorConfig{TLSCert: cert, TLSKey: key}})
	return addr, logs, pki, big, one
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

// otherReads reads one.bin through c every 50ms until stop closes, and
// returns each read's latency; every read must be a 200 with the right
// bytes.
func otherReads(t *testing.T, c *http.Client, addr string, one []byte, stop <-chan struct{}) []time.Duration {
	var lat []time.Duration
	for {
		select {
		case <-stop:
			return lat
		default:
		}
		start := time.Now()
		resp, err := c.Get("https://" + addr + "/data/one.bin")
		if err != nil {
			t.Errorf("other client: %v", err)
			return lat
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(b, one) {
			t.Errorf("other client: %d, %d bytes, %v (equal %v)", resp.StatusCode, len(b), err, bytes.Equal(b, one))
			return lat
		}
		lat = append(lat, time.Since(start))
		time.Sleep(50 * time.Millisecond)
	}
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

// baseline is the other client's latency with nobody stalled.
func baseline(t *testing.T, c *http.Client, addr string, one []byte) time.Duration {
	stop := make(chan struct{})
	time.AfterFunc(500*time.Millisecond, func() { close(stop) })
	lat := otherReads(t, c, addr, one, stop)
	return medianDur(lat)
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
// reader and its buffers were released); and another client's 1 MiB reads
// during the stall are all served with the right bytes.
func TestServeSendTimeoutHTTP1(t *testing.T) {
	const send = 2 * time.Second
	addr, logs, pki, _, one := progressServer(t, send)
	other := pki.client(false)
	base := baseline(t, other, addr, one)

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

	stop := make(chan struct{})
	var during []time.Duration
	var wg sync.WaitGroup
	wg.Go(func() { during = otherReads(t, other, addr, one, stop) })

	// A response is cut off send after its last progress: the kernel's
	// buffers took some bytes after the status line.
	deadline := stalled.Add(send + 10*time.Second)
	for abortedLines(logs) < len(conns) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(stalled)
	close(stop)
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
	if len(during) == 0 {
		t.Fatal("the other client made no read during the stall")
	}
	// Bound on this branch: the stalled readers' memory is released at the
	// send timeout, so no read waits past it.
	if m := maxDur(during); m > send+time.Second {
		t.Errorf("other client's slowest read during the stall: %v (baseline %v)", m, base)
	}
	t.Logf("40 stalled HTTP/1.1 readers aborted %v after they stalled (send timeout %v); other client: %d reads during the stall, median %v, max %v (baseline median %v)",
		took.Round(time.Millisecond), send, len(during), medianDur(during).Round(time.Millisecond), maxDur(during).Round(time.Millisecond), base.Round(time.Millisecond))
}

// TestServeSendTimeoutHTTP2: one HTTP/2 connection announces a zero
// initial window and opens 40 streams, each a GET of 12 MiB. No DATA can
// flow; each stream is reset (RST_STREAM) once it has made no progress for
// --send-timeout, the connection itself stays usable (a PING is still
// answered), the handlers return, and another client is served meanwhile.
func TestServeSendTimeoutHTTP2(t *testing.T) {
	const send = 2 * time.Second
	addr, logs, pki, _, one := progressServer(t, send)
	other := pki.client(true)
	base := baseline(t, other, addr, one)

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
	for i := range streams {
		hb.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", addr}, {":path", "/data/big.bin"},
			{"range", fmt.Sprintf("bytes=0-%d", stallSize-1)}} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
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
					_ = fr.WriteSettingsAck()
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
				}
			case *http2.GoAwayFrame:
				events <- event{"goaway", f.LastStreamID, time.Now()}
			}
		}
	}()

	stop := make(chan struct{})
	var during []time.Duration
	var wg sync.WaitGroup
	wg.Go(func() { during = otherReads(t, other, addr, one, stop) })

	started := map[uint32]time.Time{}
	reset := map[uint32]time.Time{}
	timeout := time.After(send + 10*time.Second)
loop:
	for len(reset) < streams {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("the server closed the HTTP/2 connection")
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
	close(stop)
	wg.Wait()
	if len(reset) != streams || len(started) != streams {
		t.Fatalf("%d of %d streams answered, %d reset within %v", len(started), streams, len(reset), send+10*time.Second)
	}
	var longest, shortest time.Duration
	shortest = time.Hour
	for id, at := range reset {
		d := at.Sub(started[id])
		longest, shortest = max(longest, d), min(shortest, d)
	}
	if shortest < send-200*time.Millisecond || longest > send+3*time.Second {
		t.Errorf("streams reset %v to %v after their headers, want about %v", shortest, longest, send)
	}
	// The connection survives its streams: a PING is answered.
	if err := fr.WritePing(false, [8]byte{1}); err != nil {
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
	if len(during) == 0 {
		t.Fatal("the other client made no read during the stall")
	}
	if m := maxDur(during); m > send+time.Second {
		t.Errorf("other client's slowest read during the stall: %v (baseline %v)", m, base)
	}
	t.Logf("40 zero-window HTTP/2 streams reset %v to %v after their headers (send timeout %v); other client: %d reads, median %v, max %v (baseline median %v)",
		shortest.Round(time.Millisecond), longest.Round(time.Millisecond), send, len(during), medianDur(during).Round(time.Millisecond), maxDur(during).Round(time.Millisecond), base.Round(time.Millisecond))
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
