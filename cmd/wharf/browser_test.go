package main

// The front door for browsers (issue 20, findings 13 and 16): an HTTP/2
// burst on one connection is queued by the client instead of refused, and
// presigned URLs of one key are limited per client address.

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptrace"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/auth"
)

// TestServeHTTP2StreamLimit: the server advertises --max-inflight-per-key
// as SETTINGS_MAX_CONCURRENT_STREAMS, so a burst of 128 requests on one
// HTTP/2 connection (a Zarr viewer's chunk requests) is queued by the
// client and every one succeeds with the right bytes, none 503. On the old
// code (250 streams advertised) the burst runs past the 64 in-flight
// limit and part of it is answered 503 SlowDown. The burst is of a framed
// file (zstd, 64 KiB frames, a few frames a request), of a file stored in
// a plain .tar (already compressed; its member is read whole and checked
// once before the first ranged read is served, so the first 64 requests
// all wait for that one check), and of 1 MiB ranges of that plain file,
// 128 MiB in all, twice the connection's flow-control window, which the
// client gives back as it reads.
//
// The burst client is h2Burst, not x/net's http2.Transport: with
// StrictMaxConcurrentStreams, that transport reserves a slot for every
// waiting request, so 128 concurrent requests on a limit of 64 can leave
// all but the first unsent (golang/go#70809): seen here as "1 of 128
// answered" while wharf's log had exactly one request and its connection
// sat idle.
func TestServeHTTP2StreamLimit(t *testing.T) {
	// Compressible, so the file is framed zstd (64 KiB frames) as a Zarr
	// store's chunks are; each request reads a few frames.
	var buf bytes.Buffer
	for i := 0; buf.Len() < 4<<20; i++ {
		fmt.Fprintf(&buf, "chunk line %08d %x\n", i, secRand(int64(i%97), 8))
	}
	random := secRand(77, 4<<20)
	for _, tc := range []struct {
		name, chunk string // chunk: how the data object's name ends
		plain       bool   // stored as already compressed: a plain .tar
		piece       int    // each request's range
		data        []byte
	}{
		{"framed", ".tar.zst", false, 32 << 10, buf.Bytes()},
		{"plain-tar", ".tar", true, 32 << 10, random},
		{"plain-tar-1MiB", ".tar", true, 1 << 20, random},
	} {
		t.Run(tc.name, func(t *testing.T) { testHTTP2StreamLimit(t, tc.data, tc.plain, tc.chunk, tc.piece) })
	}
}

func testHTTP2StreamLimit(t *testing.T, data []byte, plain bool, chunk string, piece int) {
	pki := newTestPKI(t)
	cert, key := pki.pair(t, "s3", validNow)
	dir := t.TempDir()
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir),
		cargopack.FromMap(map[string][]byte{"chunks.bin": data}, time.Unix(1700000000, 0)),
		cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1", FrameSize: 64 << 10, PlainTar: func(string) bool { return plain }})
	if err != nil {
		t.Fatal(err)
	}
	store, man := "file://"+dir, "s3://src/"+res.ManifestKey
	var chunks []string
	_ = filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err == nil && (strings.HasSuffix(p, ".tar") || strings.HasSuffix(p, ".tar.zst")) {
			chunks = append(chunks, p)
		}
		return nil
	})
	if len(chunks) != 1 || !strings.HasSuffix(chunks[0], chunk) {
		t.Fatalf("data objects %v, want one *%s", chunks, chunk)
	}
	addr, _, _, _ := startServe(t, serveConfig{Listen: "127.0.0.1:0", StoreURL: store,
		Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true, CacheBytes: 16 << 20,
		MaxInflightPerKey: 64, LogFormat: "json", frontDoorConfig: frontDoorConfig{TLSCert: cert, TLSKey: key}})

	// What the server advertises.
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pki.pool(), NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	_ = fr.WriteSettings()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := fr.ReadFrame()
	c.Close()
	sf, ok := f.(*http2.SettingsFrame)
	if err != nil || !ok {
		t.Fatalf("first frame: %v %v", f, err)
	}
	if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); !ok || v != 64 {
		t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS %d (sent %v), want 64", v, ok)
	}

	// A browser-like client on one connection (h2Burst): it keeps at most
	// the advertised number of streams open and sends the next request
	// when one ends, as browsers queue.
	const burst = 128
	statuses, bodies, maxOpen := h2Burst(t, pki, addr, burst, func(i int) (string, string) {
		off := (i * piece) % (len(data) - piece)
		return "/data/chunks.bin", fmt.Sprintf("bytes=%d-%d", off, off+piece-1)
	})
	codes := map[string]int{}
	for i := range burst {
		codes[statuses[i]]++
		off := (i * piece) % (len(data) - piece)
		if statuses[i] == "206" && !bytes.Equal(bodies[i], data[off:off+piece]) {
			t.Errorf("request %d: wrong bytes (%d)", i, len(bodies[i]))
		}
	}
	if codes["206"] != burst {
		t.Fatalf("burst of %d on one connection: statuses %v", burst, codes)
	}
	t.Logf("burst of %d HTTP/2 requests of %d bytes on 1 connection, at most %d streams open: statuses %v", burst, piece, maxOpen, codes)
}

// h2Burst sends n GETs (path and Range from req) on one HTTP/2 connection,
// never more streams at once than the server's SETTINGS allow, the next
// one as soon as one ends. It returns each request's :status ("RST" for a
// reset stream) and body, and the most streams it had open.
func h2Burst(t *testing.T, pki *testPKI, addr string, n int, req func(int) (path, rng string)) ([]string, [][]byte, int) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pki.pool(), NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	// Large windows, as browsers open (Chromium: 6 MiB a stream, 15 MiB the
	// connection, here more), given back as DATA is read.
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 16 << 20}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteWindowUpdate(0, 64<<20); err != nil {
		t.Fatal(err)
	}
	limit := 0
	for limit == 0 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			v, ok := sf.Value(http2.SettingMaxConcurrentStreams)
			if !ok {
				v = 100
			}
			limit = int(v)
			_ = fr.WriteSettingsAck()
		}
	}
	statuses, bodies := make([]string, n), make([][]byte, n)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	dec := hpack.NewDecoder(4096, nil)
	next, open, done, maxOpen := 0, 0, 0, 0
	send := func() {
		path, rng := req(next)
		hb.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", addr}, {":path", path}, {"range", rng}} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*next + 1), BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		next++
		open++
		maxOpen = max(maxOpen, open)
	}
	end := func() {
		open--
		done++
		if next < n {
			send()
		}
	}
	for next < n && open < limit {
		send()
	}
	for done < n {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d of %d: %v", done, n, err)
		}
		i := int(f.Header().StreamID-1) / 2
		switch f := f.(type) {
		case *http2.HeadersFrame:
			fields, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				t.Fatal(err)
			}
			for _, hf := range fields {
				if hf.Name == ":status" {
					statuses[i] = hf.Value
				}
			}
			if f.StreamEnded() {
				end()
			}
		case *http2.DataFrame:
			bodies[i] = append(bodies[i], f.Data()...)
			if n := uint32(f.Length); n > 0 {
				// Every byte read is given back to the connection, and to
				// the stream while it goes on.
				if err := fr.WriteWindowUpdate(0, n); err != nil {
					t.Fatal(err)
				}
				if !f.StreamEnded() {
					if err := fr.WriteWindowUpdate(f.StreamID, n); err != nil {
						t.Fatal(err)
					}
				}
			}
			if f.StreamEnded() {
				end()
			}
		case *http2.RSTStreamFrame:
			statuses[i] = "RST " + f.ErrCode.String()
			end()
		case *http2.PingFrame:
			// The server's health check (--read-header-timeout): a live
			// client answers it, as browsers do.
			if !f.IsAck() {
				if err := fr.WritePing(true, f.Data); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY after %d of %d", done, n)
		}
	}
	return statuses, bodies, maxOpen
}

// TestServePresignedPerAddress: presigned URLs of one key are limited per
// key and client address: with --max-inflight-per-key 1, a presigned GET
// held open from 127.0.0.1 makes the next presigned GET from 127.0.0.1 get
// 503 SlowDown, while one from 127.0.0.2 (another browser of the same
// portal) is served; a header-signed request of the key is counted per key.
func TestServePresignedPerAddress(t *testing.T) {
	big := secRand(31, 12<<20)
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n"), "big.bin": big})
	addr, _, _, _ := startServe(t, serveConfig{Listen: "127.0.0.1:0", StoreURL: store,
		Archives: []serveArchive{{Name: "data", ManifestURL: man}},
		Keys:     []auth.Key{{AccessKey: secAK, SecretKey: secSK}}, CacheBytes: 16 << 20, MaxInflightPerKey: 1})
	ps := s3.NewPresignClient(secClient("http://"+addr, secAK, secSK))
	presign := func(key string) string {
		r, err := ps.PresignGetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		return r.URL
	}
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		tr := &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 20 * time.Second}
	}
	// Hold the slot of (key, 127.0.0.1): a presigned GET read only in part.
	holder, err := from("127.0.0.1").Get(presign("big.bin"))
	if err != nil || holder.StatusCode != 200 {
		t.Fatalf("holder: %v", err)
	}
	defer holder.Body.Close()
	head := make([]byte, 4096)
	if _, err := io.ReadFull(holder.Body, head); err != nil {
		t.Fatal(err)
	}
	small := presign("a.txt")
	for _, tc := range []struct {
		ip   string
		want int
	}{{"127.0.0.1", 503}, {"127.0.0.2", 200}, {"127.0.0.3", 200}} {
		resp, err := from(tc.ip).Get(small)
		if err != nil {
			t.Fatalf("presigned GET from %s: %v", tc.ip, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || (tc.want == 200 && string(b) != "hello\n") {
			t.Errorf("presigned GET from %s while 127.0.0.1 holds the key's slot: %d %s, want %d", tc.ip, resp.StatusCode, b, tc.want)
		}
	}
	// A header-signed request of the same key has its own budget (per key),
	// untouched by the presigned ones.
	req, _ := http.NewRequest("GET", "http://"+addr+"/data/a.txt", nil)
	signV4(t, req, secAK, secSK)
	if resp, b := sendReq(t, req); resp.StatusCode != 200 || string(b) != "hello\n" {
		t.Errorf("header-signed GET: %d %s", resp.StatusCode, b)
	}
	rest, err := io.ReadAll(holder.Body)
	if err != nil || !bytes.Equal(append(head, rest...), big) {
		t.Fatalf("held presigned body: %v", err)
	}
}

// TestServeHTTP2HeaderTimeout (issue 20, finding 11): over HTTP/2 an
// unfinished header block, HEADERS without END_HEADERS followed by silence
// or by a trickle of CONTINUATION frames that never ends it, is cut off
// within --read-header-timeout (1s here), not --idle-timeout (30s here). A
// healthy idle HTTP/2 connection (one that answers the PING) stays open
// past it. On the old code the connection stayed open until IdleTimeout.
func TestServeHTTP2HeaderTimeout(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.pair(t, "s3", validNow)
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	const rht = time.Second
	addr, _, _, _ := startServe(t, serveConfig{Listen: "127.0.0.1:0", StoreURL: store,
		Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true, CacheBytes: 16 << 20,
		ReadHeaderTimeout: rht, IdleTimeout: 30 * time.Second, LogFormat: "json",
		frontDoorConfig: frontDoorConfig{TLSCert: cert, TLSKey: key}})

	open := func(t *testing.T) (*tls.Conn, *http2.Framer) {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pki.pool(), NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
			t.Fatal(err)
		}
		fr := http2.NewFramer(c, c)
		if err := fr.WriteSettings(); err != nil {
			t.Fatal(err)
		}
		return c, fr
	}
	// closedAfter reads (answering nothing) until the server closes c.
	closedAfter := func(t *testing.T, c *tls.Conn, fr *http2.Framer, start time.Time) time.Duration {
		_ = c.SetReadDeadline(start.Add(20 * time.Second))
		for {
			if _, err := fr.ReadFrame(); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("connection still open after 20s")
				}
				return time.Since(start)
			}
		}
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", addr}, {":path", "/data/a.txt"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	block := hb.Bytes()

	t.Run("silence", func(t *testing.T) {
		c, fr := open(t)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:len(block)/2], EndStream: true}); err != nil {
			t.Fatal(err)
		}
		d := closedAfter(t, c, fr, time.Now())
		if d < rht/4 || d > rht+2*time.Second {
			t.Errorf("unfinished header block closed after %v, want within about %v", d, rht)
		}
		t.Logf("unfinished header block, silent: closed after %v (read header timeout %v)", d.Round(time.Millisecond), rht)
	})
	t.Run("trickle of CONTINUATION", func(t *testing.T) {
		c, fr := open(t)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:1], EndStream: true}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for i := 1; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				// An empty fragment, never END_HEADERS.
				if err := fr.WriteContinuation(1, false, nil); err != nil {
					return
				}
			}
		}()
		d := closedAfter(t, c, fr, start)
		if d > rht+2*time.Second {
			t.Errorf("trickled header block closed after %v, want within about %v", d, rht)
		}
		t.Logf("unfinished header block, CONTINUATION every 100ms: closed after %v", d.Round(time.Millisecond))
	})
	t.Run("healthy idle connection stays", func(t *testing.T) {
		h2only := new(http.Protocols)
		h2only.SetHTTP2(true)
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool()}, Protocols: h2only}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		var conns []string
		for range 2 {
			req, _ := http.NewRequest("GET", "https://"+addr+"/data/a.txt", nil)
			var local string
			req = req.WithContext(httptraceConn(req.Context(), &local))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "hello\n" || resp.ProtoMajor != 2 {
				t.Fatalf("GET: %s %q", resp.Proto, b)
			}
			conns = append(conns, local)
			time.Sleep(3 * rht) // idle, past the header timeout and the PING
		}
		if conns[0] != conns[1] {
			t.Errorf("the idle connection was closed: %s then %s", conns[0], conns[1])
		}
	})
}

// httptraceConn records the local address of the connection a request
// used.
func httptraceConn(ctx context.Context, local *string) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
		*local = ci.Conn.LocalAddr().String()
	}})
}
