package faults

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newGlacierFiles(t *testing.T, keys ...string) (backend.Store, []byte) {
	t.Helper()
	dir := t.TempDir()
	data := randBytes(3, 5000)
	for _, k := range keys {
		p := filepath.Join(dir, "bkt", filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return backend.NewFileStore(dir), data
}

// TestGlacierStoreLifecycle steps one object of each archive kind through
// its restore with a fake clock: refused reads, Stat and List states,
// RestoreObject results, the expiry and the Intelligent-Tiering tier move.
func TestGlacierStoreLifecycle(t *testing.T) {
	fs, data := newGlacierFiles(t, "up/a", "up/b", "up/c", "other/d")
	clock := &testClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	g := NewGlacier(GlacierConfig{Delay: 10 * time.Minute, TierDelay: map[string]time.Duration{"Expedited": time.Minute}, Now: clock.Now})
	g.SetPrefixClass("bkt", "up/", backend.ClassGlacier, "")
	g.SetClass("bkt", "up/b", backend.ClassDeepArchive, "")
	g.SetClass("bkt", "up/c", backend.ClassIntelligentTiering, backend.TierDeepArchiveAccess)
	s := g.Store(fs)
	ctx := context.Background()

	for _, tc := range []struct{ key, class, tier string }{
		{"up/a", backend.ClassGlacier, ""}, {"up/b", backend.ClassDeepArchive, ""},
		{"up/c", backend.ClassIntelligentTiering, backend.TierDeepArchiveAccess},
	} {
		_, _, err := readAllRange(s, "bkt", tc.key, 0, 10, "")
		wantErr(t, err, backend.ErrArchived, "bkt", tc.key)
		var ae *backend.ArchivedError
		if !errors.As(err, &ae) || ae.StorageClass != tc.class || ae.AccessTier != tc.tier {
			t.Fatalf("%s: %v", tc.key, err)
		}
		_, _, err = s.Get(ctx, "bkt", tc.key)
		wantErr(t, err, backend.ErrArchived, "bkt", tc.key)
		info, err := s.Stat(ctx, "bkt", tc.key)
		if err != nil || info.StorageClass != tc.class || info.AccessTier != tc.tier || !info.RestoreKnown || info.Restore.Requested {
			t.Fatalf("Stat %s: %+v %v", tc.key, info, err)
		}
	}
	if got, _, err := readAllRange(s, "bkt", "other/d", 5, 10, ""); err != nil || string(got) != string(data[5:15]) {
		t.Fatalf("STANDARD read: %v", err)
	}
	_, _, err := readAllRange(s, "bkt", "up/nope", 0, 1, "")
	wantErr(t, err, backend.ErrNotFound, "bkt", "up/nope")

	type step struct {
		key  string
		req  backend.RestoreRequest
		want backend.RestoreResult
		err  error
	}
	run := func(steps ...step) {
		t.Helper()
		for _, st := range steps {
			res, err := s.Restore(ctx, "bkt", st.key, st.req)
			if st.err != nil {
				wantErr(t, err, st.err, "bkt", st.key)
				continue
			}
			if err != nil || res != st.want {
				t.Fatalf("Restore %s %+v: %v, %v; want %v", st.key, st.req, res, err, st.want)
			}
		}
	}
	run(
		step{"other/d", backend.RestoreRequest{Days: 1}, 0, backend.ErrNotArchived},
		step{"up/nope", backend.RestoreRequest{Days: 1}, 0, backend.ErrNotFound},
		step{"up/b", backend.RestoreRequest{Days: 1, Tier: "Expedited"}, 0, backend.ErrInvalidRestore},
		step{"up/c", backend.RestoreRequest{Days: 1}, 0, backend.ErrInvalidRestore},
		step{"up/a", backend.RestoreRequest{Days: 3, Tier: "Expedited"}, backend.RestoreStarted, nil},
		step{"up/b", backend.RestoreRequest{Days: 1}, backend.RestoreStarted, nil},
		step{"up/c", backend.RestoreRequest{}, backend.RestoreStarted, nil},
		step{"up/a", backend.RestoreRequest{Days: 3}, backend.RestoreInProgress, nil},
	)
	listed := func() map[string]backend.ObjectInfo {
		m := map[string]backend.ObjectInfo{}
		if err := s.List(ctx, "bkt", "", func(oi backend.ObjectInfo) error { m[oi.Key] = oi; return nil }); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := listed(); !m["up/a"].RestoreKnown || !m["up/a"].Restore.Ongoing || m["other/d"].RestoreKnown || m["other/d"].StorageClass != backend.ClassStandard {
		t.Fatalf("listing during the restores: %+v", m)
	}
	clock.Add(time.Minute) // the Expedited one is done
	if got, _, err := readAllRange(s, "bkt", "up/a", 5, 10, ""); err != nil || string(got) != string(data[5:15]) {
		t.Fatalf("restored read: %v", err)
	}
	if st := g.State("bkt", "up/a"); !st.Readable || st.Restore.Ongoing || !st.Restore.Expiry.Equal(clock.Now().Add(72*time.Hour)) {
		t.Fatalf("state after the restore: %+v", st)
	}
	if _, _, err := readAllRange(s, "bkt", "up/b", 0, 1, ""); !errors.Is(err, backend.ErrArchived) {
		t.Fatalf("deep archive after 1 minute: %v", err)
	}
	run(step{"up/a", backend.RestoreRequest{Days: 5}, backend.RestoreAlreadyRestored, nil})
	if st := g.State("bkt", "up/a"); !st.Restore.Expiry.Equal(clock.Now().Add(5 * 24 * time.Hour)) {
		t.Fatalf("a second restore of a restored copy must extend its expiry: %+v", st)
	}
	clock.Add(9 * time.Minute)
	for _, k := range []string{"up/b", "up/c"} {
		if _, _, err := readAllRange(s, "bkt", k, 0, 10, ""); err != nil {
			t.Fatalf("%s after its restore: %v", k, err)
		}
	}
	if st := g.State("bkt", "up/c"); st.Tier != "" || st.Class != backend.ClassIntelligentTiering || !st.Restore.Expiry.IsZero() {
		t.Fatalf("IT after its restore: %+v", st)
	}
	clock.Add(5 * 24 * time.Hour)
	if _, _, err := readAllRange(s, "bkt", "up/a", 0, 1, ""); !errors.Is(err, backend.ErrArchived) {
		t.Fatalf("after expiry: %v", err)
	}
	if _, _, err := readAllRange(s, "bkt", "up/c", 0, 1, ""); err != nil {
		t.Fatalf("IT stays in the frequent tier: %v", err)
	}
	if got := g.Started(); strings.Join(got, ",") != "bkt/up/a,bkt/up/b,bkt/up/c" {
		t.Fatalf("Started %v", got)
	}
	if n := len(g.Calls()); n != 8 {
		t.Fatalf("%d calls logged, want 8 (every RestoreObject of an existing object)", n)
	}
	g.Forget()
	if len(g.Calls()) != 0 || g.State("bkt", "up/c").Readable {
		t.Fatal("Forget kept restores")
	}
}

// TestGlacierHTTP drives the HTTP layer with plain requests in front of a
// tiny S3-like origin: the refusal document, the storage headers, the
// listing rewrite (with RestoreStatus and encoding-type=url) and
// RestoreObject's status codes.
func TestGlacierHTTP(t *testing.T) {
	obj := "hello world"
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/bkt" || r.URL.Path == "/bkt/":
			w.Header().Set("Content-Type", "application/xml")
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>bkt</Name>`+
				`<Contents><Key>a%2Fz+1</Key><Size>11</Size><StorageClass>STANDARD</StorageClass></Contents>`+
				`<Contents><Key>a/x &amp; y</Key><Size>11</Size><StorageClass>STANDARD</StorageClass><Owner><ID>o</ID></Owner></Contents>`+
				`<Contents><Key>plain</Key><Size>11</Size></Contents></ListBucketResult>`)
		case strings.HasPrefix(r.URL.Path, "/bkt/"):
			key := strings.TrimPrefix(r.URL.Path, "/bkt/")
			if key != "a/x & y" && key != "plain" && key != "a/z 1" {
				w.WriteHeader(404)
				return
			}
			w.Header().Set("Content-Length", "11")
			w.WriteHeader(200)
			if r.Method == http.MethodGet {
				io.WriteString(w, obj)
			}
		default:
			w.WriteHeader(400)
		}
	})
	clock := &testClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	g := NewGlacier(GlacierConfig{Delay: time.Minute, Now: clock.Now})
	g.SetClass("bkt", "a/x & y", backend.ClassIntelligentTiering, backend.TierArchiveAccess)
	g.SetClass("bkt", "a/z 1", backend.ClassDeepArchive, "")
	g.SetClass("bkt", "gone", backend.ClassGlacier, "")
	srv := httptest.NewServer(g.HTTP(origin))
	defer srv.Close()

	do := func(method, path, body string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	type errDoc struct {
		Code, Message, StorageClass, AccessTier string
	}
	parseErr := func(body string) errDoc {
		var d errDoc
		if err := xml.Unmarshal([]byte(body), &d); err != nil {
			t.Fatalf("error body %q: %v", body, err)
		}
		return d
	}

	resp, body := do("GET", "/bkt/a/x%20&%20y", "", nil)
	if d := parseErr(body); resp.StatusCode != 403 || d.Code != "InvalidObjectState" || d.StorageClass != "INTELLIGENT_TIERING" ||
		d.AccessTier != "ARCHIVE_ACCESS" || d.Message != "The operation is not valid for the object's storage class" {
		t.Fatalf("GET archived: %d %q", resp.StatusCode, body)
	}
	if resp, _ := do("GET", "/bkt/gone", "", nil); resp.StatusCode != 404 {
		t.Fatalf("GET of a missing archived key: %d", resp.StatusCode)
	}
	resp, _ = do("HEAD", "/bkt/a/x%20&%20y", "", nil)
	if resp.StatusCode != 200 || resp.Header.Get("x-amz-storage-class") != "INTELLIGENT_TIERING" ||
		resp.Header.Get("x-amz-archive-status") != "ARCHIVE_ACCESS" || resp.Header.Get("x-amz-restore") != "" {
		t.Fatalf("HEAD archived: %d %v", resp.StatusCode, resp.Header)
	}
	resp, body = do("GET", "/bkt/plain", "", nil)
	if resp.StatusCode != 200 || body != obj || resp.Header.Get("x-amz-storage-class") != "" {
		t.Fatalf("GET standard: %d %q %v", resp.StatusCode, body, resp.Header)
	}

	restoreBody := func(days string, tier string) string {
		s := `<RestoreRequest xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`
		if days != "" {
			s += "<Days>" + days + "</Days>"
		}
		if tier != "" {
			s += "<GlacierJobParameters><Tier>" + tier + "</Tier></GlacierJobParameters>"
		}
		return s + "</RestoreRequest>"
	}
	for _, tc := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"/bkt/plain?restore", restoreBody("1", ""), 403, "InvalidObjectState"},
		{"/bkt/gone?restore", restoreBody("1", ""), 404, "NoSuchKey"},
		{"/bkt/a/z%201?restore", "<RestoreRequest><Days>1", 400, "MalformedXML"},
		{"/bkt/a/z%201?restore", restoreBody("0", ""), 400, "InvalidArgument"},
		{"/bkt/a/z%201?restore", restoreBody("1", "Expedited"), 400, "InvalidArgument"},
		{"/bkt/a/z%201?restore", restoreBody("", "Bulk"), 400, "InvalidArgument"},  // Days required
		{"/bkt/a/x%20&%20y?restore", restoreBody("2", ""), 400, "InvalidArgument"}, // no Days for IT
		{"/bkt/a/z%201?restore", restoreBody("2", "Bulk"), 202, ""},
		{"/bkt/a/z%201?restore", restoreBody("2", "Bulk"), 409, "RestoreAlreadyInProgress"},
		{"/bkt/a/x%20&%20y?restore", restoreBody("", ""), 202, ""},
	} {
		resp, body := do("POST", tc.path, tc.body, nil)
		if resp.StatusCode != tc.status || (tc.code != "" && parseErr(body).Code != tc.code) {
			t.Fatalf("POST %s %s: %d %q; want %d %s", tc.path, tc.body, resp.StatusCode, body, tc.status, tc.code)
		}
	}
	resp, _ = do("HEAD", "/bkt/a/z%201", "", nil)
	if resp.Header.Get("x-amz-restore") != `ongoing-request="true"` || resp.Header.Get("x-amz-storage-class") != "DEEP_ARCHIVE" {
		t.Fatalf("HEAD during the restore: %v", resp.Header)
	}
	type listing struct {
		Contents []struct {
			Key, StorageClass string
			RestoreStatus     *struct {
				IsRestoreInProgress bool
				RestoreExpiryDate   string
			}
			Owner *struct{ ID string }
		}
	}
	list := func(hdr map[string]string) listing {
		t.Helper()
		resp, body := do("GET", "/bkt?list-type=2&encoding-type=url", "", hdr)
		var l listing
		if err := xml.Unmarshal([]byte(body), &l); err != nil || resp.StatusCode != 200 || resp.ContentLength != int64(len(body)) {
			t.Fatalf("listing %d %q: %v", resp.StatusCode, body, err)
		}
		return l
	}
	l := list(nil)
	if len(l.Contents) != 3 || l.Contents[0].StorageClass != "DEEP_ARCHIVE" || l.Contents[0].RestoreStatus != nil ||
		l.Contents[1].StorageClass != "INTELLIGENT_TIERING" || l.Contents[1].Owner == nil || l.Contents[2].StorageClass != "STANDARD" {
		t.Fatalf("listing without RestoreStatus: %+v", l)
	}
	clock.Add(time.Minute)
	l = list(map[string]string{"x-amz-optional-object-attributes": "RestoreStatus"})
	if rs := l.Contents[0].RestoreStatus; rs == nil || rs.IsRestoreInProgress || rs.RestoreExpiryDate != "2030-01-03T00:01:00.000Z" {
		t.Fatalf("listing with RestoreStatus after the restore: %+v", l.Contents[0])
	}
	if rs := l.Contents[1].RestoreStatus; rs == nil || rs.IsRestoreInProgress || rs.RestoreExpiryDate != "" || l.Contents[2].RestoreStatus != nil {
		t.Fatalf("IT entry: %+v / %+v", l.Contents[1], l.Contents[2])
	}
	resp, body = do("GET", "/bkt/a/z%201", "", nil)
	if resp.StatusCode != 200 || body != obj || resp.Header.Get("x-amz-restore") != `ongoing-request="false", expiry-date="Thu, 03 Jan 2030 00:01:00 GMT"` {
		t.Fatalf("GET after the restore: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, _ = do("POST", "/bkt/a/z%201?restore", restoreBody("2", "Bulk"), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("restore of a restored copy: %d", resp.StatusCode)
	}
}

// TestGlacierStoreKeepsWrites: the model in front of a store that writes
// keeps its conditional writes (backend.Putter, backend.MatchPutter; it
// dropped them before), and what it writes is read back through it, under
// the class the model gives the key. A SmallReader it does not pass on:
// backend.ReadSmall then goes through the model's Stat and ReadRange, so an
// archived object is refused there too.
func TestGlacierStoreKeepsWrites(t *testing.T) {
	ctx := context.Background()
	fs, _ := newGlacierFiles(t, "up/a")
	g := NewGlacier(GlacierConfig{})
	g.SetPrefixClass("bkt", "up/", backend.ClassGlacier, "")
	s := g.Store(fs)
	var st backend.Store = s
	if _, ok := st.(backend.SmallReader); ok {
		t.Fatal("GlacierStore passes ReadSmall on, around the model's refusals")
	}
	p, ok := st.(backend.Putter)
	if !ok {
		t.Fatal("GlacierStore is not a Putter")
	}
	if ok, err := p.PutIfAbsent(ctx, "bkt", "idx/one", strings.NewReader("index"), 5); !ok || err != nil {
		t.Fatalf("PutIfAbsent: %v, %v", ok, err)
	}
	if ok, err := p.PutIfAbsent(ctx, "bkt", "idx/one", strings.NewReader("other"), 5); ok || err != nil {
		t.Fatalf("second PutIfAbsent: %v, %v (want false, nil)", ok, err)
	}
	info, err := s.Stat(ctx, "bkt", "idx/one")
	if err != nil {
		t.Fatal(err)
	}
	mp, ok := st.(backend.MatchPutter)
	if !ok {
		t.Fatal("GlacierStore is not a MatchPutter")
	}
	if ok, err := mp.PutIfMatch(ctx, "bkt", "idx/one", info.ETag, strings.NewReader("newer"), 5); !ok || err != nil {
		t.Fatalf("PutIfMatch: %v, %v", ok, err)
	}
	data, _, _, err := backend.ReadSmall(ctx, s, "bkt", "idx/one", 100, "")
	if err != nil || string(data) != "newer" {
		t.Fatalf("read back: %q, %v", data, err)
	}
	if ok, err := p.PutIfAbsent(ctx, "bkt", "up/new", strings.NewReader("cold"), 4); !ok || err != nil {
		t.Fatalf("PutIfAbsent under the archived prefix: %v, %v", ok, err)
	}
	var ae *backend.ArchivedError
	if _, _, _, err := backend.ReadSmall(ctx, s, "bkt", "up/new", 100, ""); !errors.As(err, &ae) {
		t.Fatalf("ReadSmall of an object the model archives: %v, want an ArchivedError", err)
	}
}
