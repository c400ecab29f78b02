package s3api_test

import (
	"bytes"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestIfRange (issue 20, finding 14): RFC 9110 §13.1.5. A Range with an
// If-Range that still names the object (its strong ETag, or exactly its
// Last-Modified) gets the 206; a stale or weak validator, a date that is
// not exactly Last-Modified, or garbage gets the whole object, 200.
func TestIfRange(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	key := "dir/a.bin"
	whole := f.files[key]
	head, _ := f.do(t, "HEAD", objPath(testBucket, key), nil)
	etag, lm := head.Header.Get("ETag"), head.Header.Get("Last-Modified")
	mod, err := http.ParseTime(lm)
	if etag == "" || err != nil {
		t.Fatalf("HEAD: ETag %q Last-Modified %q (%v)", etag, lm, err)
	}
	bare := strings.Trim(etag, `"`)
	for _, tc := range []struct {
		name, ifRange string
		want          int
	}{
		{"no If-Range", "", 206},
		{"matching ETag", etag, 206},
		{"matching ETag, spaces", "  " + etag + " ", 206},
		{"stale ETag", `"0123456789abcdef0123456789abcdef"`, 200},
		{"weak form of the ETag", "W/" + etag, 200},
		{"unquoted ETag", bare, 200},
		{"ETag list", etag + `, "x"`, 200},
		{"matching date", lm, 206},
		{"matching date, RFC 850", mod.UTC().Format("Monday, 02-Jan-06 15:04:05 GMT"), 206},
		{"older date", mod.Add(-time.Second).UTC().Format(http.TimeFormat), 200},
		{"newer date", mod.Add(time.Hour).UTC().Format(http.TimeFormat), 200},
		{"garbage", "yesterday", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{"Range": "bytes=100-199"}
			if tc.ifRange != "" {
				hdr["If-Range"] = tc.ifRange
			}
			resp, body := f.do(t, "GET", objPath(testBucket, key), hdr)
			if resp.StatusCode != tc.want {
				t.Fatalf("If-Range %q: %d, want %d", tc.ifRange, resp.StatusCode, tc.want)
			}
			want := whole
			if tc.want == 206 {
				want = whole[100:200]
				if cr := resp.Header.Get("Content-Range"); cr != "bytes 100-199/"+strconv.Itoa(len(whole)) {
					t.Errorf("Content-Range %q", cr)
				}
			} else if cr := resp.Header.Get("Content-Range"); cr != "" {
				t.Errorf("a 200 with Content-Range %q", cr)
			}
			if !bytes.Equal(body, want) {
				t.Errorf("body: %d bytes, want %d (equal %v)", len(body), len(want), bytes.Equal(body, want))
			}
		})
	}
	// Two If-Range headers are no validator: the whole object.
	req, _ := http.NewRequest("GET", f.srv.URL+objPath(testBucket, key), nil)
	req.Header.Set("Range", "bytes=0-9")
	req.Header.Add("If-Range", etag)
	req.Header.Add("If-Range", etag)
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("two If-Range headers: %d, want 200", resp.StatusCode)
	}
}

// TestCacheControl (issue 20, finding 15): a fixed archive's objects are
// long-lived and immutable (GET, HEAD, 304 alike); an alias bucket, which
// follows the newest upload, says no-cache (revalidate every use); a
// ?versionId names a fixed version even in an alias bucket; a signed
// response-cache-control still overrides.
func TestCacheControl(t *testing.T) {
	files := map[string][]byte{"a.txt": []byte("alpha\n")}
	for _, tc := range []struct {
		name    string
		aliases []string
		want    string
	}{
		{"fixed archive", nil, "max-age=31536000, immutable"},
		{"another bucket is the alias", []string{"other"}, "max-age=31536000, immutable"},
		{"alias bucket", []string{testBucket}, "no-cache"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, files, fixtureOpts{anonymous: true, aliasBuckets: tc.aliases})
			for _, m := range []string{"GET", "HEAD"} {
				resp, _ := f.do(t, m, objPath(testBucket, "a.txt"), nil)
				if got := resp.Header.Get("Cache-Control"); resp.StatusCode != 200 || got != tc.want {
					t.Errorf("%s: %d Cache-Control %q, want %q", m, resp.StatusCode, got, tc.want)
				}
				etag := resp.Header.Get("ETag")
				resp, _ = f.do(t, m, objPath(testBucket, "a.txt"), map[string]string{"If-None-Match": etag})
				if got := resp.Header.Get("Cache-Control"); resp.StatusCode != 304 || got != tc.want {
					t.Errorf("%s If-None-Match: %d Cache-Control %q, want 304 %q", m, resp.StatusCode, got, tc.want)
				}
				vid := resp.Header.Get("x-amz-version-id")
				if vid == "" {
					head, _ := f.do(t, "HEAD", objPath(testBucket, "a.txt"), nil)
					vid = head.Header.Get("x-amz-version-id")
				}
				resp, _ = f.do(t, m, objPath(testBucket, "a.txt")+"?versionId="+url.QueryEscape(vid), nil)
				if got := resp.Header.Get("Cache-Control"); resp.StatusCode != 200 || got != "max-age=31536000, immutable" {
					t.Errorf("%s ?versionId=%s: %d Cache-Control %q, want the immutable one", m, vid, resp.StatusCode, got)
				}
			}
			// Errors are not cacheable objects: no Cache-Control.
			resp, _ := f.do(t, "GET", objPath(testBucket, "missing"), nil)
			if got := resp.Header.Get("Cache-Control"); resp.StatusCode != 404 || got != "" {
				t.Errorf("404: Cache-Control %q", got)
			}
		})
	}
}

// TestListV2EmptyContinuationToken (issue 20, finding 17, ceph/s3-tests):
// an empty continuation-token= lists from the start and is echoed as an
// empty ContinuationToken; without the parameter there is no element.
func TestListV2EmptyContinuationToken(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	resp, body := f.do(t, "GET", "/"+testBucket+"?list-type=2&continuation-token=", nil)
	mustStatus(t, resp, body, 200)
	if !bytes.Contains(body, []byte("<ContinuationToken></ContinuationToken>")) {
		t.Errorf("empty token not echoed:\n%s", body)
	}
	r := f.list(t, url.Values{"list-type": {"2"}, "continuation-token": {""}})
	all := f.list(t, url.Values{"list-type": {"2"}})
	if len(r.Contents) == 0 || len(r.Contents) != len(all.Contents) || r.Contents[0].Key != all.Contents[0].Key {
		t.Errorf("with an empty token: %d keys, want the first page's %d", len(r.Contents), len(all.Contents))
	}
	resp, body = f.do(t, "GET", "/"+testBucket+"?list-type=2", nil)
	mustStatus(t, resp, body, 200)
	if bytes.Contains(body, []byte("<ContinuationToken>")) {
		t.Errorf("ContinuationToken without the parameter:\n%s", body)
	}
}
