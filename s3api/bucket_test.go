package s3api_test

import (
	"bufio"
	"encoding/xml"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/s3api"
)

type listAllMyBuckets struct {
	Owner struct {
		ID          string
		DisplayName string
	}
	Buckets []struct {
		Name         string
		CreationDate string
	} `xml:"Buckets>Bucket"`
}

// Checklist 1: ListBuckets.
func Test01ListBuckets(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	resp, body := f.do(t, "GET", "/", nil)
	mustStatus(t, resp, body, 200)
	if ct := resp.Header.Get("Content-Type"); ct != "application/xml" {
		t.Errorf("Content-Type %q", ct)
	}
	var res listAllMyBuckets
	if err := xml.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	if res.Owner.ID == "" || len(res.Buckets) != 1 || res.Buckets[0].Name != testBucket {
		t.Fatalf("ListBuckets = %+v", res)
	}
	if got, want := res.Buckets[0].CreationDate, "2025-01-02T03:04:05.000Z"; got != want {
		t.Errorf("CreationDate %q, want %q", got, want)
	}
}

// Checklist 2: /bkt and /bkt/ route identically; GetBucketLocation.
func Test02BucketRoutingAndLocation(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	_, a := f.do(t, "GET", "/bkt?list-type=2", nil)
	_, b := f.do(t, "GET", "/bkt/?list-type=2", nil)
	if string(a) != string(b) || !strings.Contains(string(a), "<ListBucketResult") {
		t.Fatalf("/bkt and /bkt/ differ:\n%s\n%s", a, b)
	}
	for _, p := range []string{"/bkt?location", "/bkt/?location", "/bkt/?location="} {
		resp, body := f.do(t, "GET", p, nil)
		mustStatus(t, resp, body, 200)
		want := `<LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></LocationConstraint>`
		if !strings.Contains(string(body), want) {
			t.Errorf("%s: %s", p, body)
		}
	}
	eu := newFixture(t, map[string][]byte{"k": []byte("v")}, fixtureOpts{anonymous: true, region: "eu-west-1"})
	resp, body := eu.do(t, "GET", "/bkt/?location", nil)
	mustStatus(t, resp, body, 200)
	if !strings.Contains(string(body), ">eu-west-1</LocationConstraint>") {
		t.Errorf("eu-west-1 location: %s", body)
	}
	resp, body = f.do(t, "GET", "/nope/?location", nil)
	wantError(t, resp, body, 404, "NoSuchBucket")
}

// Checklist 3: HeadBucket.
func Test03HeadBucket(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true, region: "eu-west-1"})
	for _, p := range []string{"/bkt", "/bkt/"} {
		resp, body := f.do(t, "HEAD", p, nil)
		mustStatus(t, resp, body, 200)
		if r := resp.Header.Get("x-amz-bucket-region"); r != "eu-west-1" {
			t.Errorf("x-amz-bucket-region %q", r)
		}
	}
	resp, body := f.do(t, "HEAD", "/missing", nil)
	wantError(t, resp, body, 404, "")
}

// Checklist 4: virtual-hosted addressing only under the configured base.
func Test04VirtualHost(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true, vhostBase: "s3.example.test"})
	port := f.srv.Listener.Addr().(*net.TCPAddr).Port
	_, pathStyle := f.do(t, "GET", "/bkt/hello.txt", nil)
	resp, vhost := f.do(t, "GET", "/hello.txt", map[string]string{"Host": "bkt.s3.example.test:" + itoa(port)})
	mustStatus(t, resp, vhost, 200)
	if string(vhost) != string(pathStyle) || string(vhost) != "hello world\n" {
		t.Fatalf("vhost body %q, path-style %q", vhost, pathStyle)
	}
	_, l1 := f.do(t, "GET", "/?list-type=2&prefix=dir/", map[string]string{"Host": "BKT.s3.example.test"})
	_, l2 := f.do(t, "GET", "/bkt?list-type=2&prefix=dir/", nil)
	if string(l1) != string(l2) {
		t.Fatalf("vhost listing differs:\n%s\n%s", l1, l2)
	}
	// IP and localhost hosts are never read as buckets.
	for _, host := range []string{"127.0.0.1:" + itoa(port), "localhost:" + itoa(port), "s3.example.test"} {
		resp, body := f.do(t, "GET", "/", map[string]string{"Host": host})
		mustStatus(t, resp, body, 200)
		if !strings.Contains(string(body), "<ListAllMyBucketsResult") {
			t.Errorf("Host %s: GET / is not ListBuckets: %s", host, body)
		}
		resp, body = f.do(t, "GET", "/bkt/hello.txt", map[string]string{"Host": host})
		mustStatus(t, resp, body, 200)
	}
	// Without a base, a bucket-looking Host is ignored.
	g := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	resp, body := g.do(t, "GET", "/", map[string]string{"Host": "bkt.localhost"})
	mustStatus(t, resp, body, 200)
	if !strings.Contains(string(body), "<ListAllMyBucketsResult") {
		t.Errorf("no base: %s", body)
	}
}

// Checklist 25 and 26: request ids everywhere, NoSuchKey/NoSuchBucket.
func Test25And26ErrorsAndRequestIDs(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	seen := map[string]bool{}
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/bkt/nope", 404, "NoSuchKey"},
		{"GET", "/bkt/dir/", 404, "NoSuchKey"},
		{"GET", "/bkt/dir", 404, "NoSuchKey"},
		{"GET", "/bkt/dir/nope", 404, "NoSuchKey"},
		{"GET", "/bkt/dir/sub", 404, "NoSuchKey"},
		{"GET", "/bkt/hello.txt/", 404, "NoSuchKey"},
		{"GET", "/bkt//hello.txt", 404, "NoSuchKey"}, // "//" is kept: key "/hello.txt"
		{"GET", "/bkt/dir//a.bin", 404, "NoSuchKey"},
		{"HEAD", "/bkt/dir/nope", 404, ""},
		{"HEAD", "/bkt/dir/", 404, ""},
		{"GET", "/nobucket/k", 404, "NoSuchBucket"},
		{"GET", "/nobucket", 404, "NoSuchBucket"},
		{"HEAD", "/nobucket/k", 404, ""},
	} {
		resp, body := f.do(t, tc.method, tc.path, nil)
		e := wantError(t, resp, body, tc.status, tc.code)
		if tc.code == "NoSuchKey" && e.Key == "" {
			t.Errorf("%s: NoSuchKey without Key", tc.path)
		}
		if tc.code == "NoSuchBucket" && e.BucketName != "nobucket" {
			t.Errorf("%s: BucketName %q", tc.path, e.BucketName)
		}
		rid := resp.Header.Get("x-amz-request-id")
		if seen[rid] {
			t.Errorf("request id %s reused", rid)
		}
		seen[rid] = true
	}
	resp, body := f.do(t, "GET", "/bkt/hello.txt", nil)
	mustStatus(t, resp, body, 200)
	if resp.Header.Get("x-amz-request-id") == "" || resp.Header.Get("x-amz-id-2") == "" {
		t.Errorf("success without request ids: %v", resp.Header)
	}
	for _, m := range []string{"PATCH", "PROPFIND", "TRACE"} {
		resp, body := f.do(t, m, "/bkt/hello.txt", nil)
		wantError(t, resp, body, 405, "MethodNotAllowed")
	}
	// OPTIONS is a CORS preflight (TestCORSPreflight), not a 405.
	resp, body = f.do(t, "OPTIONS", "/bkt/hello.txt", nil)
	wantError(t, resp, body, 400, "BadRequest")
}

// Checklist 27: writes are 403 AccessDenied without reading the body.
func Test27WritesRefused(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	for _, tc := range []struct{ method, path string }{
		{"PUT", "/bkt/new"}, {"PUT", "/bkt/hello.txt"}, {"PUT", "/newbucket"},
		{"POST", "/bkt/k?uploads"}, {"POST", "/bkt?delete"}, {"PUT", "/bkt/k?partNumber=1&uploadId=x"},
		{"DELETE", "/bkt/hello.txt"}, {"DELETE", "/bkt"}, {"POST", "/bkt/k?uploadId=x"},
	} {
		resp, body := f.do(t, tc.method, tc.path, nil)
		wantError(t, resp, body, 403, "AccessDenied")
	}

	// A 1 GiB PUT with Expect: 100-continue: the server must answer 403
	// without asking for the body, and we never send it.
	conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := "PUT /bkt/huge HTTP/1.1\r\nHost: x\r\nContent-Length: 1073741824\r\nExpect: 100-continue\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: "PUT"})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("100-continue PUT: status %d, want 403 (no 100 Continue)", resp.StatusCode)
	}
}

// Checklist 28: sub-resources never fall through to a listing.
func Test28SubResources(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	for _, tc := range []struct {
		path   string
		status int
		code   string // error code, or the root element of a 200
	}{
		{"/bkt?acl", 200, "AccessControlPolicy"},
		{"/bkt/?acl=", 200, "AccessControlPolicy"},
		{"/bkt?policy", 404, "NoSuchBucketPolicy"},
		{"/bkt?cors", 404, "NoSuchCORSConfiguration"},
		{"/bkt?versioning", 200, "VersioningConfiguration"},
		{"/bkt?versioning", 200, "Status>Enabled</Status"},
		{"/bkt?tagging", 404, "NoSuchTagSet"},
		{"/bkt?lifecycle", 501, "NotImplemented"},
		{"/bkt?website", 501, "NotImplemented"},
		{"/bkt?uploads", 501, "NotImplemented"},
		{"/bkt?versions", 200, "ListVersionsResult"},
		{"/bkt?list-type=2&acl", 200, "AccessControlPolicy"},
		{"/bkt/hello.txt?acl", 200, "AccessControlPolicy"},
		{"/bkt/hello.txt?tagging", 200, "Tagging"},
		{"/bkt/nope?acl", 404, "NoSuchKey"},
		{"/bkt/hello.txt?attributes", 400, "InvalidRequest"}, // no x-amz-object-attributes
		{"/bkt?attributes", 501, "NotImplemented"},
		{"/bkt?object-lock", 404, "ObjectLockConfigurationNotFoundError"},
		{"/bkt/hello.txt?object-lock", 501, "NotImplemented"},
		{"/bkt/hello.txt?retention", 400, "InvalidRequest"},
		{"/bkt/hello.txt?legal-hold", 400, "InvalidRequest"},
		{"/bkt?retention", 501, "NotImplemented"},
		{"/bkt?policyStatus", 200, "PolicyStatus"},
		{"/bkt?policyStatus", 200, "IsPublic>true</IsPublic"}, // anonymous server
		{"/bkt/hello.txt?policyStatus", 501, "NotImplemented"},
		{"/nobucket?object-lock", 404, "NoSuchBucket"},
		{"/nobucket?policy", 404, "NoSuchBucket"},
	} {
		resp, body := f.do(t, "GET", tc.path, nil)
		if strings.Contains(string(body), "ListBucketResult") {
			t.Errorf("%s fell through to a listing", tc.path)
		}
		if tc.status == 200 {
			mustStatus(t, resp, body, 200)
			if !strings.Contains(string(body), "<"+tc.code) {
				t.Errorf("%s: want <%s>, got %s", tc.path, tc.code, body)
			}
			continue
		}
		wantError(t, resp, body, tc.status, tc.code)
	}
}

// Checklist 35: anonymous only when configured; per-bucket grants apply to
// listings and ListBuckets.
func Test35AnonymousAndGrants(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: false})
	for _, p := range []string{"/", "/bkt", "/bkt?list-type=2", "/bkt/hello.txt", "/bkt/nope", "/bkt?location"} {
		resp, body := f.do(t, "GET", p, nil)
		wantError(t, resp, body, 403, "AccessDenied")
	}
	resp, body := f.do(t, "HEAD", "/bkt/hello.txt", nil)
	wantError(t, resp, body, 403, "")

	// A key granted only bucket "other" sees no buckets and is denied "bkt".
	a, _ := openArchive(t, map[string][]byte{"k": []byte("v")}, fixtureOpts{})
	v, err := auth.New(auth.Config{Keys: []auth.Key{{AccessKey: "AKLIMITED", SecretKey: "s", Buckets: []string{"other"}}}})
	if err != nil {
		t.Fatal(err)
	}
	h := s3api.New(s3api.Config{
		Catalog:  catalog.NewStatic(map[string]*archiveview.Archive{"bkt": a, "other": a}),
		Verifier: v, Logger: zerolog.Nop(), Registerer: prometheus.NewRegistry(),
	})
	c := newSDKClient(t, startServer(t, h), "AKLIMITED", "s")
	names := sdkListBuckets(t, c)
	if strings.Join(names, ",") != "other" {
		t.Errorf("limited key sees buckets %v, want [other]", names)
	}
	if err := sdkListErr(c, "bkt"); !strings.Contains(err, "AccessDenied") {
		t.Errorf("limited key listing bkt: %v", err)
	}
	if err := sdkListErr(c, "other"); err != "" {
		t.Errorf("limited key listing other: %v", err)
	}
}

// The three metric families exist from the start, at zero, on the injected
// registry, and count what is served.
func TestMetrics(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	if v := metricValue(t, f.reg, "wharf_requests_total", map[string]string{"op": "GetObject", "code": "200"}); v != 0 {
		t.Fatalf("pre-initialized counter = %v", v)
	}
	if v := metricValue(t, f.reg, "wharf_served_bytes_total", nil); v != 0 {
		t.Fatalf("served bytes = %v", v)
	}
	resp, body := f.do(t, "GET", "/bkt/hello.txt", nil)
	mustStatus(t, resp, body, 200)
	resp, body = f.do(t, "GET", "/bkt/nope", nil)
	wantError(t, resp, body, 404, "NoSuchKey")
	resp, body = f.do(t, "GET", "/bkt/dir/a.bin", map[string]string{"Range": "bytes=0-99"})
	mustStatus(t, resp, body, 206)
	if v := metricValue(t, f.reg, "wharf_requests_total", map[string]string{"op": "GetObject", "code": "200"}); v != 1 {
		t.Errorf("GetObject 200 = %v", v)
	}
	if v := metricValue(t, f.reg, "wharf_requests_total", map[string]string{"op": "GetObject", "code": "404"}); v != 1 {
		t.Errorf("GetObject 404 = %v", v)
	}
	if v := metricValue(t, f.reg, "wharf_served_bytes_total", nil); v != 12+100 {
		t.Errorf("served bytes = %v, want 112", v)
	}
	if v := metricValue(t, f.reg, "wharf_request_duration_seconds", map[string]string{"op": "GetObject"}); v != 3 {
		t.Errorf("duration sample count = %v, want 3", v)
	}
	logs := f.logs.String()
	for _, want := range []string{`"op":"GetObject"`, `"status":206`, `"range":"bytes=0-99"`, `"key":"dir/a.bin"`, `"request_id":"`, `"bytes":100`} {
		if !strings.Contains(logs, want) {
			t.Errorf("access log lacks %s:\n%s", want, logs)
		}
	}
}

// metricValue returns a counter's value or a histogram's sample count.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metric
				}
			}
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			if m.Histogram != nil {
				return float64(m.Histogram.GetSampleCount())
			}
		}
		t.Fatalf("metric %s%v not found", name, labels)
	}
	t.Fatalf("metric family %s not registered", name)
	return 0
}
