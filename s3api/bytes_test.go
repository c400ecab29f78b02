package s3api_test

// End-to-end "nothing wrong is ever served" (review rev-bytes): archives
// of every shape, packed by our own writer, served by the real handler
// over loopback to Go's HTTP/1.1 and HTTP/2 clients, with faults injected
// between the read path and its store (backend/faults). Whatever the
// fault, a response whose status is 200/206 and whose body ended cleanly
// must carry exactly the right bytes, with Content-Length, Content-Range,
// ETag and x-amz-checksum-sha256 agreeing with them.

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
	"github.com/wharf-s3/wharf/s3api"
)

// byShape is one archive shape of the matrix.
type byShape struct {
	name string
	pack cargopack.Options
	open archiveview.Options
	// store configures the Faulty in front of the store (NoETags).
	store faults.FaultConfig
}

func byShapes() []byShape {
	small := archiveview.Options{SmallVerifyBytes: 128 << 10}
	return []byShape{
		{name: "framed", pack: cargopack.Options{FrameSize: 64 << 10}, open: small},
		{name: "giant", pack: cargopack.Options{FrameSize: 64 << 10, NoSubFrames: true}, open: archiveview.Options{SmallVerifyBytes: 128 << 10, MaxFrameBytes: 256 << 10}},
		{name: "unframed", pack: cargopack.Options{}, open: small},
		{name: "plain", pack: cargopack.Options{PlainTar: func(string) bool { return true }}, open: small},
		{name: "direct", pack: cargopack.Options{Direct: true}, open: small},
		{name: "split", pack: cargopack.Options{FrameSize: 64 << 10, SplitSize: 1 << 20}, open: small},
	}
}

func byFiles() map[string][]byte {
	return map[string][]byte{
		"small.bin": randBytes(11, 3000),
		"mid.bin":   randBytes(12, 300<<10),
		"big.bin":   randBytes(13, 3<<20+777),
	}
}

// byEnv is one packed archive in its own directory, served fresh.
type byEnv struct {
	dir    string
	files  map[string][]byte
	faulty *faults.Faulty
	logs   *syncWriter
	reg    *prometheus.Registry
	h1, h2 *httptest.Server
}

// byPack writes shape's archive into a new directory.
func byPack(t testing.TB, sh byShape, files map[string][]byte) (dir, manifestKey string) {
	t.Helper()
	dir = t.TempDir()
	o := sh.pack
	o.Bucket, o.Prefix, o.UploadID = "src", "p", "u1"
	o.Created = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, testMTime), o)
	if err != nil {
		t.Fatalf("cargopack.Write: %v", err)
	}
	return dir, res.ManifestKey
}

// byServe opens the archive in dir through a Faulty and serves it over
// HTTP/1.1 and HTTP/2 (TLS).
func byServe(t testing.TB, sh byShape, dir, manifestKey string, files map[string][]byte, hook func(faults.Request) faults.Fault) *byEnv {
	t.Helper()
	e := &byEnv{dir: dir, files: files, logs: &syncWriter{w: &bytes.Buffer{}}, reg: prometheus.NewRegistry()}
	e.faulty = faults.NewFaulty(backend.NewFileStore(dir), sh.store)
	o := sh.open
	o.Name = testBucket
	o.Logger = zerolog.New(e.logs)
	a, err := archiveview.Open(context.Background(), e.faulty, "src", manifestKey, o)
	if err != nil {
		t.Fatalf("archiveview.Open: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	e.faulty.SetHook(hook)
	av, err := auth.New(auth.Config{Keys: []auth.Key{{AccessKey: testAK, SecretKey: testSK}}, Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	h := s3api.New(s3api.Config{
		Catalog:    catalog.NewStatic(map[string]*archiveview.Archive{testBucket: a}),
		Verifier:   av,
		Logger:     zerolog.New(e.logs),
		Registerer: e.reg,
	})
	e.h1 = httptest.NewServer(h)
	t.Cleanup(e.h1.Close)
	e.h2 = httptest.NewUnstartedServer(h)
	e.h2.EnableHTTP2 = true
	e.h2.StartTLS()
	t.Cleanup(e.h2.Close)
	return e
}

// byRequest is one kind of request of the matrix.
type byRequest struct {
	name   string
	method string
	rng    func(size int64) string // "" = none
}

var byRequests = []byRequest{
	{"whole", "GET", nil},
	{"range", "GET", func(size int64) string { return fmt.Sprintf("bytes=%d-%d", size/3, size-size/5) }},
	{"suffix", "GET", func(size int64) string { return fmt.Sprintf("bytes=-%d", size/2+1) }},
	{"tail", "GET", func(size int64) string { return fmt.Sprintf("bytes=%d-", size-1000) }},
	{"head", "HEAD", nil},
}

// byOutcome is what one response turned out to be.
type byOutcome int

const (
	byClean   byOutcome = iota // 2xx, body complete and right
	byRefused                  // an error status before any body
	byAborted                  // 2xx, body ended with an error
)

// byGet sends one request and checks everything a clean answer promises.
// It fails the test on a clean 2xx whose body, length, range, ETag or
// checksum is wrong; it returns the outcome otherwise.
func byGet(t testing.TB, e *byEnv, h2 bool, key string, rq byRequest, checksum bool) (byOutcome, string) {
	t.Helper()
	src := e.files[key]
	size := int64(len(src))
	srv := e.h1
	if h2 {
		srv = e.h2
	}
	req, _ := http.NewRequest(rq.method, srv.URL+"/"+testBucket+"/"+key, nil)
	rh := ""
	if rq.rng != nil {
		rh = rq.rng(size)
		req.Header.Set("Range", rh)
	}
	if checksum {
		req.Header.Set("x-amz-checksum-mode", "ENABLED")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := srv.Client().Do(req.WithContext(ctx))
	if err != nil {
		return byRefused, "transport: " + err.Error()
	}
	defer resp.Body.Close()
	if h2 && resp.ProtoMajor != 2 {
		t.Fatalf("HTTP/2 server answered %s", resp.Proto)
	}
	body, rerr := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 && resp.StatusCode != 206 {
		return byRefused, fmt.Sprintf("%d %s", resp.StatusCode, firstLine(body))
	}
	if rerr != nil {
		return byAborted, fmt.Sprintf("%d aborted after %d bytes: %v", resp.StatusCode, len(body), rerr)
	}
	// A clean answer: everything must agree with the source.
	want, status := src, 200
	if rq.rng != nil {
		status = 206
		var a, b int64
		switch {
		case strings.HasPrefix(rh, "bytes=-"):
			k, _ := strconv.ParseInt(rh[len("bytes=-"):], 10, 64)
			a, b = size-min(k, size), size-1
		case strings.HasSuffix(rh, "-"):
			a, _ = strconv.ParseInt(rh[len("bytes="):len(rh)-1], 10, 64)
			b = size - 1
		default:
			fmt.Sscanf(rh, "bytes=%d-%d", &a, &b)
		}
		want = src[a : b+1]
		if cr := resp.Header.Get("Content-Range"); cr != fmt.Sprintf("bytes %d-%d/%d", a, b, size) {
			t.Errorf("%s %s: Content-Range %q for %s", rq.name, key, cr, rh)
		}
	}
	if resp.StatusCode != status {
		t.Errorf("%s %s: status %d, want %d", rq.name, key, resp.StatusCode, status)
	}
	if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(want)) {
		t.Errorf("%s %s: Content-Length %q, want %d", rq.name, key, cl, len(want))
	}
	if rq.method == "HEAD" {
		return byClean, "head"
	}
	if !bytes.Equal(body, want) {
		i := 0
		for i < len(body) && i < len(want) && body[i] == want[i] {
			i++
		}
		t.Errorf("%s %s (h2 %v): a clean %d with WRONG bytes: %d bytes, want %d, first difference at %d",
			rq.name, key, h2, resp.StatusCode, len(body), len(want), i)
	}
	if et := resp.Header.Get("ETag"); et == "" || strings.Contains(et[1:len(et)-1], `"`) {
		t.Errorf("%s %s: ETag %q", rq.name, key, et)
	}
	if cs := resp.Header.Get("x-amz-checksum-sha256"); cs != "" {
		sum := sha256.Sum256(body)
		if cs != base64.StdEncoding.EncodeToString(sum[:]) {
			t.Errorf("%s %s: x-amz-checksum-sha256 %s disagrees with the body", rq.name, key, cs)
		}
	}
	return byClean, ""
}

func firstLine(b []byte) string {
	s := string(b)
	if i := strings.Index(s, "<Message>"); i >= 0 {
		s = s[i:]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// TestBytesBaseline: without faults every shape, request kind and
// protocol is clean and byte-exact (the matrix's control).
func TestBytesBaseline(t *testing.T) {
	files := byFiles()
	for _, sh := range byShapes() {
		t.Run(sh.name, func(t *testing.T) {
			dir, mk := byPack(t, sh, files)
			e := byServe(t, sh, dir, mk, files, nil)
			for _, h2 := range []bool{false, true} {
				for _, rq := range byRequests {
					for key := range files {
						if out, why := byGet(t, e, h2, key, rq, true); out != byClean {
							t.Errorf("h2 %v %s %s: %s", h2, rq.name, key, why)
						}
					}
				}
			}
		})
	}
}

// byFault is one store misbehaviour of the matrix.
type byFault struct {
	name string
	hook func(n *atomic.Int64) func(faults.Request) faults.Fault
}

func byFlipEvery(step int64) []int64 {
	var at []int64
	for o := int64(700); o < 8<<20; o += step {
		at = append(at, o)
	}
	return at
}

func byFaults() []byFault {
	data := func(r faults.Request) bool {
		return (r.Op == "range" || r.Op == "get") && !strings.Contains(r.Key, "manifest")
	}
	return []byFault{
		{"flip-always", func(*atomic.Int64) func(faults.Request) faults.Fault {
			return func(r faults.Request) faults.Fault {
				if !data(r) {
					return faults.Fault{}
				}
				return faults.Fault{Kind: faults.FaultFlip, FlipAt: byFlipEvery(40000)}
			}
		}},
		{"flip-once", func(n *atomic.Int64) func(faults.Request) faults.Fault {
			return func(r faults.Request) faults.Fault {
				if !data(r) || n.Add(1) != 1 {
					return faults.Fault{}
				}
				return faults.Fault{Kind: faults.FaultFlip, FlipAt: byFlipEvery(40000)}
			}
		}},
		{"flip-late", func(n *atomic.Int64) func(faults.Request) faults.Fault {
			return func(r faults.Request) faults.Fault {
				if !data(r) || n.Add(1) < 3 {
					return faults.Fault{}
				}
				return faults.Fault{Kind: faults.FaultFlip, FlipAt: byFlipEvery(40000)}
			}
		}},
		{"truncate", func(*atomic.Int64) func(faults.Request) faults.Fault {
			return func(r faults.Request) faults.Fault {
				if !data(r) {
					return faults.Fault{}
				}
				return faults.Fault{Kind: faults.FaultTruncate, After: 100000}
			}
		}},
		{"reset-late", func(n *atomic.Int64) func(faults.Request) faults.Fault {
			return func(r faults.Request) faults.Fault {
				if !data(r) || n.Add(1) < 2 {
					return faults.Fault{}
				}
				return faults.Fault{Kind: faults.FaultReset, After: 70000}
			}
		}},
		{"error-late", func(n *atomic.Int64) func(faults.Request) faults.Fault {
			return func(r faults.Request) faults.Fault {
				if !data(r) || n.Add(1) < 2 {
					return faults.Fault{}
				}
				return faults.Fault{Kind: faults.FaultError}
			}
		}},
	}
}

// TestBytesUnderFaults: under every fault, for every shape, request kind
// and protocol, a clean answer is right (byGet checks it).
func TestBytesUnderFaults(t *testing.T) {
	files := byFiles()
	for _, sh := range byShapes() {
		dir, mk := byPack(t, sh, files)
		for _, fl := range byFaults() {
			for _, rq := range byRequests {
				if rq.method == "HEAD" {
					continue
				}
				for _, h2 := range []bool{false, true} {
					name := fmt.Sprintf("%s/%s/%s/h2=%v", sh.name, fl.name, rq.name, h2)
					t.Run(name, func(t *testing.T) {
						var n atomic.Int64
						cdir := byCopyDir(t, dir)
						e := byServe(t, sh, cdir, mk, files, fl.hook(&n))
						for _, key := range []string{"small.bin", "mid.bin", "big.bin"} {
							out, why := byGet(t, e, h2, key, rq, true)
							if out != byClean {
								t.Logf("%s: %s", key, why)
							}
						}
					})
				}
			}
		}
	}
}

// byCopyDir copies a packed archive's directory (each case reads its own).
func byCopyDir(t testing.TB, dir string) string {
	t.Helper()
	out := t.TempDir()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(out, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(out, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var _ = errors.Is

// byH2Result is what a raw HTTP/2 client saw of one stream.
type byH2Result struct {
	status    int
	length    int64 // content-length, -1 if none
	body      []byte
	endStream bool // DATA or HEADERS with END_STREAM
	rst       bool // RST_STREAM for the stream
	goaway    bool
}

// byH2Get sends one GET on a raw HTTP/2 connection to e.h2 and records the
// frames of its stream until END_STREAM, RST_STREAM, GOAWAY or the
// connection ends: Go's client hides the difference between a stream
// reset and a stream ended early, and this test is about that difference.
func byH2Get(t testing.TB, e *byEnv, path string, hdr [][2]string) byH2Result {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(e.h2.Certificate())
	addr := e.h2.Listener.Addr().String()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}, ServerName: "example.com"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// A large connection and stream window: flow control never stalls.
	if err := fr.WriteWindowUpdate(0, 1<<30); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range append([][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", addr}, {":path", path}}, hdr...) {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	res := byH2Result{length: -1}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return res
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != 1 {
				continue
			}
			for _, hf := range f.Fields {
				switch hf.Name {
				case ":status":
					res.status, _ = strconv.Atoi(hf.Value)
				case "content-length":
					res.length, _ = strconv.ParseInt(hf.Value, 10, 64)
				}
			}
			if f.StreamEnded() {
				res.endStream = true
				return res
			}
		case *http2.DataFrame:
			if f.StreamID != 1 {
				continue
			}
			res.body = append(res.body, f.Data()...)
			if len(f.Data()) > 0 {
				_ = fr.WriteWindowUpdate(1, uint32(len(f.Data())))
				_ = fr.WriteWindowUpdate(0, uint32(len(f.Data())))
			}
			if f.StreamEnded() {
				res.endStream = true
				return res
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				res.rst = true
				return res
			}
		case *http2.GoAwayFrame:
			res.goaway = true
		}
	}
}

// TestBytesHTTP2AbortIsReset: a failure found after the response headers
// went out (a frame that fails its sha256, a backend reset, a store
// error, past the first part of the body) ends the HTTP/2 stream with
// RST_STREAM, never with END_STREAM; a stream that ends with END_STREAM
// carries exactly Content-Length right bytes.
func TestBytesHTTP2AbortIsReset(t *testing.T) {
	files := byFiles()
	late := func(r faults.Request) bool {
		return r.Op == "range" && !strings.Contains(r.Key, "manifest") && r.Off+r.Len > 1<<20
	}
	cases := []struct {
		name string
		hook func(faults.Request) faults.Fault
	}{
		{"flip", func(r faults.Request) faults.Fault {
			if !late(r) {
				return faults.Fault{}
			}
			return faults.Fault{Kind: faults.FaultFlip, FlipAt: byFlipEvery(40000)}
		}},
		{"reset", func(r faults.Request) faults.Fault {
			if !late(r) {
				return faults.Fault{}
			}
			return faults.Fault{Kind: faults.FaultReset, After: 1000}
		}},
		{"error", func(r faults.Request) faults.Fault {
			if !late(r) {
				return faults.Fault{}
			}
			return faults.Fault{Kind: faults.FaultError, Err: backend.ErrAccessDenied}
		}},
	}
	for _, sh := range byShapes() {
		dir, mk := byPack(t, sh, files)
		for _, c := range cases {
			t.Run(sh.name+"/"+c.name, func(t *testing.T) {
				e := byServe(t, sh, byCopyDir(t, dir), mk, files, c.hook)
				src := files["big.bin"]
				for _, rh := range []string{"", "bytes=-2000000", "bytes=100-3000000"} {
					var hdr [][2]string
					want := src
					if rh != "" {
						hdr = [][2]string{{"range", rh}}
						if rh[6] == '-' {
							want = src[len(src)-2000000:]
						} else {
							want = src[100:3000001]
						}
					}
					res := byH2Get(t, e, "/"+testBucket+"/big.bin", hdr)
					t.Logf("%q: status %d, content-length %d, %d body bytes, END_STREAM %v, RST_STREAM %v",
						rh, res.status, res.length, len(res.body), res.endStream, res.rst)
					if res.status/100 != 2 {
						continue // refused before the body: a clean error
					}
					if res.endStream && (int64(len(res.body)) != res.length || !bytes.Equal(res.body, want)) {
						t.Errorf("%q: END_STREAM after %d of %d bytes (right: %v)", rh, len(res.body), res.length, bytes.Equal(res.body, want))
					}
					if !res.endStream && !res.rst {
						t.Errorf("%q: stream neither ended nor reset", rh)
					}
				}
			})
		}
	}
}

// byLie rewrites the manifest in dir: edit changes the entries of key.
func byLie(t testing.TB, dir, manifestKey, key string, edit func(fe map[string]any)) {
	t.Helper()
	var mpath string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(filepath.ToSlash(p), manifestKey) {
			mpath = p
		}
		return nil
	})
	if mpath == "" {
		t.Fatalf("manifest %s not found", manifestKey)
	}
	raw, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	js, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	hit := 0
	for _, fe := range m["files"].([]any) {
		fm := fe.(map[string]any)
		if p, _ := fm["path"].(string); strings.HasSuffix(p, "/"+key) {
			edit(fm)
			hit++
		}
	}
	if hit == 0 {
		t.Fatalf("no manifest entry for %s", key)
	}
	js, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(js)
	zw.Close()
	if err := os.WriteFile(mpath, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBytesManifestSizeLie: a manifest that gives a file more or fewer
// bytes than its tar member (or its direct object) holds never serves it
// cleanly: every GET of it, whole or ranged, over either protocol, is
// refused before its headers or aborted, and the log names the archive
// and the key.
func TestBytesManifestSizeLie(t *testing.T) {
	files := byFiles()
	for _, sh := range byShapes() {
		if sh.name == "split" {
			continue // a split file's size is its parts'; a part lying is the same check
		}
		for _, d := range []int64{1, -1, 512, -512, 70000, -70000} {
			t.Run(fmt.Sprintf("%s/%+d", sh.name, d), func(t *testing.T) {
				dir, mk := byPack(t, sh, files)
				byLie(t, dir, mk, "mid.bin", func(fe map[string]any) {
					fe["size"] = fe["size"].(float64) + float64(d)
				})
				e := &byEnv{}
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Logf("open refused: %v", r)
						}
					}()
					e = byServeOpen(t, sh, dir, mk, files)
				}()
				if e == nil {
					return
				}
				for _, h2 := range []bool{false, true} {
					for _, rq := range byRequests {
						if rq.method == "HEAD" {
							continue
						}
						out, why := byGetLie(t, e, h2, "mid.bin", rq, int64(len(files["mid.bin"]))+d)
						if out == byClean {
							t.Errorf("h2 %v %s: a file whose manifest size lies by %+d was served cleanly", h2, rq.name, d)
						}
						t.Logf("h2 %v %s: %s", h2, rq.name, why)
					}
				}
				logs := e.logs.String()
				if !strings.Contains(logs, "archive "+testBucket) || !strings.Contains(logs, "mid.bin") {
					t.Errorf("the log does not name the archive and key:\n%s", logs)
				}
			})
		}
	}
}

// byServeOpen is byServe, returning nil when Open refuses the archive.
func byServeOpen(t testing.TB, sh byShape, dir, mk string, files map[string][]byte) *byEnv {
	t.Helper()
	o := sh.open
	o.Name = testBucket
	if _, err := archiveview.Open(context.Background(), backend.NewFileStore(dir), "src", mk, o); err != nil {
		t.Logf("Open refused: %v", err)
		return nil
	}
	return byServe(t, sh, dir, mk, files, nil)
}

// byGetLie sends one request for key (manifest size lied) and reports
// its outcome.
func byGetLie(t testing.TB, e *byEnv, h2 bool, key string, rq byRequest, size int64) (byOutcome, string) {
	t.Helper()
	srv := e.h1
	if h2 {
		srv = e.h2
	}
	req, _ := http.NewRequest(rq.method, srv.URL+"/"+testBucket+"/"+key, nil)
	if rq.rng != nil {
		req.Header.Set("Range", rq.rng(size))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := srv.Client().Do(req.WithContext(ctx))
	if err != nil {
		return byRefused, err.Error()
	}
	defer resp.Body.Close()
	body, rerr := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return byRefused, fmt.Sprintf("%d %s", resp.StatusCode, firstLine(body))
	}
	if rerr != nil {
		return byAborted, fmt.Sprintf("%d aborted after %d bytes: %v", resp.StatusCode, len(body), rerr)
	}
	return byClean, fmt.Sprintf("clean %d, %d bytes", resp.StatusCode, len(body))
}

// TestBytesFileSumLie: a file whose manifest sha256 is wrong (its frames'
// are right) is never served whole cleanly: the whole-file check runs
// before the last byte goes out, so the response is refused or aborted;
// a ranged read may be served, and is then right (frame-checked), or is
// refused where the file's sum is the only check of its bytes.
func TestBytesFileSumLie(t *testing.T) {
	files := byFiles()
	for _, sh := range byShapes() {
		for _, key := range []string{"small.bin", "mid.bin", "big.bin"} {
			t.Run(sh.name+"/"+key, func(t *testing.T) {
				dir, mk := byPack(t, sh, files)
				byLie(t, dir, mk, key, func(fe map[string]any) {
					if c, _ := fe["checksum"].(string); c != "" {
						b := []byte(c)
						b[len(b)-1] ^= 1
						fe["checksum"] = string(b)
					}
				})
				e := byServe(t, sh, dir, mk, files, nil)
				for _, h2 := range []bool{false, true} {
					for _, rq := range byRequests {
						out, why := byGet(t, e, h2, key, rq, true)
						if out == byClean && rq.rng == nil && rq.method == "GET" {
							t.Errorf("h2 %v: a file whose sha256 does not match was served whole cleanly", h2)
						}
						t.Logf("h2 %v %s: %v %s", h2, rq.name, out, why)
					}
				}
				if !strings.Contains(e.logs.String(), "sha256 mismatch") {
					t.Errorf("no sha256 mismatch logged:\n%s", e.logs.String())
				}
			})
		}
	}
}

// byReplace rewrites the object key of the store in dir with other bytes
// (every 40000th byte flipped), as a new file renamed over it: a new ETag,
// while reads already open keep reading the old version, as on S3.
func byReplace(dir, bucket, key string) error {
	p := filepath.Join(dir, bucket, filepath.FromSlash(key))
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	for _, at := range byFlipEvery(40000) {
		if at < int64(len(b)) {
			b[at] ^= 0xFF
		}
	}
	tmp := p + ".new"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	later := time.Now().Add(time.Second)
	_ = os.Chtimes(tmp, later, later)
	return os.Rename(tmp, p)
}

// TestBytesObjectReplacedMidRead: an object replaced in the store while
// it is read (its ETag changes between two of the read's GETs) never
// yields a clean answer mixing the two versions: every clean answer is
// the old version's exact bytes.
func TestBytesObjectReplacedMidRead(t *testing.T) {
	files := byFiles()
	for _, sh := range byShapes() {
		dir, mk := byPack(t, sh, files)
		for _, at := range []int64{1, 2, 3, 5, 8} {
			for _, rq := range byRequests {
				if rq.method == "HEAD" {
					continue
				}
				for _, h2 := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/at%d/%s/h2=%v", sh.name, at, rq.name, h2), func(t *testing.T) {
						cdir := byCopyDir(t, dir)
						var n atomic.Int64
						var done atomic.Bool
						hook := func(r faults.Request) faults.Fault {
							if (r.Op != "range" && r.Op != "get") || strings.Contains(r.Key, "manifest") {
								return faults.Fault{}
							}
							if n.Add(1) == at && done.CompareAndSwap(false, true) {
								if err := byReplace(cdir, r.Bucket, r.Key); err != nil {
									t.Error(err)
								}
							}
							return faults.Fault{}
						}
						e := byServe(t, sh, cdir, mk, files, hook)
						for _, key := range []string{"big.bin", "mid.bin", "small.bin"} {
							out, why := byGet(t, e, h2, key, rq, true)
							if out != byClean {
								t.Logf("%s: %s", key, why)
							}
						}
					})
				}
			}
		}
	}
}
