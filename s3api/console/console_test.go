package console_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math/rand"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
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
	"github.com/wharf-s3/wharf/backend/faults"
	"github.com/wharf-s3/wharf/s3api"
	"github.com/wharf-s3/wharf/s3api/console"
)

const (
	hostileName = "<img src=x onerror=alert(1)>.txt"
	goodAK      = "AKIACONSOLE"
	goodSK      = "console-secret/+"
	otherAK     = "AKIAOTHER"
	otherSK     = "other-secret"
)

var mtime = time.Date(2024, 3, 4, 5, 6, 7, 0, time.UTC)

func pngBytes(t testing.TB, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := 0; x < w; x++ {
		img.Set(x, x%h, color.RGBA{200, 30, 30, 255})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func testFiles(t testing.TB) map[string][]byte {
	big := make([]byte, 300<<10)
	rand.New(rand.NewSource(7)).Read(big)
	return map[string][]byte{
		"README.md":                []byte("# Harbour data\n\nSecond line.\n"),
		"data/vessels.csv":         []byte("name,length\nAurora,120\n\"<b>Bold</b>\",99\n"),
		"data/meta.json":           []byte(`{"a":[1,2],"b":"<script>"}`),
		"data/pic.png":             pngBytes(t, 37, 23),
		"data/big.bin":             big,
		"zarr/temp/.zarray":        []byte(`{"zarr_format":2,"shape":[100,200],"chunks":[10,20],"dtype":"<f4","compressor":null,"fill_value":0,"order":"C"}`),
		hostileName:                []byte("hostile name\n"),
		"evil.html":                []byte("<html><script>alert('html')</script><p>hi</p></html>"),
		"evil.svg":                 []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert('svg')"><script>alert(2)</script></svg>`),
		"dir<script>/inner.txt":    []byte("inner\n"),
		"many/" + "x" + "/a.txt":   []byte("a"),
		"weird/a b+c%41&d?e#f.txt": []byte("weird"),
	}
}

// server is a console in front of one S3 handler.
type server struct {
	*httptest.Server
	files map[string][]byte
	logs  *syncBuf
	reg   *prometheus.Registry
	g     *faults.Glacier
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type opts struct {
	anonymous    bool
	keys         []auth.Key
	allowRestore bool
	manyFiles    int
}

func pack(t testing.TB, dir string, files map[string][]byte, o cargopack.Options) *cargopack.Result {
	t.Helper()
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, mtime), o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func newServer(t testing.TB, o opts) *server {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s := &server{files: testFiles(t), logs: &syncBuf{}, reg: prometheus.NewRegistry()}
	res := pack(t, dir, s.files, cargopack.Options{Bucket: "src", Prefix: "main", UploadID: "u-main", FrameSize: 64 << 10, ContentHash: true})
	store := backend.Store(backend.NewFileStore(dir))
	open := func(name, key string, st backend.Store, classes bool) *archiveview.Archive {
		a, err := archiveview.Open(ctx, st, "src", key, archiveview.Options{Name: name, StorageClasses: classes, RestoreTTL: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	m := map[string]*archiveview.Archive{"main": open("main", res.ManifestKey, store, false)}

	// A chain: c1 then c2 changes notes.txt.
	pack(t, dir, map[string][]byte{"notes.txt": []byte("first version\n"), "keep.txt": []byte("kept\n")},
		cargopack.Options{Bucket: "src", Prefix: "chain", UploadID: "c1", SyncType: "full"})
	r2 := pack(t, dir, map[string][]byte{"notes.txt": []byte("second version, longer\n")},
		cargopack.Options{Bucket: "src", Prefix: "chain", UploadID: "c2", PreviousManifestID: "c1", SyncType: "incremental"})
	m["chain"] = open("chain", r2.ManifestKey, store, false)

	// Archived: cold.bin in GLACIER behind the Glacier model.
	s.g = faults.NewGlacier(faults.GlacierConfig{Delay: 1500 * time.Millisecond})
	ra := pack(t, dir, map[string][]byte{"cold.bin": bytes.Repeat([]byte("cold"), 5000), "warm.txt": []byte("warm\n")},
		cargopack.Options{Bucket: "src", Prefix: "arch", UploadID: "a1", Direct: true})
	s.g.SetClass("src", "arch/uploads/a1/files/cold.bin", backend.ClassGlacier, "")
	m["cold"] = open("cold", ra.ManifestKey, s.g.Store(backend.NewFileStore(dir)), true)

	if o.manyFiles > 0 {
		many := map[string][]byte{}
		for i := 0; i < o.manyFiles; i++ {
			many[fmt.Sprintf("k/%06d.txt", i)] = []byte("x")
		}
		rm := pack(t, dir, many, cargopack.Options{Bucket: "src", Prefix: "many", UploadID: "m1"})
		m["many"] = open("many", rm.ManifestKey, store, false)
	}
	v, err := auth.New(auth.Config{Keys: o.keys, Anonymous: o.anonymous})
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.NewStatic(m)
	h := s3api.New(s3api.Config{Catalog: cat, Verifier: v, Logger: zerolog.New(s.logs), Registerer: s.reg, AllowRestore: o.allowRestore,
		Console: func(api http.Handler) http.Handler {
			return console.New(console.Config{Catalog: cat, Verifier: v, API: api, Logins: len(o.keys) > 0,
				AllowRestore: o.allowRestore, Logger: zerolog.New(s.logs), LoginBurst: 3, LoginEvery: time.Hour,
				Kind: func(b string) string {
					if b == "chain" {
						return "alias"
					}
					return ""
				}})
		}})
	s.Server = httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// client is a browser-like client: a cookie jar, no redirects followed.
func (s *server) client(t testing.TB) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (s *server) get(t testing.TB, c *http.Client, path string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(s.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (s *server) post(t testing.TB, c *http.Client, path string, form url.Values) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.URL)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func want(t testing.TB, resp *http.Response, body string, status int, contains ...string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d\n%.2000s", resp.Request.Method, resp.Request.URL, resp.StatusCode, status, body)
	}
	for _, c := range contains {
		if !strings.Contains(body, c) {
			t.Errorf("%s: body lacks %q\n%.3000s", resp.Request.URL, c, body)
		}
	}
}

func fileURL(bucket, key string) string {
	return "/-/console/f/" + bucket + "?" + url.Values{"key": {key}}.Encode()
}

// hrefs returns the href values of the page (HTML-unescaped).
func hrefs(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`href="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		out = append(out, strings.ReplaceAll(m[1], "&amp;", "&"))
	}
	return out
}

func TestBucketsAndBrowse(t *testing.T) {
	s := newServer(t, opts{anonymous: true})
	c := s.client(t)
	resp, body := s.get(t, c, "/-/console/")
	want(t, resp, body, 200, `href="/-/console/b/main"`, `href="/-/console/b/chain"`, `href="/-/console/b/cold"`, "a chain of 2 uploads")

	resp, body = s.get(t, c, "/-/console/b/main")
	want(t, resp, body, 200, ">data/<", ">README.md<", ">zarr/<")
	resp, body = s.get(t, c, "/-/console/b/main?prefix=data/")
	want(t, resp, body, 200, ">vessels.csv<", ">pic.png<", "STANDARD", `title="307,200 bytes"`, "2024-03-04 05:06:07 UTC")
	if !strings.Contains(body, `href="/-/console/b/main?prefix=data%2F"`) || !strings.Contains(body, `href="/-/console/b/main"`) {
		t.Errorf("breadcrumbs missing:\n%s", body)
	}
	// Prefix filter.
	resp, body = s.get(t, c, "/-/console/b/main?prefix=data/&filter=v")
	want(t, resp, body, 200, ">vessels.csv<")
	if strings.Contains(body, "pic.png") {
		t.Errorf("filter v shows pic.png")
	}
	// Unknown bucket, bad key.
	resp, body = s.get(t, c, "/-/console/b/nope")
	want(t, resp, body, 404, "No bucket nope")
	resp, body = s.get(t, c, fileURL("main", "no/such"))
	want(t, resp, body, 404)
}

func TestPagination(t *testing.T) {
	s := newServer(t, opts{anonymous: true, manyFiles: 450})
	c := s.client(t)
	seen := map[string]bool{}
	path := "/-/console/b/many?prefix=k/"
	pages := 0
	for path != "" {
		resp, body := s.get(t, c, path)
		want(t, resp, body, 200)
		pages++
		for _, m := range regexp.MustCompile(`>(\d{6}\.txt)<`).FindAllStringSubmatch(body, -1) {
			if seen[m[1]] {
				t.Fatalf("%s shown twice", m[1])
			}
			seen[m[1]] = true
		}
		path = ""
		if m := regexp.MustCompile(`href="([^"]*)" id="next-page"`).FindStringSubmatch(body); m != nil {
			path = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if pages != 3 || len(seen) != 450 {
		t.Fatalf("%d pages, %d files; want 3 pages of 450 files", pages, len(seen))
	}
}

func TestFilePageAndDownload(t *testing.T) {
	s := newServer(t, opts{anonymous: true})
	c := s.client(t)
	resp, body := s.get(t, c, fileURL("main", "data/big.bin"))
	want(t, resp, body, 200, "307,200 bytes", "sha256", "whole-file sha256", "STANDARD", "aws s3 cp --endpoint-url", "--no-sign-request",
		"boto3.client", "rclone copyto", `id="download"`, "u-main")
	var dl string
	for _, h := range hrefs(body) {
		if strings.HasPrefix(h, "/-/console/dl/") {
			dl = h
		}
	}
	resp, err := c.Get(s.URL + dl)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, s.files["data/big.bin"]) {
		t.Fatalf("download: %d bytes, differ from the source", len(got))
	}
	if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, `attachment; filename="big.bin"`) {
		t.Errorf("Content-Disposition %q", cd)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("download Content-Type %q nosniff %q", ct, resp.Header.Get("X-Content-Type-Options"))
	}
	// Console requests are logged and counted like S3 requests.
	if !strings.Contains(s.logs.String(), `"op":"Console"`) {
		t.Errorf("no access line with op Console")
	}
	mfs, _ := s.reg.Gather()
	found := false
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == "Console" && mf.GetName() == "wharf_requests_total" && m.GetCounter().GetValue() > 0 {
					found = true
				}
			}
		}
	}
	if !found {
		t.Errorf("wharf_requests_total{op=Console} not counted")
	}
}

func TestVersions(t *testing.T) {
	s := newServer(t, opts{anonymous: true})
	c := s.client(t)
	resp, body := s.get(t, c, fileURL("chain", "notes.txt"))
	want(t, resp, body, 200, "second version, longer", ">c2</a> (latest)", ">c1</a>")
	var old string
	for _, h := range hrefs(body) {
		if strings.Contains(h, "version=c1") {
			old = h
		}
	}
	resp, body = s.get(t, c, old)
	want(t, resp, body, 200, "first version")
	resp, body = s.get(t, c, fileURL("chain", "notes.txt")+"&version=nope")
	want(t, resp, body, 404)
}

func TestPreviews(t *testing.T) {
	s := newServer(t, opts{anonymous: true})
	c := s.client(t)
	resp, body := s.get(t, c, fileURL("main", "README.md"))
	want(t, resp, body, 200, `<pre id="preview-text" class="text"># Harbour data`)
	resp, body = s.get(t, c, fileURL("main", "data/vessels.csv"))
	want(t, resp, body, 200, `<table id="preview-table"><tr><th>name</th><th>length</th></tr><tr><td>Aurora</td>`, "<td>&lt;b&gt;Bold&lt;/b&gt;</td>")
	resp, body = s.get(t, c, fileURL("main", "data/meta.json"))
	want(t, resp, body, 200, "&#34;b&#34;: &#34;&lt;script&gt;&#34;")
	resp, body = s.get(t, c, fileURL("main", "zarr/temp/.zarray"))
	want(t, resp, body, 200, `id="preview-zarr"`, "<th>shape</th><td><code>[100,200]</code>", "<th>dtype</th>")
	resp, body = s.get(t, c, fileURL("main", "data/big.bin"))
	want(t, resp, body, 200, `<pre id="preview-text" class="hex">00000000  `)
	resp, body = s.get(t, c, fileURL("main", "data/pic.png"))
	want(t, resp, body, 200, `width="37" height="23"`, "37 × 23 pixels")
	m := regexp.MustCompile(`<img id="preview-image" src="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no image")
	}
	resp, err := c.Get(s.URL + strings.ReplaceAll(m[1], "&amp;", "&"))
	if err != nil {
		t.Fatal(err)
	}
	img, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != "image/png" || !bytes.Equal(img, s.files["data/pic.png"]) || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("raw image: %s %v", resp.Header.Get("Content-Type"), resp.Header)
	}
	// An archived file says it must be restored first, and is not read.
	resp, body = s.get(t, c, fileURL("cold", "cold.bin"))
	want(t, resp, body, 200, "must be restored before", "GLACIER", "not restored")
	if strings.Contains(body, `id="preview"`) || strings.Contains(body, `id="download"`) {
		t.Errorf("archived file previewed or offered for download")
	}
	resp, body = s.get(t, c, "/-/console/dl/cold?key=cold.bin")
	want(t, resp, body, 403, "must be restored")
}

func TestHostileContent(t *testing.T) {
	s := newServer(t, opts{anonymous: true})
	c := s.client(t)
	for _, p := range []string{"/-/console/", "/-/console/b/main", fileURL("main", hostileName), fileURL("main", "evil.html"),
		fileURL("main", "evil.svg"), "/-/console/b/main?prefix=" + url.QueryEscape("dir<script>/"), "/-/console/b/main?prefix=%3Cscript%3E"} {
		resp, body := s.get(t, c, p)
		want(t, resp, body, 200)
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: CSP %q", p, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("%s: headers %v", p, resp.Header)
		}
		low := strings.ToLower(body)
		for _, bad := range []string{"<script", "<img src=x", "<svg", "<iframe", "<object", "<embed"} {
			if strings.Contains(low, bad) {
				t.Errorf("%s: page holds unescaped %q", p, bad)
			}
		}
		if m := regexp.MustCompile(`<[a-z][^>]*\son[a-z]+\s*=`).FindString(low); m != "" {
			t.Errorf("%s: an element with an event handler: %q", p, m)
		}
	}
	resp, body := s.get(t, c, "/-/console/b/main")
	want(t, resp, body, 200, "&lt;img src=x onerror=alert(1)&gt;.txt", "dir&lt;script&gt;/")
	resp, body = s.get(t, c, fileURL("main", "evil.html"))
	want(t, resp, body, 200, "&lt;script&gt;alert(&#39;html&#39;)&lt;/script&gt;")
	resp, body = s.get(t, c, fileURL("main", "evil.svg"))
	want(t, resp, body, 200, "&lt;svg")
	resp, body = s.get(t, c, fileURL("main", "weird/a b+c%41&d?e#f.txt"))
	want(t, resp, body, 200, "weird")
	// HTML and SVG are never served inline.
	for _, k := range []string{"evil.html", "evil.svg", hostileName} {
		resp, body = s.get(t, c, "/-/console/raw/main?key="+url.QueryEscape(k))
		want(t, resp, body, 415)
		resp, _ = s.get(t, c, "/-/console/dl/main?key="+url.QueryEscape(k))
		if resp.Header.Get("Content-Type") != "application/octet-stream" || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
			t.Errorf("download of %s: %v", k, resp.Header)
		}
	}
	// The hostile name's Content-Disposition carries no quote or angle bracket raw.
	if cd := resp.Header.Get("Content-Disposition"); strings.ContainsAny(strings.TrimPrefix(cd, "attachment; filename=\""), "<>") {
		t.Errorf("Content-Disposition %q", cd)
	}
	// A POST from another origin (or an opaque one) is refused, as is a
	// cross-site one without Origin.
	for _, h := range [][2]string{{"Origin", "http://evil.example"}, {"Origin", "null"}, {"Sec-Fetch-Site", "cross-site"}} {
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/-/console/login", strings.NewReader(""))
		req.Header.Set(h[0], h[1])
		r2, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r2.Body)
		r2.Body.Close()
		if r2.StatusCode != 403 || !strings.Contains(string(b), "another site") {
			t.Errorf("POST with %s: %s: %d", h[0], h[1], r2.StatusCode)
		}
	}
	// Other methods are refused; the console never reaches the S3 write path.
	req, _ := http.NewRequest(http.MethodPut, s.URL+"/-/console/b/main", strings.NewReader("x"))
	r3, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r3.Body.Close()
	if r3.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %d", r3.StatusCode)
	}
}

func keys() []auth.Key {
	return []auth.Key{{AccessKey: goodAK, SecretKey: goodSK}, {AccessKey: otherAK, SecretKey: otherSK, Buckets: []string{"chain"}, Restore: auth.RestoreGrant{Deny: true}}}
}

// login fetches the form and posts it; it returns the response.
func (s *server) login(t testing.TB, c *http.Client, ak, sk string) (*http.Response, string) {
	t.Helper()
	resp, body := s.get(t, c, "/-/console/login")
	want(t, resp, body, 200, `id="login-form"`)
	m := regexp.MustCompile(`name="csrf" value="([^"]*)"`).FindStringSubmatch(body)
	return s.post(t, c, "/-/console/login", url.Values{"csrf": {m[1]}, "access_key": {ak}, "secret_key": {sk}})
}

func sessionCookie(resp *http.Response) *http.Cookie {
	for _, ck := range resp.Cookies() {
		if ck.Name == "wharf_console" && ck.MaxAge > 0 {
			return ck
		}
	}
	return nil
}

func TestLogin(t *testing.T) {
	s := newServer(t, opts{keys: keys()})
	c := s.client(t)
	resp, _ := s.get(t, c, "/-/console/")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/-/console/login" {
		t.Fatalf("no session: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body := s.get(t, c, "/-/console/b/main")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("browse without a session: %d %s", resp.StatusCode, body)
	}
	// Wrong secret: said so, no cookie.
	resp, body = s.login(t, c, goodAK, "wrong")
	want(t, resp, body, 403, "Wrong secret key")
	if sessionCookie(resp) != nil {
		t.Fatal("a failed login set a session cookie")
	}
	resp, body = s.login(t, c, "AKIANOBODY", "x")
	want(t, resp, body, 403, "Unknown access key")
	// No CSRF token: refused.
	resp, body = s.post(t, c, "/-/console/login", url.Values{"access_key": {goodAK}, "secret_key": {goodSK}})
	want(t, resp, body, 403, "expired")
	if sessionCookie(resp) != nil {
		t.Fatal("a login without a CSRF token set a cookie")
	}

	// The restricted key sees only its bucket.
	c2 := s.client(t)
	resp, _ = s.login(t, c2, otherAK, otherSK)
	ck := sessionCookie(resp)
	if resp.StatusCode != http.StatusSeeOther || ck == nil {
		t.Fatalf("good login: %d, cookie %v", resp.StatusCode, ck)
	}
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/-/console/" || ck.MaxAge <= 0 || ck.Secure {
		t.Errorf("cookie attributes %+v", ck)
	}
	if strings.Contains(ck.Value, otherSK) {
		t.Errorf("the cookie holds the secret")
	}
	resp, body = s.get(t, c2, "/-/console/")
	want(t, resp, body, 200, "/-/console/b/chain", otherAK)
	if strings.Contains(body, "/-/console/b/main") {
		t.Errorf("restricted key sees bucket main")
	}
	resp, body = s.get(t, c2, "/-/console/b/main")
	want(t, resp, body, 403)
	resp, body = s.get(t, c2, "/-/console/dl/main?key=README.md")
	want(t, resp, body, 403)
	// A tampered cookie is no session.
	tampered := &http.Client{CheckRedirect: c2.CheckRedirect}
	req, _ := http.NewRequest("GET", s.URL+"/-/console/", nil)
	req.AddCookie(&http.Cookie{Name: "wharf_console", Value: ck.Value[:len(ck.Value)-2] + "xx"})
	r3, _ := tampered.Do(req)
	r3.Body.Close()
	if r3.StatusCode != http.StatusSeeOther {
		t.Errorf("tampered cookie accepted: %d", r3.StatusCode)
	}

	// Logout needs the CSRF token, then invalidates the session.
	resp, body = s.post(t, c2, "/-/console/logout", url.Values{})
	want(t, resp, body, 403)
	_, body = s.get(t, c2, "/-/console/")
	csrf := regexp.MustCompile(`name="csrf" value="([^"]*)"`).FindStringSubmatch(body)[1]
	resp, _ = s.post(t, c2, "/-/console/logout", url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	req, _ = http.NewRequest("GET", s.URL+"/-/console/", nil)
	req.AddCookie(ck) // the old cookie, replayed
	r4, _ := tampered.Do(req)
	r4.Body.Close()
	if r4.StatusCode != http.StatusSeeOther {
		t.Errorf("session cookie still valid after logout: %d", r4.StatusCode)
	}
}

func TestLoginRateLimit(t *testing.T) {
	s := newServer(t, opts{keys: keys()})
	c := s.client(t)
	for i := 0; i < 3; i++ {
		resp, body := s.login(t, c, goodAK, "wrong")
		want(t, resp, body, 403)
	}
	resp, body := s.login(t, c, goodAK, goodSK)
	want(t, resp, body, 429, "Too many login attempts")
	if sessionCookie(resp) != nil {
		t.Fatal("a rate-limited login set a cookie")
	}
}

func TestShareLink(t *testing.T) {
	s := newServer(t, opts{keys: keys()})
	c := s.client(t)
	s.login(t, c, goodAK, goodSK)
	resp, body := s.get(t, c, fileURL("main", "data/vessels.csv")+"&share=3600")
	want(t, resp, body, 200, `id="share-url"`)
	m := regexp.MustCompile(`<pre id="share-url">([^<]*)</pre>`).FindStringSubmatch(body)
	link := strings.ReplaceAll(m[1], "&amp;", "&")
	r, err := http.Get(link) // no cookie: the link alone
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || !bytes.Equal(got, s.files["data/vessels.csv"]) || !strings.Contains(link, "X-Amz-Expires=3600") {
		t.Fatalf("share link %s: %d %q", link, r.StatusCode, got)
	}
	resp, body = s.get(t, c, fileURL("main", "data/vessels.csv")+"&share=604801")
	want(t, resp, body, 200, "A share link lasts 1 to 604800 seconds")
}

func TestRestoreButton(t *testing.T) {
	s := newServer(t, opts{keys: keys(), allowRestore: true})
	c := s.client(t)
	s.login(t, c, goodAK, goodSK)
	resp, body := s.get(t, c, fileURL("cold", "cold.bin"))
	want(t, resp, body, 200, `id="restore-button"`, "1 archived object, ")
	csrf := regexp.MustCompile(`name="csrf" value="([^"]*)"`).FindStringSubmatch(body)[1]
	// Without the token: refused, nothing sent.
	resp, body = s.post(t, c, "/-/console/restore/cold", url.Values{"key": {"cold.bin"}, "days": {"2"}, "tier": {"Standard"}})
	want(t, resp, body, 403)
	if len(s.g.Started()) != 0 {
		t.Fatal("a restore without a CSRF token started")
	}
	resp, body = s.post(t, c, "/-/console/restore/cold", url.Values{"csrf": {csrf}, "key": {"cold.bin"}, "days": {"2"}, "tier": {"Standard"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("restore: %d %s", resp.StatusCode, body)
	}
	if st := s.g.Started(); len(st) != 1 || !strings.HasSuffix(st[0], "cold.bin") {
		t.Fatalf("restores started: %v", st)
	}
	if !strings.Contains(s.logs.String(), `"op":"RestoreObject"`) || !strings.Contains(s.logs.String(), `"message":"restore"`) {
		t.Errorf("the restore did not go through the S3 handler's RestoreObject")
	}
	resp, body = s.get(t, c, resp.Header.Get("Location"))
	want(t, resp, body, 200, "Restore started.", "restore in progress")
	if strings.Contains(body, `id="restore-button"`) {
		t.Errorf("restore button still offered while restoring")
	}
	// The model finishes the restore: the file is readable.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !strings.Contains(body, "restored until"); {
		time.Sleep(100 * time.Millisecond)
		resp, body = s.get(t, c, fileURL("cold", "cold.bin"))
	}
	want(t, resp, body, 200, "restored until", `id="download"`)

	// A key whose grant denies restores gets no button, and a POST is refused.
	c2 := s.client(t)
	s.login(t, c2, otherAK, otherSK)
	_, body = s.get(t, c2, "/-/console/")
	csrf = regexp.MustCompile(`name="csrf" value="([^"]*)"`).FindStringSubmatch(body)[1]
	resp, body = s.post(t, c2, "/-/console/restore/chain", url.Values{"csrf": {csrf}, "key": {"notes.txt"}, "days": {"2"}, "tier": {"Standard"}})
	want(t, resp, body, 403)
}

func TestBucketsPageSummary(t *testing.T) {
	s := newServer(t, opts{anonymous: true})
	c := s.client(t)
	row := regexp.MustCompile(`(?s)<tr><td><a class="bucket" href="/-/console/b/cold">cold</a></td><td>archive</td>.*?</tr>`)
	var body string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, body = s.get(t, c, "/-/console/")
		if m := row.FindString(body); m != "" && !strings.Contains(m, "…") {
			break
		}
	}
	// cold.bin (20,000 bytes) is in GLACIER, warm.txt (5 bytes) is not.
	m := row.FindString(body)
	if !strings.Contains(m, "<td class=\"num\">2</td>") || !strings.Contains(m, "19.5 KiB") || !strings.Contains(m, "100.0%") && !strings.Contains(m, "99.9%") {
		t.Fatalf("cold bucket row: %s\n%s", m, body)
	}
	if !regexp.MustCompile(`href="/-/console/b/chain">chain</a></td><td>alias</td>`).MatchString(body) {
		t.Errorf("chain is not shown as an alias:\n%s", body)
	}
}

// TestDownloadNeverServesWrongBytes: with a silently flipped byte deep in
// the chunk, a download starts (its first frame is good) and is then
// aborted: the client sees a broken body, never a clean body with other
// bytes. With the flip in the first frame, the download is a clean error
// page and the preview says it could not be read.
func TestDownloadNeverServesWrongBytes(t *testing.T) {
	ctx := context.Background()
	big := make([]byte, 600<<10)
	rand.New(rand.NewSource(9)).Read(big)
	for _, tc := range []struct {
		name   string
		flipAt int64
	}{{"mid-stream", 400 << 10}, {"first frame", 1000}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			res := pack(t, dir, map[string][]byte{"big.bin": big}, cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1", FrameSize: 64 << 10, ContentHash: true})
			fs := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
				if r.Op == "range" && strings.Contains(r.Key, "chunk") {
					return faults.Fault{Kind: faults.FaultFlip, FlipAt: []int64{tc.flipAt}}
				}
				return faults.Fault{}
			}})
			a, err := archiveview.Open(ctx, fs, "src", res.ManifestKey, archiveview.Options{Name: "b"})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			v, _ := auth.New(auth.Config{Anonymous: true})
			cat := catalog.NewStatic(map[string]*archiveview.Archive{"b": a})
			srv := httptest.NewServer(s3api.New(s3api.Config{Catalog: cat, Verifier: v, Logger: zerolog.Nop(),
				Console: func(api http.Handler) http.Handler {
					return console.New(console.Config{Catalog: cat, Verifier: v, API: api, Logger: zerolog.Nop()})
				}}))
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/-/console/dl/b?key=big.bin")
			if err != nil {
				t.Fatal(err)
			}
			got, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && rerr == nil {
				t.Fatalf("a clean 200 of %d bytes (equal to the source: %v) from a corrupted chunk", len(got), bytes.Equal(got, big))
			}
			if resp.StatusCode == 200 && len(got) > 0 && !bytes.Equal(got, big[:len(got)]) {
				t.Fatalf("the aborted body's %d bytes differ from the source", len(got))
			}
			t.Logf("status %d, %d bytes, then %v", resp.StatusCode, len(got), rerr)
			if tc.flipAt < 64<<10 {
				if resp.StatusCode != 500 {
					t.Fatalf("flip in the first frame: status %d, want a clean 500", resp.StatusCode)
				}
				r2, _ := http.Get(srv.URL + "/-/console/f/b?key=big.bin")
				page, _ := io.ReadAll(r2.Body)
				r2.Body.Close()
				if !strings.Contains(string(page), "The preview could not be read") {
					t.Fatalf("preview of a corrupted first frame:\n%s", page)
				}
			}
		})
	}
}
