package s3api_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/s3api"
)

const (
	testAK     = "AKIAWHARFTEST"
	testSK     = "secret+with/slash"
	testBucket = "bkt"
)

var testMTime = time.Date(2024, 3, 4, 5, 6, 7, 123456789, time.UTC)

// fixture is one served archive behind a real httptest server.
type fixture struct {
	files   map[string][]byte
	archive *archiveview.Archive
	srv     *httptest.Server
	reg     *prometheus.Registry
	logs    *syncWriter
	store   backend.Store
	bucket  string
}

type fixtureOpts struct {
	anonymous bool // allow unsigned requests (keys are always configured)
	region    string
	vhostBase string
	metadata  func(rel string) map[string]string
	frameSize int64
	verifier  s3api.Authenticator
	// wrap, if set, wraps the file store the archive reads (faults.NewFaulty).
	wrap func(backend.Store) backend.Store
	// noChecksums packs without file checksums (no sha256 in the manifest).
	noChecksums bool
	// cors is the server's Config.CORS.
	cors s3api.CORSPolicy
	// aliasBuckets are the buckets the server's Config.FollowsUpdates
	// names.
	aliasBuckets []string
}

// randBytes returns n deterministic pseudo-random bytes.
func randBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// openArchive packs files with our own writer into a temp dir and opens it
// through backend.FileStore and archiveview.Open.
func openArchive(t testing.TB, files map[string][]byte, o fixtureOpts) (*archiveview.Archive, backend.Store) {
	a, st, _ := openArchiveDir(t, files, o)
	return a, st
}

// openArchiveDir is openArchive also returning the store directory.
func openArchiveDir(t testing.TB, files map[string][]byte, o fixtureOpts) (*archiveview.Archive, backend.Store, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	fs := o.frameSize
	if fs == 0 {
		fs = 64 << 10
	}
	res, err := cargopack.Write(ctx, cargopack.DirSink(dir), cargopack.FromMap(files, testMTime), cargopack.Options{
		Bucket: "src", Prefix: "p", UploadID: "u1", FrameSize: fs, Metadata: o.metadata, NoChecksums: o.noChecksums,
		Created: time.Date(2025, 1, 2, 3, 4, 5, 600000000, time.UTC),
	})
	if err != nil {
		t.Fatalf("cargopack.Write: %v", err)
	}
	store := backend.Store(backend.NewFileStore(dir))
	if o.wrap != nil {
		store = o.wrap(store)
	}
	a, err := archiveview.Open(ctx, store, "src", res.ManifestKey, archiveview.Options{Name: testBucket})
	if err != nil {
		t.Fatalf("archiveview.Open: %v", err)
	}
	return a, store, dir
}

func newFixture(t testing.TB, files map[string][]byte, o fixtureOpts) *fixture {
	t.Helper()
	a, store := openArchive(t, files, o)
	f := newFixtureFromArchive(t, a, o)
	f.files, f.store = files, store
	return f
}

// newFixtureFromArchive serves an opened archive as bucket "bkt".
func newFixtureFromArchive(t testing.TB, a *archiveview.Archive, o fixtureOpts) *fixture {
	t.Helper()
	f := &fixture{archive: a, reg: prometheus.NewRegistry(), logs: &syncWriter{w: &bytes.Buffer{}}, bucket: testBucket}
	v := o.verifier
	if v == nil {
		av, err := auth.New(auth.Config{Keys: []auth.Key{{AccessKey: testAK, SecretKey: testSK}}, Anonymous: o.anonymous})
		if err != nil {
			t.Fatal(err)
		}
		v = av
	}
	h := s3api.New(s3api.Config{
		Catalog:         catalog.NewStatic(map[string]*archiveview.Archive{testBucket: a}),
		Verifier:        v,
		Logger:          zerolog.New(f.logs),
		Registerer:      f.reg,
		Region:          o.region,
		VirtualHostBase: o.vhostBase,
		CORS:            o.cors,
		FollowsUpdates:  func(b string) bool { return slices.Contains(o.aliasBuckets, b) },
	})
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	return f
}

// syncWriter serializes concurrent log writes into a buffer.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

// standardFiles is the main test tree.
func standardFiles() map[string][]byte {
	return map[string][]byte{
		"hello.txt":         []byte("hello world\n"),
		"empty":             {},
		"dir/a.bin":         randBytes(1, 200<<10), // spans several 64 KiB frames
		"dir/sub/b.json":    []byte(`{"b":1}`),
		"dir/sub/c.unknown": []byte("ccc"),
		"a+b":               []byte("plus"),
		"a b":               []byte("space"),
		"a%41":              []byte("percent"),
		"ü":                 []byte("umlaut"),
		"q&<>\"'.txt":       []byte("xml specials"),
		"dbl/slash":         []byte("slash"),
		"big.bin":           randBytes(2, 6<<20+12345),
	}
}

// do sends a raw request to the fixture.
func (f *fixture) do(t testing.TB, method, pathAndQuery string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+pathAndQuery, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, pathAndQuery, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, pathAndQuery, err)
	}
	return resp, body
}

// objPath is the escaped request path for key in the fixture bucket.
func objPath(bucket, key string) string {
	return "/" + bucket + "/" + escapeKey(key)
}

// escapeKey percent-encodes a key for a request path, keeping '/'.
func escapeKey(key string) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

type s3Error struct {
	XMLName    xml.Name `xml:"Error"`
	Code       string
	Message    string
	Key        string
	BucketName string
	Resource   string
	RequestID  string `xml:"RequestId"`
	HostID     string `xml:"HostId"`
}

// wantError checks an S3 error response: status, code, XML, request id.
func wantError(t testing.TB, resp *http.Response, body []byte, status int, code string) s3Error {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, status, body)
	}
	rid := resp.Header.Get("x-amz-request-id")
	if rid == "" || resp.Header.Get("x-amz-id-2") == "" {
		t.Fatalf("missing x-amz-request-id/x-amz-id-2: %v", resp.Header)
	}
	if resp.Request.Method == http.MethodHead {
		if len(body) != 0 {
			t.Fatalf("HEAD error has a body: %q", body)
		}
		return s3Error{}
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/xml" {
		t.Fatalf("error Content-Type = %q", ct)
	}
	var e s3Error
	if err := xml.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body is not XML: %v: %s", err, body)
	}
	if e.Code != code {
		t.Fatalf("error code = %q, want %q; body %s", e.Code, code, body)
	}
	if e.RequestID != rid || e.HostID != resp.Header.Get("x-amz-id-2") {
		t.Fatalf("RequestId %q / HostId %q do not match headers %q / %q", e.RequestID, e.HostID, rid, resp.Header.Get("x-amz-id-2"))
	}
	if e.Message == "" {
		t.Fatalf("error without Message: %s", body)
	}
	return e
}

func mustStatus(t testing.TB, resp *http.Response, body []byte, want int) {
	t.Helper()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d; body %.500s", resp.Request.Method, resp.Request.URL, resp.StatusCode, want, body)
	}
}

func fmtRange(a, b int64) string { return fmt.Sprintf("bytes=%d-%d", a, b) }

func queryUnescape(s string) (string, error) { return url.QueryUnescape(s) }
