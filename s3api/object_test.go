package s3api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
)

// Checklist 14: listing, HEAD and GET agree on ETag, size, time and type,
// and GET returns exactly the source bytes.
func Test14HeadGetListingAgree(t *testing.T) {
	files := standardFiles()
	meta := func(rel string) map[string]string {
		if rel == "dir/sub/c.unknown" {
			return map[string]string{"magika_mime": "text/x-from-archive"}
		}
		return nil
	}
	f := newFixture(t, files, fixtureOpts{anonymous: true, metadata: meta})
	listed := map[string]int{}
	r := f.list(t, url.Values{"list-type": {"2"}})
	for i, c := range r.Contents {
		listed[c.Key] = i
	}
	wantType := map[string]string{
		"hello.txt":         "text/plain; charset=utf-8",
		"dir/sub/b.json":    "application/json",
		"dir/sub/c.unknown": "text/x-from-archive",
		"empty":             "application/octet-stream",
		"a+b":               "application/octet-stream",
	}
	for key, src := range files {
		i, ok := listed[key]
		if !ok {
			t.Errorf("%q not listed", key)
			continue
		}
		lc := r.Contents[i]
		head, hb := f.do(t, "HEAD", objPath("bkt", key), nil)
		mustStatus(t, head, hb, 200)
		get, body := f.do(t, "GET", objPath("bkt", key), nil)
		mustStatus(t, get, body, 200)
		if !bytes.Equal(body, src) {
			t.Errorf("%q: GET body differs from source (%d vs %d bytes)", key, len(body), len(src))
		}
		lm, err := time.Parse("2006-01-02T15:04:05.000Z", lc.LastModified)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range []string{"ETag", "Last-Modified", "Content-Length", "Content-Type", "Accept-Ranges", "x-amz-meta-mtime"} {
			if head.Header.Get(h) != get.Header.Get(h) || head.Header.Get(h) == "" {
				t.Errorf("%q: %s HEAD %q GET %q", key, h, head.Header.Get(h), get.Header.Get(h))
			}
		}
		if head.Header.Get("ETag") != lc.ETag {
			t.Errorf("%q: ETag HEAD %q listing %q", key, head.Header.Get("ETag"), lc.ETag)
		}
		if head.Header.Get("Content-Length") != strconv.Itoa(len(src)) || lc.Size != int64(len(src)) {
			t.Errorf("%q: size HEAD %s listing %d source %d", key, head.Header.Get("Content-Length"), lc.Size, len(src))
		}
		if got := head.Header.Get("Last-Modified"); got != lm.Format(http.TimeFormat) || got != testMTime.Truncate(time.Second).Format(http.TimeFormat) {
			t.Errorf("%q: Last-Modified %q, listing %q", key, got, lc.LastModified)
		}
		if head.Header.Get("Accept-Ranges") != "bytes" {
			t.Errorf("%q: Accept-Ranges %q", key, head.Header.Get("Accept-Ranges"))
		}
		if want, ok := wantType[key]; ok && head.Header.Get("Content-Type") != want {
			t.Errorf("%q: Content-Type %q, want %q", key, head.Header.Get("Content-Type"), want)
		}
		if head.Header.Get("x-amz-meta-mtime") != "1709528767.123456789" {
			t.Errorf("%q: x-amz-meta-mtime %q", key, head.Header.Get("x-amz-meta-mtime"))
		}
	}
}

// Checklist 15: If-Match with the listing ETag (quoted or not) on a ranged GET.
func Test15IfMatchRanged(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	src := f.files["dir/a.bin"]
	r := f.list(t, url.Values{"list-type": {"2"}, "prefix": {"dir/a.bin"}})
	etag := r.Contents[0].ETag
	for _, im := range []string{etag, strings.Trim(etag, `"`), `W/` + etag, `"other", ` + etag} {
		resp, body := f.do(t, "GET", "/bkt/dir/a.bin", map[string]string{"Range": "bytes=70000-140000", "If-Match": im})
		mustStatus(t, resp, body, 206)
		if !bytes.Equal(body, src[70000:140001]) {
			t.Fatalf("If-Match %q: wrong bytes", im)
		}
	}
	resp, body := f.do(t, "GET", "/bkt/dir/a.bin", map[string]string{"Range": "bytes=0-9", "If-Match": `"deadbeef"`})
	wantError(t, resp, body, 412, "PreconditionFailed")
	resp, body = f.do(t, "HEAD", "/bkt/dir/a.bin", map[string]string{"If-Match": `"deadbeef"`})
	wantError(t, resp, body, 412, "")
}

// Checklist 16: 304 and 412 with AWS precedence.
func Test16Conditionals(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	head, _ := f.do(t, "HEAD", "/bkt/hello.txt", nil)
	etag, lm := head.Header.Get("ETag"), head.Header.Get("Last-Modified")
	lmt, _ := http.ParseTime(lm)
	earlier := lmt.Add(-time.Second).Format(http.TimeFormat)
	later := lmt.Add(time.Hour).Format(http.TimeFormat)
	for _, tc := range []struct {
		name   string
		hdr    map[string]string
		status int
	}{
		{"INM match", map[string]string{"If-None-Match": etag}, 304},
		{"INM star", map[string]string{"If-None-Match": "*"}, 304},
		{"INM other", map[string]string{"If-None-Match": `"x"`}, 200},
		{"IMS equal", map[string]string{"If-Modified-Since": lm}, 304},
		{"IMS later", map[string]string{"If-Modified-Since": later}, 304},
		{"IMS earlier", map[string]string{"If-Modified-Since": earlier}, 200},
		{"IUS earlier", map[string]string{"If-Unmodified-Since": earlier}, 412},
		{"IUS equal", map[string]string{"If-Unmodified-Since": lm}, 200},
		{"IM true + IUS false → 200", map[string]string{"If-Match": etag, "If-Unmodified-Since": earlier}, 200},
		{"INM false + IMS true → 304", map[string]string{"If-None-Match": etag, "If-Modified-Since": earlier}, 304},
		{"IM false + INM → 412", map[string]string{"If-Match": `"x"`, "If-None-Match": etag}, 412},
		{"IM true + range", map[string]string{"If-Match": etag, "Range": "bytes=0-4"}, 206},
		{"INM match + range → 304", map[string]string{"If-None-Match": etag, "Range": "bytes=0-4"}, 304},
	} {
		for _, m := range []string{"GET", "HEAD"} {
			resp, body := f.do(t, m, "/bkt/hello.txt", tc.hdr)
			if resp.StatusCode != tc.status {
				t.Errorf("%s %s: status %d, want %d", m, tc.name, resp.StatusCode, tc.status)
				continue
			}
			switch tc.status {
			case 304:
				if len(body) != 0 || resp.Header.Get("ETag") != etag || resp.Header.Get("Last-Modified") != lm {
					t.Errorf("%s %s: 304 body %q ETag %q LM %q", m, tc.name, body, resp.Header.Get("ETag"), resp.Header.Get("Last-Modified"))
				}
			case 412:
				wantError(t, resp, body, 412, "PreconditionFailed")
			}
		}
	}
}

// Checklist 17-21: the range table, byte-exact, on GET and HEAD.
func Test17to21Ranges(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	for _, key := range []string{"hello.txt", "dir/a.bin", "big.bin"} {
		src := f.files[key]
		n := int64(len(src))
		type rc struct {
			h            string
			status       int
			start, end   int64 // inclusive, for 206
			contentRange string
		}
		cases := []rc{
			{fmtRange(0, 0), 206, 0, 0, ""},
			{fmtRange(n-1, n-1), 206, n - 1, n - 1, ""},
			{fmtRange(1, 5), 206, 1, 5, ""},
			{fmtRange(0, n-1), 206, 0, n - 1, ""},
			{fmtRange(3, n+100), 206, 3, n - 1, ""},
			{fmt.Sprintf("bytes=%d-", n/2), 206, n / 2, n - 1, ""},
			{"bytes=-7", 206, n - 7, n - 1, ""},
			{fmt.Sprintf("bytes=-%d", n+10), 206, 0, n - 1, ""},
			{fmt.Sprintf("bytes=%d-", n), 416, 0, 0, fmt.Sprintf("bytes */%d", n)},
			{fmt.Sprintf("bytes=%d-%d", n+5, n+9), 416, 0, 0, fmt.Sprintf("bytes */%d", n)},
			{"bytes=0-1,4-5", 200, 0, n - 1, ""},
			{"bytes=5-1", 200, 0, n - 1, ""},
			{"bytes=x-y", 200, 0, n - 1, ""},
			{"lines=1-2", 200, 0, n - 1, ""},
		}
		if n > 200000 {
			// Across frame boundaries (64 KiB frames).
			cases = append(cases, rc{fmtRange(65535, 65536*2), 206, 65535, 65536 * 2, ""}, rc{fmtRange(100000, 199999), 206, 100000, 199999, ""})
		}
		for _, tc := range cases {
			for _, m := range []string{"GET", "HEAD"} {
				resp, body := f.do(t, m, objPath("bkt", key), map[string]string{"Range": tc.h})
				if resp.StatusCode != tc.status {
					t.Fatalf("%s %s %s: status %d, want %d", m, key, tc.h, resp.StatusCode, tc.status)
				}
				switch tc.status {
				case 206:
					wantCR := fmt.Sprintf("bytes %d-%d/%d", tc.start, tc.end, n)
					if resp.Header.Get("Content-Range") != wantCR {
						t.Errorf("%s %s %s: Content-Range %q, want %q", m, key, tc.h, resp.Header.Get("Content-Range"), wantCR)
					}
					if resp.Header.Get("Content-Length") != strconv.FormatInt(tc.end-tc.start+1, 10) {
						t.Errorf("%s %s %s: Content-Length %q", m, key, tc.h, resp.Header.Get("Content-Length"))
					}
					if m == "GET" && !bytes.Equal(body, src[tc.start:tc.end+1]) {
						t.Errorf("%s %s: wrong bytes", key, tc.h)
					}
					if m == "HEAD" && len(body) != 0 {
						t.Errorf("HEAD with body")
					}
				case 200:
					if resp.Header.Get("Content-Range") != "" {
						t.Errorf("%s %s %s: 200 with Content-Range", m, key, tc.h)
					}
					if m == "GET" && !bytes.Equal(body, src) {
						t.Errorf("%s %s: full body differs", key, tc.h)
					}
				case 416:
					if m == "GET" {
						wantError(t, resp, body, 416, "InvalidRange")
					}
					if resp.Header.Get("Content-Range") != tc.contentRange {
						t.Errorf("%s %s %s: 416 Content-Range %q", m, key, tc.h, resp.Header.Get("Content-Range"))
					}
				}
			}
		}
	}
	// Any range on an empty object is 416 with bytes */0.
	for _, h := range []string{"bytes=0-0", "bytes=0-", "bytes=-1"} {
		resp, body := f.do(t, "GET", "/bkt/empty", map[string]string{"Range": h})
		wantError(t, resp, body, 416, "InvalidRange")
		if resp.Header.Get("Content-Range") != "bytes */0" {
			t.Errorf("empty %s: Content-Range %q", h, resp.Header.Get("Content-Range"))
		}
	}
	resp, body := f.do(t, "GET", "/bkt/empty", nil)
	mustStatus(t, resp, body, 200)
	if len(body) != 0 || resp.Header.Get("Content-Length") != "0" {
		t.Errorf("empty object: %d bytes, Content-Length %q", len(body), resp.Header.Get("Content-Length"))
	}
}

// Checklist 22: partNumber.
func Test22PartNumber(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	src := f.files["dir/a.bin"]
	for _, m := range []string{"GET", "HEAD"} {
		resp, body := f.do(t, m, "/bkt/dir/a.bin?partNumber=1", nil)
		mustStatus(t, resp, body, 206)
		if want := fmt.Sprintf("bytes 0-%d/%d", len(src)-1, len(src)); resp.Header.Get("Content-Range") != want {
			t.Errorf("Content-Range %q, want %q", resp.Header.Get("Content-Range"), want)
		}
		if m == "GET" && !bytes.Equal(body, src) {
			t.Error("partNumber=1 body differs")
		}
	}
	resp, body := f.do(t, "GET", "/bkt/dir/a.bin?partNumber=2", nil)
	wantError(t, resp, body, 416, "InvalidPartNumber")
	resp, body = f.do(t, "GET", "/bkt/dir/a.bin?partNumber=0", nil)
	wantError(t, resp, body, 400, "InvalidArgument")
	resp, body = f.do(t, "GET", "/bkt/dir/a.bin?partNumber=1", map[string]string{"Range": "bytes=0-1"})
	wantError(t, resp, body, 400, "InvalidRequest")
}

// Checklist 23: response-* overrides, on a signed (here presigned) GET.
// Unsigned, they are refused as on S3 (issue 12 §3): with --anonymous an
// outsider could otherwise have any archived file served as text/html.
func Test23ResponseOverrides(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	ps := s3.NewPresignClient(newSDKClient(t, f.srv.URL, testAK, testSK))
	pr, err := ps.PresignGetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("hello.txt"),
		ResponseContentType:        aws.String("text/csv"),
		ResponseContentDisposition: aws.String(`attachment; filename="x.csv"`),
		ResponseCacheControl:       aws.String("no-store"),
		ResponseExpires:            aws.Time(time.Date(1994, 12, 1, 16, 0, 0, 0, time.UTC)),
		ResponseContentLanguage:    aws.String("de"),
		ResponseContentEncoding:    aws.String("identity"),
	})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(pr.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := f.do(t, "GET", u.RequestURI(), nil)
	mustStatus(t, resp, body, 200)
	for h, v := range map[string]string{
		"Content-Type": "text/csv", "Content-Disposition": `attachment; filename="x.csv"`,
		"Cache-Control": "no-store", "Expires": "Thu, 01 Dec 1994 16:00:00 GMT",
		"Content-Language": "de", "Content-Encoding": "identity",
	} {
		if resp.Header.Get(h) != v {
			t.Errorf("%s = %q, want %q", h, resp.Header.Get(h), v)
		}
	}
	if string(body) != "hello world\n" {
		t.Errorf("body %q", body)
	}

	// Unsigned: each override alone, also empty, also on HEAD and on a
	// missing key, is 400 InvalidRequest with S3's message.
	for _, name := range []string{"response-content-type", "response-content-disposition", "response-cache-control",
		"response-expires", "response-content-language", "response-content-encoding"} {
		for _, m := range []string{"GET", "HEAD"} {
			for _, p := range []string{"/bkt/hello.txt?" + name + "=text%2Fhtml", "/bkt/hello.txt?" + name + "=", "/bkt/nope?" + name + "=x"} {
				resp, body := f.do(t, m, p, nil)
				e := wantError(t, resp, body, 400, "InvalidRequest")
				if m == "GET" && e.Message != "Request specific response headers cannot be used for anonymous GET requests." {
					t.Errorf("%s %s: message %q", m, p, e.Message)
				}
				if resp.Header.Get("Content-Type") == "text/html" {
					t.Errorf("%s %s: served as text/html", m, p)
				}
			}
		}
	}
	resp, body = f.do(t, "GET", "/bkt/hello.txt", nil)
	mustStatus(t, resp, body, 200)
	if resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || string(body) != "hello world\n" {
		t.Errorf("unsigned GET without overrides: %q %q", resp.Header.Get("Content-Type"), body)
	}
}

// Checklist 24: x-amz-checksum-sha256 only on full-object 200s with
// checksum mode enabled.
func Test24ChecksumMode(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	src := f.files["dir/a.bin"]
	sum := sha256.Sum256(src)
	want := base64.StdEncoding.EncodeToString(sum[:])
	on := map[string]string{"x-amz-checksum-mode": "ENABLED"}
	for _, m := range []string{"GET", "HEAD"} {
		resp, body := f.do(t, m, "/bkt/dir/a.bin", on)
		mustStatus(t, resp, body, 200)
		if got := resp.Header.Get("x-amz-checksum-sha256"); got != want {
			t.Errorf("%s checksum %q, want %q", m, got, want)
		}
	}
	resp, _ := f.do(t, "GET", "/bkt/dir/a.bin", nil)
	if resp.Header.Get("x-amz-checksum-sha256") != "" {
		t.Error("checksum without checksum mode")
	}
	for _, extra := range []map[string]string{{"Range": "bytes=0-9"}, {"Range": "bytes=0-"}} {
		hdr := map[string]string{"x-amz-checksum-mode": "ENABLED"}
		for k, v := range extra {
			hdr[k] = v
		}
		resp, body := f.do(t, "GET", "/bkt/dir/a.bin", hdr)
		mustStatus(t, resp, body, 206)
		for k := range resp.Header {
			if strings.HasPrefix(strings.ToLower(k), "x-amz-checksum-") {
				t.Errorf("206 carries %s", k)
			}
		}
	}
	resp, _ = f.do(t, "GET", "/bkt/dir/a.bin?partNumber=1", on)
	if resp.Header.Get("x-amz-checksum-sha256") != "" {
		t.Error("partNumber 206 carries a checksum")
	}
}

// Nothing wrong is ever served: a corrupted frame before the first byte is a
// 500 naming the key; a corrupted frame after the headers aborts the body so
// the client sees an error, never a clean short or wrong body.
func TestCorruptChunkNeverServed(t *testing.T) {
	files := standardFiles()
	a, _, dir := openArchiveDir(t, files, fixtureOpts{})
	_ = a
	// Corrupt one byte in the middle of every chunk object.
	var chunks []string
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && (strings.HasSuffix(p, ".tar.zst") || strings.HasSuffix(p, ".tar")) {
			chunks = append(chunks, p)
		}
		return nil
	})
	if len(chunks) == 0 {
		t.Fatal("no chunk objects written")
	}
	f := newFixtureFromArchive(t, a, fixtureOpts{anonymous: true})
	f.files = files
	for _, p := range chunks {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xFF
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src := files["big.bin"]
	// Whole-object GET: the damaged frame is in the middle of big.bin.
	req, _ := http.NewRequest("GET", f.srv.URL+"/bkt/big.bin", nil)
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("whole GET of the damaged object: status %d, %d bytes, read error %v", resp.StatusCode, len(body), rerr)
	switch {
	case resp.StatusCode == 200 && rerr == nil:
		t.Fatalf("corrupt object served cleanly (%d bytes, equal=%v)", len(body), bytes.Equal(body, src))
	case resp.StatusCode == 200:
		if !bytes.Equal(body, src[:len(body)]) {
			t.Fatal("wrong bytes delivered before the abort")
		}
	default:
		wantError(t, resp, body, 500, "InternalError")
	}
	// A range starting at the damage: a clean 500 naming the key.
	mid := int64(len(src) / 2)
	var got500 bool
	for off := int64(0); off < int64(len(src)); off += 32 << 10 {
		resp, body := f.do(t, "GET", "/bkt/big.bin", map[string]string{"Range": fmtRange(off, off+1000)})
		if resp.StatusCode == 206 {
			if !bytes.Equal(body, src[off:off+1001]) {
				t.Fatalf("wrong bytes at %d", off)
			}
			continue
		}
		e := wantError(t, resp, body, 500, "InternalError")
		if e.Key != "big.bin" || e.BucketName != "bkt" {
			t.Fatalf("500 names key %q bucket %q", e.Key, e.BucketName)
		}
		got500 = true
	}
	_ = mid
	if !got500 {
		t.Fatal("no ranged read hit the corrupted frame")
	}
	if !strings.Contains(f.logs.String(), "big.bin") {
		t.Error("error log does not name the key")
	}
}

// Checklist 36 (first half): a client that goes away mid-body ends the
// handler (the request context reaches the archive read).
func Test36ClientDisconnect(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	req, _ := http.NewRequest("GET", f.srv.URL+"/bkt/big.bin", nil)
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1000)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // abandons the rest of 6 MiB
	f.srv.CloseClientConnections()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(f.logs.String(), `"aborted":true`) {
		if time.Now().After(deadline) {
			t.Fatalf("handler did not end after the client left; logs:\n%s", f.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Checklist 36 (second half): 100 parallel ranged GETs stream; memory stays
// far below what buffering the responses would take.
func Test36ParallelRangedGetsBoundedMemory(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	src := f.files["big.bin"]
	const clients = 100
	const span = 1 << 20
	var stop = make(chan struct{})
	peak := make(chan uint64, 1)
	go func() {
		var max uint64
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				peak <- max
				return
			case <-time.After(5 * time.Millisecond):
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > max {
					max = ms.HeapInuse
				}
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			off := int64(i) * 61331 % int64(len(src)-span)
			req, _ := http.NewRequest("GET", f.srv.URL+"/bkt/big.bin", nil)
			req.Header.Set("Range", fmtRange(off, off+span-1))
			resp, err := f.srv.Client().Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			h := sha256.New()
			if _, err := io.Copy(h, resp.Body); err != nil {
				errs <- err
				return
			}
			want := sha256.Sum256(src[off : off+span])
			if resp.StatusCode != 206 || !bytes.Equal(h.Sum(nil), want[:]) {
				errs <- fmt.Errorf("range at %d: status %d, bytes differ", off, resp.StatusCode)
			}
		}(i)
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	p := <-peak
	t.Logf("peak heap in use during %d parallel 1 MiB ranged GETs: %d MiB", clients, p>>20)
	// Buffering would need >= 100 MiB for the bodies alone.
	if p > 96<<20 {
		t.Errorf("peak heap %d MiB: responses are being buffered", p>>20)
	}
}

// A Range sent on several header lines is a list of ranges, which S3
// answers with the whole object (200, no Content-Range), as it answers
// "bytes=a-b,c-d"; the first line alone is never served. Same on HEAD, and
// a repeated If-Modified-Since is ignored (RFC 9110 §13.1.3) in either order.
func TestRepeatedRangeAndDateLines(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	src := f.files["hello.txt"]
	head, _ := f.do(t, "HEAD", "/bkt/hello.txt", nil)
	lmt, _ := http.ParseTime(head.Header.Get("Last-Modified"))
	earlier := lmt.Add(-time.Hour).Format(http.TimeFormat)
	later := lmt.Add(time.Hour).Format(http.TimeFormat)
	send := func(method string, h http.Header) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, f.srv.URL+"/bkt/hello.txt", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	for _, tc := range []struct {
		name string
		h    http.Header
	}{
		{"two ranges", http.Header{"Range": {"bytes=0-4", "bytes=6-9"}}},
		{"the same range twice", http.Header{"Range": {"bytes=0-4", "bytes=0-4"}}},
		{"a range and an unsatisfiable one", http.Header{"Range": {"bytes=0-4", "bytes=100000-"}}},
		{"if-modified-since later first", http.Header{"If-Modified-Since": {later, earlier}}},
		{"if-modified-since later second", http.Header{"If-Modified-Since": {earlier, later}}},
	} {
		for _, m := range []string{"GET", "HEAD"} {
			resp, body := send(m, tc.h)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Range") != "" {
				t.Errorf("%s %s: status %d, Content-Range %q; want 200 and none", m, tc.name, resp.StatusCode, resp.Header.Get("Content-Range"))
				continue
			}
			if resp.Header.Get("Content-Length") != strconv.Itoa(len(src)) {
				t.Errorf("%s %s: Content-Length %q, want %d", m, tc.name, resp.Header.Get("Content-Length"), len(src))
			}
			if m == "GET" && !bytes.Equal(body, src) {
				t.Errorf("%s %s: body differs from the object", m, tc.name)
			}
		}
	}
	// Blank lines are absent: a Range with a blank second line is one range.
	resp, body := send("GET", http.Header{"Range": {"bytes=0-4", ""}})
	if resp.StatusCode != 206 || !bytes.Equal(body, src[:5]) {
		t.Errorf("a range and a blank line: status %d, %d bytes; want 206 and the first 5", resp.StatusCode, len(body))
	}
}

// TestMtimeHeaderBefore1970: x-amz-meta-mtime is the file's time in
// seconds with nine decimals (what rclone reads), also for a time before
// 1970: -4.75 s is "-4.750000000", not Unix() and Nanosecond() glued
// together ("-5.250000000", a quarter second plus half a second off).
func TestMtimeHeaderBefore1970(t *testing.T) {
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{time.Unix(-5, 250000000), "-4.750000000"},
		{time.Unix(-1, 999999999), "-0.000000001"},
		{time.Unix(-7, 0), "-7.000000000"},
		{time.Unix(1709528767, 123456789), "1709528767.123456789"},
	} {
		dir := t.TempDir()
		res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(map[string][]byte{"old.txt": []byte("x")}, tc.at),
			cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1", FrameSize: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		a, err := archiveview.Open(context.Background(), backend.NewFileStore(dir), "src", res.ManifestKey, archiveview.Options{Name: testBucket})
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := a.Stat("old.txt"); !ok || !f.ModTime.Equal(tc.at) {
			t.Fatalf("%v: the archive keeps %v", tc.at, f.ModTime)
		}
		f := newFixtureFromArchive(t, a, fixtureOpts{anonymous: true})
		resp, _ := f.do(t, "HEAD", "/bkt/old.txt", nil)
		if got := resp.Header.Get("x-amz-meta-mtime"); got != tc.want {
			t.Errorf("%v: x-amz-meta-mtime %q, want %q", tc.at, got, tc.want)
		}
	}
}
