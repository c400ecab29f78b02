package s3api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/s3api"
)

func TestParseCORSOrigin(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want "" = an error
	}{
		{"*", "*"},
		{"https://viewer.example.org", "https://viewer.example.org"},
		{"HTTPS://Viewer.Example.ORG", "https://viewer.example.org"},
		{"http://localhost:8080", "http://localhost:8080"},
		{"http://127.0.0.1:5173", "http://127.0.0.1:5173"},
		{"https://a.example:443", "https://a.example"},
		{"http://a.example:80", "http://a.example"},
		{"http://a.example:443", "http://a.example:443"},
		{"https://a.example:80", "https://a.example:80"},
		{"http://[::1]:8000", "http://[::1]:8000"},
		{"http://[2001:DB8::1]", "http://[2001:db8::1]"},
		{"https://xn--bcher-kva.example", "https://xn--bcher-kva.example"},
		{"", ""},
		{"null", ""},
		{"viewer.example.org", ""},
		{"//viewer.example.org", ""},
		{"ftp://viewer.example.org", ""},
		{"file:///tmp/x.html", ""},
		{"https://", ""},
		{"https://viewer.example.org/", ""},
		{"https://viewer.example.org/app", ""},
		{"https://viewer.example.org?x=1", ""},
		{"https://viewer.example.org#frag", ""},
		{"https://user@viewer.example.org", ""},
		{"https://viewer.example.org:", ""},
		{"https://viewer.example.org:0", ""},
		{"https://viewer.example.org:65536", ""},
		{"https://viewer.example.org:08080", ""},
		{"https://viewer.example.org:+80", ""},
		{"https://viewer.example.org:80x", ""},
		{"https://viewer.example.org junk", ""},
		{" https://viewer.example.org", ""},
		{"https://*.example.org", ""},
		{"https://a..example", ""},
		{"https://-a.example", ""},
		{"https://bücher.example", ""},
		{"http://[::1", ""},
		{"http://[::1]x", ""},
		{"http://[::1]:", ""},
		{"http://[zz::1]", ""},
		{"http://[1.2.3.4]", ""},
		{"**", ""},
	} {
		got, err := s3api.ParseCORSOrigin(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("ParseCORSOrigin(%q) = %q, want an error", tc.in, got)
			} else if !strings.Contains(err.Error(), "\""+tc.in+"\"") && tc.in != "" {
				t.Errorf("ParseCORSOrigin(%q): error %q does not name the value", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseCORSOrigin(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// FuzzParseCORSOrigin: never panics, and an accepted origin is returned in
// its final form (parsing it again gives the same string).
func FuzzParseCORSOrigin(f *testing.F) {
	for _, s := range []string{"*", "https://a.example:443", "http://[::1]:80", "HTTP://X", "https://a.example/", "http://a:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := s3api.ParseCORSOrigin(s)
		if err != nil {
			return
		}
		again, err := s3api.ParseCORSOrigin(o)
		if err != nil || again != o {
			t.Fatalf("ParseCORSOrigin(%q) = %q, which parses to %q, %v", s, o, again, err)
		}
	})
}

// TestCORSRulesDecide checks the rule evaluation alone: origin, method and
// requested headers, the first matching rule, exact origins over "*".
func TestCORSRulesDecide(t *testing.T) {
	rules := s3api.CORSRules{
		{AllowedOrigins: []string{"https://app.example"}, AllowedMethods: []string{"GET"}, AllowedHeaders: []string{"range", "x-amz-*"},
			ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: 60},
		{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET", "HEAD"}, AllowedHeaders: []string{"*"}},
	}
	for _, tc := range []struct {
		name, origin, method string
		headers              []string
		wantOrigin, wantCred string // "" = refused
		wantMaxAge           string
	}{
		{"listed origin", "https://app.example", "GET", []string{"Range", "X-Amz-Date"}, "https://app.example", "true", "60"},
		{"listed origin, header of no first-rule pattern falls to *", "https://app.example", "GET", []string{"x-custom"}, "*", "", ""},
		{"listed origin, method of the second rule", "https://app.example", "HEAD", nil, "*", "", ""},
		{"other origin through *", "https://other.example", "GET", []string{"authorization"}, "*", "", ""},
		{"method no rule allows", "https://app.example", "PUT", nil, "", "", ""},
		{"no method", "https://app.example", "", nil, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, enabled := rules.Preflight("b", tc.origin, tc.method, tc.headers)
			if !enabled {
				t.Fatal("rules reported as not enabled")
			}
			if tc.wantOrigin == "" {
				if h != nil {
					t.Fatalf("preflight allowed: %v", h)
				}
				return
			}
			if h == nil {
				t.Fatal("preflight refused")
			}
			if h.Get("Access-Control-Allow-Origin") != tc.wantOrigin || h.Get("Access-Control-Allow-Credentials") != tc.wantCred ||
				h.Get("Access-Control-Max-Age") != tc.wantMaxAge {
				t.Errorf("preflight headers %v", h)
			}
			if len(tc.headers) > 0 {
				want := strings.ToLower(strings.Join(tc.headers, ", "))
				if got := h.Get("Access-Control-Allow-Headers"); got != want {
					t.Errorf("Allow-Headers %q, want %q", got, want)
				}
			} else if _, ok := h["Access-Control-Allow-Headers"]; ok {
				t.Errorf("Allow-Headers without requested headers: %v", h)
			}
		})
	}
	if h := rules.Actual("b", "https://app.example", "GET"); h.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		h.Get("Access-Control-Expose-Headers") != "ETag" || h.Get("Vary") != "Origin" {
		t.Errorf("actual from a listed origin: %v", h)
	}
	if h := rules.Actual("b", "https://x.example", "HEAD"); h.Get("Access-Control-Allow-Origin") != "*" || h.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("actual through *: %v", h)
	}
	if h := rules.Actual("b", "https://app.example", "DELETE"); h != nil {
		t.Errorf("actual DELETE: %v", h)
	}
	if h, enabled := (s3api.CORSRules{}).Preflight("b", "https://a", "GET", nil); enabled || h != nil {
		t.Errorf("empty rules: %v %v", h, enabled)
	}
}

// TestCORSServed: the read-only rule behind the handler, through raw
// requests (what a browser sends) and GetBucketCors through the SDK.
func TestCORSServed(t *testing.T) {
	const app = "https://app.example"
	rule := s3api.ReadOnlyCORSRule([]string{app}, 600)
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true, cors: s3api.CORSRules{rule}})
	expose := strings.Join(rule.ExposeHeaders, ", ")

	// Preflight from the allowed origin, for a signed ranged read.
	resp, body := f.do(t, "OPTIONS", "/bkt/dir/a.bin", map[string]string{"Origin": app, "Access-Control-Request-Method": "GET",
		"Access-Control-Request-Headers": "authorization,range,x-amz-date,x-amz-content-sha256,if-match,amz-sdk-request"})
	mustStatus(t, resp, body, 200)
	for k, want := range map[string]string{
		"Access-Control-Allow-Origin":      app,
		"Access-Control-Allow-Credentials": "true",
		"Access-Control-Allow-Methods":     "GET, HEAD",
		"Access-Control-Allow-Headers":     "authorization, range, x-amz-date, x-amz-content-sha256, if-match, amz-sdk-request",
		"Access-Control-Max-Age":           "600",
		"Access-Control-Expose-Headers":    expose,
		"Vary":                             "Origin, Access-Control-Request-Headers, Access-Control-Request-Method",
		"Content-Length":                   "0",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("allowed preflight: %s = %q, want %q", k, got, want)
		}
	}
	// Refused preflights: another origin, a write method, a header no
	// pattern allows. None carries a CORS header.
	for name, hdr := range map[string]map[string]string{
		"other origin": {"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"},
		"PUT":          {"Origin": app, "Access-Control-Request-Method": "PUT"},
		"odd header":   {"Origin": app, "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "range, x-evil"},
		"no method":    {"Origin": app},
	} {
		resp, body := f.do(t, "OPTIONS", "/bkt/hello.txt", hdr)
		wantError(t, resp, body, 403, "AccessForbidden")
		if v := resp.Header.Get("Access-Control-Allow-Origin"); v != "" {
			t.Errorf("refused preflight (%s) carries Access-Control-Allow-Origin %q", name, v)
		}
	}

	// Actual requests from the allowed origin: success, ranged, 304, and
	// errors all carry the CORS headers.
	for _, tc := range []struct {
		method, path string
		hdr          map[string]string
		status       int
	}{
		{"GET", "/bkt/hello.txt", nil, 200},
		{"HEAD", "/bkt/hello.txt", nil, 200},
		{"GET", "/bkt/dir/a.bin", map[string]string{"Range": "bytes=10-19"}, 206},
		{"GET", "/bkt?list-type=2", nil, 200},
		{"GET", "/", nil, 200},
		{"GET", "/bkt/nope", nil, 404},
		{"GET", "/nobucket/x", nil, 404},
		{"GET", "/bkt/hello.txt", map[string]string{"If-None-Match": "*"}, 304},
		{"GET", "/bkt/hello.txt", map[string]string{"Authorization": "AWS4-HMAC-SHA256 Credential=nope"}, 400},
	} {
		hdr := map[string]string{"Origin": app}
		for k, v := range tc.hdr {
			hdr[k] = v
		}
		resp, body := f.do(t, tc.method, tc.path, hdr)
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d: %s", tc.method, tc.path, resp.StatusCode, tc.status, body)
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != app || resp.Header.Get("Access-Control-Allow-Credentials") != "true" ||
			resp.Header.Get("Access-Control-Expose-Headers") != expose || resp.Header.Get("Vary") != "Origin" {
			t.Errorf("%s %s from %s (%d): CORS headers %v", tc.method, tc.path, app, resp.StatusCode, resp.Header)
		}
		if tc.status == 206 && resp.Header.Get("Content-Range") == "" {
			t.Errorf("ranged GET: no Content-Range")
		}
	}
	// A disallowed origin, no origin, and a write from the allowed origin:
	// no CORS headers, but Vary: Origin (the answer depends on it).
	for _, tc := range []struct {
		method string
		hdr    map[string]string
		status int
	}{
		{"GET", map[string]string{"Origin": "https://evil.example"}, 200},
		{"GET", nil, 200},
		{"PUT", map[string]string{"Origin": app}, 403},
	} {
		resp, body := f.do(t, tc.method, "/bkt/hello.txt", tc.hdr)
		if resp.StatusCode != tc.status {
			t.Errorf("%s %v: status %d: %s", tc.method, tc.hdr, resp.StatusCode, body)
		}
		for k := range resp.Header {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("%s %v: CORS header %s: %q", tc.method, tc.hdr, k, resp.Header.Get(k))
			}
		}
		if resp.Header.Get("Vary") != "Origin" {
			t.Errorf("%s %v: Vary %q", tc.method, tc.hdr, resp.Header.Get("Vary"))
		}
	}

	// GET ?cors through the SDK: the effective rule.
	out, err := anonSDKClient(f.srv.URL).GetBucketCors(context.Background(), &s3.GetBucketCorsInput{Bucket: aws.String(testBucket)})
	if err != nil {
		t.Fatalf("GetBucketCors: %v", err)
	}
	if len(out.CORSRules) != 1 {
		t.Fatalf("GetBucketCors: %d rules", len(out.CORSRules))
	}
	r := out.CORSRules[0]
	got := s3api.CORSRule{AllowedOrigins: r.AllowedOrigins, AllowedMethods: r.AllowedMethods, AllowedHeaders: r.AllowedHeaders,
		ExposeHeaders: r.ExposeHeaders, MaxAgeSeconds: int(aws.ToInt32(r.MaxAgeSeconds))}
	if !reflect.DeepEqual(got, rule) {
		t.Errorf("GetBucketCors:\n got %+v\nwant %+v", got, rule)
	}
}

// TestCORSAnyOrigin: with "*" every origin gets Access-Control-Allow-Origin:
// * and no credentials, on preflights and on responses.
func TestCORSAnyOrigin(t *testing.T) {
	f := newFixture(t, map[string][]byte{"k": []byte("v")}, fixtureOpts{anonymous: true,
		cors: s3api.CORSRules{s3api.ReadOnlyCORSRule([]string{"*"}, 0)}})
	resp, body := f.do(t, "OPTIONS", "/bkt/k", map[string]string{"Origin": "http://localhost:3000", "Access-Control-Request-Method": "GET",
		"Access-Control-Request-Headers": "range"})
	mustStatus(t, resp, body, 200)
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Access-Control-Allow-Credentials") != "" ||
		resp.Header.Get("Access-Control-Max-Age") != "" {
		t.Errorf("preflight with *: %v", resp.Header)
	}
	resp, body = f.do(t, "GET", "/bkt/k", map[string]string{"Origin": "https://anything.example"})
	mustStatus(t, resp, body, 200)
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Access-Control-Allow-Credentials") != "" || string(body) != "v" {
		t.Errorf("GET with *: %v %q", resp.Header, body)
	}
	resp, _ = f.do(t, "GET", "/bkt?cors", nil)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("?cors: %d", resp.StatusCode)
	}
}

// TestCORSExposesWharfHeaders: ReadOnlyCORSRule exposes every response
// header wharf sends that a page's script may want and a browser hides
// unless exposed (all but the CORS-safelisted ones and the connection's
// own), on objects, ranged reads, 304s and errors; among them Retry-After
// of a 503 for a bucket still opening, which a browser SDK needs to back
// off.
func TestCORSExposesWharfHeaders(t *testing.T) {
	const app = "https://app.example"
	rule := s3api.ReadOnlyCORSRule([]string{app}, 0)
	exposed := map[string]bool{}
	for _, h := range rule.ExposeHeaders {
		exposed[http.CanonicalHeaderKey(h)] = true
	}
	hidden := map[string]bool{"Date": true, "Server": true, "Connection": true, "Vary": true,
		// CORS-safelisted response headers: always readable.
		"Cache-Control": true, "Content-Language": true, "Content-Length": true, "Content-Type": true, "Expires": true, "Last-Modified": true, "Pragma": true}
	check := func(what string, resp *http.Response) {
		t.Helper()
		if resp.Header.Get("Access-Control-Allow-Origin") != app {
			t.Fatalf("%s: no CORS answer: %v", what, resp.Header)
		}
		for k := range resp.Header {
			if !hidden[k] && !strings.HasPrefix(k, "Access-Control-") && !exposed[k] {
				t.Errorf("%s: response header %s is not exposed to the page", what, k)
			}
		}
	}
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true, cors: s3api.CORSRules{rule}})
	for _, tc := range []struct {
		method, path string
		hdr          map[string]string
	}{
		{"GET", "/bkt/hello.txt", map[string]string{"x-amz-checksum-mode": "ENABLED"}},
		{"HEAD", "/bkt/dir/a.bin", map[string]string{"Range": "bytes=0-9"}},
		{"GET", "/bkt/hello.txt?partNumber=1", nil},
		{"GET", "/bkt/hello.txt", map[string]string{"If-None-Match": "*"}},
		{"GET", "/bkt/hello.txt", map[string]string{"Range": "bytes=100000-"}},
		{"GET", "/bkt/nope", nil},
	} {
		hdr := map[string]string{"Origin": app}
		for k, v := range tc.hdr {
			hdr[k] = v
		}
		resp, _ := f.do(t, tc.method, tc.path, hdr)
		check(tc.method+" "+tc.path+" "+fmt.Sprint(tc.hdr), resp)
	}
	v, err := auth.New(auth.Config{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s3api.New(s3api.Config{Catalog: unopenedCatalog{time.Now()}, Verifier: v, Logger: zerolog.Nop(),
		CORS: s3api.CORSRules{rule}}))
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest("GET", srv.URL+"/opening/a.txt", nil)
	req.Header.Set("Origin", app)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("bucket still opening: %s, Retry-After %q", resp.Status, resp.Header.Get("Retry-After"))
	}
	check("GET of a bucket still opening", resp)
}
