package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// A published dataset on a gofakes3 server, in the CargoShip layout:
// lake/datasets/ocean/v/<id>/uploads/<upload>/manifest.json.gz and
// lake/datasets/ocean/CURRENT. Version 2's chunks are stored under
// version 1's folder and named by full key (a later version sharing an
// older one's chunks).
const (
	dsV1 = "20260913T213437Z-487888"
	dsV2 = "20260913T213513Z-13de9c"
)

// reqLog records every request the fake S3 server answers: method, path
// and status.
type reqLog struct {
	h  http.Handler
	mu sync.Mutex
	rs []string
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(c int) { w.code = c; w.ResponseWriter.WriteHeader(c) }

func (l *reqLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w, code: 200}
	l.h.ServeHTTP(sw, r)
	l.mu.Lock()
	l.rs = append(l.rs, fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, sw.code))
	l.mu.Unlock()
}

func (l *reqLog) since(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.rs[n:]...)
}

func (l *reqLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.rs)
}

type datasetLake struct {
	*lakeFake
	log        *reqLog
	man1, man2 string
	v1, v2     map[string][]byte
}

// movedManifest stores the manifest under version to's folder instead of
// from's (the chunks stay where they are written).
type movedManifest struct {
	cargopack.Sink
	from, to string
}

func (m movedManifest) Put(ctx context.Context, bucket, key string, r io.Reader, size int64) error {
	if strings.HasSuffix(key, "/manifest.json.gz") {
		key = strings.Replace(key, "/v/"+m.from+"/", "/v/"+m.to+"/", 1)
	}
	return m.Sink.Put(ctx, bucket, key, r, size)
}

func newDatasetLake(t *testing.T) *datasetLake {
	t.Helper()
	mem := s3mem.New()
	if err := mem.CreateBucket("lake"); err != nil {
		t.Fatal(err)
	}
	log := &reqLog{h: gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()}
	srv := httptest.NewServer(log)
	t.Cleanup(srv.Close)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	d := &datasetLake{lakeFake: &lakeFake{url: srv.URL, client: s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("AK", "SK", ""),
	})}, log: log}
	d.v1 = map[string][]byte{"a.txt": []byte("alpha one\n"), "big.bin": bytes.Repeat([]byte("version one big file\n"), 200000)}
	d.v2 = map[string][]byte{"a.txt": []byte("alpha two, changed\n"), "c/new.txt": bytes.Repeat([]byte("c"), 9000)}
	r1 := d.pack(t, nil, d.v1, cargopack.Options{Prefix: "datasets/ocean/v/" + dsV1, UploadID: "20260913-aaaa0001",
		Created: time.Date(2026, 9, 13, 21, 34, 37, 0, time.UTC)})
	d.man1 = r1.ManifestKey
	r2 := d.pack(t, movedManifest{cargopack.S3Sink(d.client), dsV1, dsV2}, d.v2, cargopack.Options{Prefix: "datasets/ocean/v/" + dsV1,
		UploadID: "20260913-bbbb0002", KeyStyle: cargopack.PrefixIncluded, Created: time.Date(2026, 9, 13, 21, 35, 13, 0, time.UTC)})
	d.man2 = strings.Replace(r2.ManifestKey, "/v/"+dsV1+"/", "/v/"+dsV2+"/", 1)
	d.point(t, dsV1)
	return d
}

func (d *datasetLake) pointer(vid string) string {
	man, prev, n := d.man1, "", len(d.v1)
	if vid == dsV2 {
		man, prev, n = d.man2, dsV1, len(d.v2)
	}
	return fmt.Sprintf(`{"schema":"cargoship.current/1","version_id":%q,"manifest_key":%q,"index_key":%q,`+
		`"index_sha256":"5c2324ae6e94c29a162fed5f1a2c52c180f6b1ff47995d7270e680142b0e73a8","created":"2026-09-13T21:35:50Z",`+
		`"file_count":%d,"total_bytes":0,"previous_version_id":%q}`, vid, man, "datasets/ocean/v/"+vid+"/index.lith", n, prev)
}

func (d *datasetLake) putCurrent(t *testing.T, body string) {
	t.Helper()
	if _, err := d.client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("lake"),
		Key: aws.String("datasets/ocean/CURRENT"), Body: strings.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
}

func (d *datasetLake) point(t *testing.T, vid string) { d.putCurrent(t, d.pointer(vid)) }

func wantBody(t *testing.T, url string, want []byte) {
	t.Helper()
	code, b := get(t, url)
	if code != 200 || !bytes.Equal(b, want) {
		t.Fatalf("GET %s: %d, %d bytes (want %d), %.80q", url, code, len(b), len(want), b)
	}
}

// TestServeDataset: wharf serve over a published dataset on gofakes3,
// read by an HTTP client: the current tree byte for byte (version 2's
// chunks read from version 1's folder); a pinned version; the dataset
// discovered as its own bucket (its versions' uploads not published); an
// unchanged rescan costing one 304; a promote picked up at a rescan and at
// SIGHUP; a request in flight during the swap finishing with its
// version's bytes; a malformed pointer at a re-read keeping the last good
// version, counted in /metrics.
func TestServeDataset(t *testing.T) {
	d := newDatasetLake(t)
	rescan := make(chan struct{})
	scanned := make(chan error, 4)
	addr, admin, logs, _ := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: "s3://", S3: d.s3Config(),
		Aliases:   []serveAlias{{Name: "live", Target: "s3://lake/datasets/ocean@current"}, {Name: "first", Target: "s3://lake/datasets/ocean@" + dsV1}},
		Discover:  []string{"s3://lake/datasets"},
		Anonymous: true, CacheBytes: 16 << 20, RetireGrace: 10 * time.Millisecond,
		rescanNow: rescan, scanned: func(err error) { scanned <- err },
	})
	waitReady(t, admin)
	rescanNow := func() {
		t.Helper()
		rescan <- struct{}{}
		if err := <-scanned; err != nil {
			t.Fatal(err)
		}
	}
	code, body := get(t, "http://"+addr+"/")
	for _, b := range []string{"live", "first", "ocean"} {
		if code != 200 || !strings.Contains(string(body), "<Name>"+b+"</Name>") {
			t.Fatalf("ListBuckets lacks %s: %s", b, body)
		}
	}
	if n := strings.Count(string(body), "<Name>"); n != 3 {
		t.Fatalf("ListBuckets: %d buckets, want 3 (the versions' uploads are not buckets): %s", n, body)
	}
	for _, b := range []string{"live", "first", "ocean"} {
		for k, v := range d.v1 {
			wantBody(t, "http://"+addr+"/"+b+"/"+k, v)
		}
	}
	// /-/archives names what each bucket serves, from the catalog (the
	// console reads the same Manager.Kind).
	_, body = get(t, "http://"+admin+"/-/archives")
	var page struct {
		Buckets []struct{ Bucket, Kind string }
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatalf("/-/archives: %v %s", err, body)
	}
	kinds := map[string]string{}
	for _, b := range page.Buckets {
		kinds[b.Bucket] = b.Kind
	}
	if want := map[string]string{"live": "dataset", "first": "pinned version", "ocean": "discovered dataset"}; !maps.Equal(kinds, want) {
		t.Fatalf("/-/archives kinds %v, want %v", kinds, want)
	}

	// An unchanged rescan: one request per followed dataset, a 304 each.
	n := d.log.len()
	rescanNow()
	reqs := d.log.since(n)
	cond, lists, heads := 0, 0, 0
	for _, r := range reqs {
		switch r {
		case "GET /lake/datasets/ocean/CURRENT 304":
			cond++
		case "GET /lake 200": // a listing: discovery, and each served archive's storage classes
			lists++
		case "HEAD /lake/" + d.man1 + " 200": // the pinned version's manifest, checked
			heads++
		default:
			t.Errorf("an unchanged rescan made %s", r)
		}
	}
	if heads != 1 {
		t.Fatalf("an unchanged rescan made %d HEADs of the pinned version's manifest, want 1: %v", heads, reqs)
	}
	// live and ocean follow CURRENT: one 304 each. The listings are the
	// discovery root's and the storage-class refresh of the one archive
	// the three buckets share (they serve the same version, opened once).
	if cond != 2 || lists != 2 {
		t.Fatalf("an unchanged rescan made %v, want two conditional GETs answered 304 and 2 listings", reqs)
	}
	t.Logf("unchanged rescan: %v", reqs)

	// A request in flight across the promote.
	resp, err := http.Get("http://" + addr + "/live/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 64<<10)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}

	d.point(t, dsV2)
	n = d.log.len()
	start := time.Now()
	rescanNow()
	t.Logf("a rescan after a new CURRENT: %v", d.log.since(n))
	code, b := get(t, "http://"+addr+"/live/a.txt")
	took := time.Since(start)
	if code != 200 || !bytes.Equal(b, d.v2["a.txt"]) {
		t.Fatalf("after the promote: %d %q", code, b)
	}
	t.Logf("new CURRENT to serving it: %v (rescan trigger to the first GET answered from the new version)", took)
	time.Sleep(50 * time.Millisecond) // past the retire grace: the old version is closed
	rest, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(append(head, rest...), d.v1["big.bin"]) {
		t.Fatalf("the request in flight across the swap: %d bytes, %v", len(head)+len(rest), err)
	}
	for _, bk := range []string{"live", "ocean"} {
		for k, v := range d.v2 {
			wantBody(t, "http://"+addr+"/"+bk+"/"+k, v)
		}
		if code, _ := get(t, "http://"+addr+"/"+bk+"/big.bin"); code != 404 {
			t.Fatalf("%s/big.bin after the promote: %d", bk, code)
		}
	}
	wantBody(t, "http://"+addr+"/first/big.bin", d.v1["big.bin"]) // pinned

	// A malformed pointer at a re-read: the last good version keeps serving.
	d.putCurrent(t, d.pointer(dsV1)+"{}")
	rescanNow()
	wantBody(t, "http://"+addr+"/live/a.txt", d.v2["a.txt"])
	_, metrics := get(t, "http://"+admin+"/metrics")
	for _, want := range []string{`wharf_dataset_pointer_errors_total{bucket="live"} 1`, `wharf_dataset_pointer_errors_total{bucket="ocean"} 1`,
		`wharf_dataset_version_info{bucket="live",version_id="` + dsV2 + `"} 1`, `wharf_dataset_version_info{bucket="first",version_id="` + dsV1 + `"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !strings.Contains(logs.String(), `"pointer":"s3://lake/datasets/ocean/CURRENT"`) || !strings.Contains(logs.String(), "trailing data") {
		t.Errorf("the pointer error is not logged naming the pointer")
	}

	// Roll back by SIGHUP.
	d.point(t, dsV1)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-scanned:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("SIGHUP did not rescan")
	}
	wantBody(t, "http://"+addr+"/live/big.bin", d.v1["big.bin"])
}

// TestServeDatasetStartErrors: a malformed or dangling pointer, and a
// pinned version that does not exist, stop the start with an error naming
// the pointer's key (or the version and the dataset).
func TestServeDatasetStartErrors(t *testing.T) {
	d := newDatasetLake(t)
	run := func(target string) error {
		return serve(context.Background(), serveConfig{Listen: "127.0.0.1:0", StoreURL: "s3://", S3: d.s3Config(),
			Anonymous: true, CacheBytes: 1 << 20, LogOut: io.Discard,
			Aliases: []serveAlias{{Name: "live", Target: target}},
			Ready:   func(string, string) { t.Error("serve started") }})
	}
	good := d.pointer(dsV2)
	for _, c := range []struct{ name, body, want string }{
		{"unknown field", strings.Replace(good, `"created"`, `"extra":1,"created"`, 1), "unknown field"},
		{"other schema", strings.Replace(good, "current/1", "current/2", 1), "schema"},
		{"dangling", strings.Replace(good, "/uploads/20260913-bbbb0002/", "/uploads/20260913-bbbb0009/", 1), "not found"},
		{"too large", good + strings.Repeat(" ", 70000), "at most 65536"},
	} {
		d.putCurrent(t, c.body)
		err := run("s3://lake/datasets/ocean@current")
		if err == nil || !strings.Contains(err.Error(), "s3://lake/datasets/ocean/CURRENT") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	err := run("s3://lake/datasets/ocean@20200101T000000Z-000000")
	if err == nil || !strings.Contains(err.Error(), "version 20200101T000000Z-000000 does not exist") || !strings.Contains(err.Error(), "s3://lake/datasets/ocean") {
		t.Errorf("missing pinned version: %v", err)
	}
}
