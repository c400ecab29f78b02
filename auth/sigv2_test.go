package auth

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7/pkg/s3utils"
	"github.com/minio/minio-go/v7/pkg/signer"
)

// botoPresignV2 builds a presigned URL the way botocore's HmacV1QueryAuth
// does for generate_presigned_url / `aws s3 presign` with a custom endpoint:
// the key quoted with safe "/~", string to sign
// "GET\n\n\n<expires>\n/<bucket>/<key>[?sub-resources]", query order
// AWSAccessKeyId, Signature, Expires. It is written from botocore's
// algorithm so the test does not share code with the verifier.
func botoPresignV2(base, bucket, key, subQuery, ak, sk string, expires int64) string {
	path := "/" + bucket + "/" + s3utils.EncodePath(key)
	res := path
	if subQuery != "" {
		res += "?" + subQuery
	}
	sts := "GET\n\n\n" + strconv.FormatInt(expires, 10) + "\n" + res
	m := hmac.New(sha1.New, []byte(sk))
	m.Write([]byte(sts))
	sig := base64.StdEncoding.EncodeToString(m.Sum(nil))
	q := "AWSAccessKeyId=" + url.QueryEscape(ak) + "&Signature=" + url.QueryEscape(sig) + "&Expires=" + strconv.FormatInt(expires, 10)
	if subQuery != "" {
		q = subQuery + "&" + q
	}
	return base + path + "?" + q
}

func TestSigV2Presigned(t *testing.T) {
	now := time.Now()
	v, err := New(testConfig(false, func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	minio := func(t *testing.T, path, query string, expires int64) string {
		// minio-go's PreSignV2 reads the wall clock; now is within a second.
		return signer.PreSignV2(*newReq(t, srv, "GET", path, query), testAK, testSK, expires, false).URL.String()
	}
	in := func(d time.Duration) int64 { return now.Add(d).Unix() }
	cases := []struct {
		name   string
		url    func(t *testing.T) string
		code   string
		status int
	}{
		{"boto: valid", func(t *testing.T) string {
			return botoPresignV2(srv.URL, "b", "dir/ü a+b.txt", "", testAK, testSK, in(time.Hour))
		}, "", 0},
		{"boto: valid with response override", func(t *testing.T) string {
			return botoPresignV2(srv.URL, "b", "k", "response-content-type=text/plain", testAK, testSK, in(time.Hour))
		}, "", 0},
		{"boto: valid double slash key", func(t *testing.T) string {
			return botoPresignV2(srv.URL, "b", "a//b", "", testAK, testSK, in(time.Minute))
		}, "", 0},
		{"boto: expired", func(t *testing.T) string {
			return botoPresignV2(srv.URL, "b", "k", "", testAK, testSK, in(-time.Second))
		}, "AccessDenied", 403},
		{"boto: more than 7 days", func(t *testing.T) string {
			return botoPresignV2(srv.URL, "b", "k", "", testAK, testSK, in(8*24*time.Hour))
		}, "AccessDenied", 403},
		{"boto: tampered key", func(t *testing.T) string {
			return strings.Replace(botoPresignV2(srv.URL, "b", "k1", "", testAK, testSK, in(time.Hour)), "/b/k1?", "/b/k2?", 1)
		}, "SignatureDoesNotMatch", 403},
		{"boto: tampered bucket", func(t *testing.T) string {
			return strings.Replace(botoPresignV2(srv.URL, "b", "k", "", testAK, testSK, in(time.Hour)), "/b/k?", "/c/k?", 1)
		}, "SignatureDoesNotMatch", 403},
		{"boto: tampered expires", func(t *testing.T) string {
			e := in(time.Hour)
			return strings.Replace(botoPresignV2(srv.URL, "b", "k", "", testAK, testSK, e), strconv.FormatInt(e, 10), strconv.FormatInt(e+1, 10), 1)
		}, "SignatureDoesNotMatch", 403},
		{"boto: added sub-resource", func(t *testing.T) string {
			return botoPresignV2(srv.URL, "b", "k", "", testAK, testSK, in(time.Hour)) + "&response-content-type=text%2Fhtml"
		}, "SignatureDoesNotMatch", 403},
		{"boto: wrong secret", func(t *testing.T) string { return botoPresignV2(srv.URL, "b", "k", "", testAK, "x", in(time.Hour)) }, "SignatureDoesNotMatch", 403},
		{"boto: unknown key", func(t *testing.T) string {
			return botoPresignV2(srv.URL, "b", "k", "", "AKIANOPE", testSK, in(time.Hour))
		}, "InvalidAccessKeyId", 403},
		{"missing Expires", func(t *testing.T) string {
			u := botoPresignV2(srv.URL, "b", "k", "", testAK, testSK, in(time.Hour))
			return u[:strings.Index(u, "&Expires=")]
		}, "AccessDenied", 403},
		{"minio: valid", func(t *testing.T) string {
			return minio(t, "/b/a%2Bb/%C3%BC%20x", "versionId=v1&response-content-type=text%2Fplain", 600)
		}, "", 0},
		{"minio: location sub-resource", func(t *testing.T) string { return minio(t, "/b/", "location=", 600) }, "", 0},
		{"minio: expired", func(t *testing.T) string { return minio(t, "/b/k", "", -5) }, "AccessDenied", 403},
		{"minio: tampered query", func(t *testing.T) string {
			return strings.Replace(minio(t, "/b/k", "versionId=v1", 600), "versionId=v1", "versionId=v2", 1)
		}, "SignatureDoesNotMatch", 403},
		{"both v2 and v4 query auth", func(t *testing.T) string {
			return botoPresignV2(srv.URL, "b", "k", "", testAK, testSK, in(time.Hour)) + "&X-Amz-Algorithm=AWS4-HMAC-SHA256"
		}, "InvalidArgument", 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, c.url(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			o := send(t, req)
			if c.code == "" {
				wantOK(t, o, testAK)
				return
			}
			wantErr(t, o, c.code, c.status)
		})
	}
}

func TestSigV2Header(t *testing.T) {
	now := time.Now()
	v, err := New(testConfig(false, func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	sign := func(t *testing.T, method, path, query string, hdr map[string]string, sk string) *http.Request {
		req := newReq(t, srv, method, path, query)
		for k, val := range hdr {
			req.Header.Set(k, val)
		}
		return signer.SignV2(*req, testAK, sk, false)
	}
	cases := []struct {
		name   string
		req    func(t *testing.T) *http.Request
		code   string
		status int
	}{
		{"valid GET", func(t *testing.T) *http.Request { return sign(t, "GET", "/b/%C3%BC/a%2Bb", "", nil, testSK) }, "", 0},
		{"valid HEAD with amz header and sub-resource", func(t *testing.T) *http.Request {
			return sign(t, "HEAD", "/b/k", "versionId=7&prefix=ignored", map[string]string{"X-Amz-Meta-Foo": "bar  baz", "Range": "bytes=1-2"}, testSK)
		}, "", 0},
		{"x-amz-date instead of Date", func(t *testing.T) *http.Request {
			// AWS rule: with x-amz-date the Date line is empty.
			req := newReq(t, srv, "GET", "/b/k", "")
			req.Header.Set("X-Amz-Date", now.UTC().Format(http.TimeFormat))
			sts := "GET\n\n\n\nx-amz-date:" + req.Header.Get("X-Amz-Date") + "\n/b/k"
			m := hmac.New(sha1.New, []byte(testSK))
			m.Write([]byte(sts))
			req.Header.Set("Authorization", "AWS "+testAK+":"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
			return req
		}, "", 0},
		{"wrong secret", func(t *testing.T) *http.Request { return sign(t, "GET", "/b/k", "", nil, "wrong") }, "SignatureDoesNotMatch", 403},
		{"tampered path", func(t *testing.T) *http.Request {
			r := sign(t, "GET", "/b/k", "", nil, testSK)
			r.URL.Path = "/b/j"
			return r
		}, "SignatureDoesNotMatch", 403},
		{"tampered sub-resource", func(t *testing.T) *http.Request {
			r := sign(t, "GET", "/b/k", "versionId=1", nil, testSK)
			r.URL.RawQuery = "versionId=2"
			return r
		}, "SignatureDoesNotMatch", 403},
		{"tampered amz header", func(t *testing.T) *http.Request {
			r := sign(t, "GET", "/b/k", "", map[string]string{"X-Amz-Meta-A": "1"}, testSK)
			r.Header.Set("X-Amz-Meta-A", "2")
			return r
		}, "SignatureDoesNotMatch", 403},
		{"skewed +16m", func(t *testing.T) *http.Request {
			return sign(t, "GET", "/b/k", "", map[string]string{"Date": now.Add(16 * time.Minute).UTC().Format(http.TimeFormat)}, testSK)
		}, "RequestTimeTooSkewed", 403},
		{"skewed -16m", func(t *testing.T) *http.Request {
			return sign(t, "GET", "/b/k", "", map[string]string{"Date": now.Add(-16 * time.Minute).UTC().Format(http.TimeFormat)}, testSK)
		}, "RequestTimeTooSkewed", 403},
		{"unknown key", func(t *testing.T) *http.Request {
			r := newReq(t, srv, "GET", "/b/k", "")
			return signer.SignV2(*r, "AKIANOPE", testSK, false)
		}, "InvalidAccessKeyId", 403},
		{"no signature part", func(t *testing.T) *http.Request {
			r := newReq(t, srv, "GET", "/b/k", "")
			r.Header.Set("Authorization", "AWS "+testAK)
			return r
		}, "AuthorizationHeaderMalformed", 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := send(t, c.req(t))
			if c.code == "" {
				wantOK(t, o, testAK)
				return
			}
			wantErr(t, o, c.code, c.status)
		})
	}
}

// TestSigV2VirtualHost: SigV2 signs "/<bucket>/<key>" even when the bucket is
// in the Host header. With VirtualHostBase configured the verifier
// reconstructs it; without, it never guesses a bucket from Host.
func TestSigV2VirtualHost(t *testing.T) {
	now := time.Now()
	vhost := "photos.s3.wharf.test:9000"
	cases := []struct {
		name   string
		base   string
		host   string
		sign   func(req *http.Request) *http.Request
		code   string
		status int
	}{
		{"presigned, base configured", "s3.wharf.test", vhost, func(r *http.Request) *http.Request {
			return signer.PreSignV2(*r, testAK, testSK, 600, true)
		}, "", 0},
		{"header, base configured (case-insensitive)", "S3.Wharf.Test.", vhost, func(r *http.Request) *http.Request {
			return signer.SignV2(*r, testAK, testSK, true)
		}, "", 0},
		{"presigned, no base: no guessing", "", vhost, func(r *http.Request) *http.Request {
			return signer.PreSignV2(*r, testAK, testSK, 600, true)
		}, "SignatureDoesNotMatch", 403},
		{"presigned for another bucket's host", "s3.wharf.test", vhost, func(r *http.Request) *http.Request {
			r.Host = "logs.s3.wharf.test:9000"
			s := signer.PreSignV2(*r, testAK, testSK, 600, true)
			s.Host = vhost
			return s
		}, "SignatureDoesNotMatch", 403},
		{"path-style still works with base configured", "s3.wharf.test", "", func(r *http.Request) *http.Request {
			r.URL.Path = "/photos" + r.URL.Path
			return signer.PreSignV2(*r, testAK, testSK, 600, false)
		}, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(false, func() time.Time { return now })
			cfg.VirtualHostBase = c.base
			v, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			srv := authServer(t, v)
			req := newReq(t, srv, "GET", "/dir/%C3%BC%20a%2Bb.txt", "versionId=1")
			if c.host != "" {
				req.Host = c.host
			}
			o := send(t, c.sign(req))
			if c.code == "" {
				wantOK(t, o, testAK)
				return
			}
			wantErr(t, o, c.code, c.status)
		})
	}
	for _, h := range []struct{ host, base, want string }{
		{"b.s3.example:80", "s3.example", "b"},
		{"My.Bucket.S3.example", "s3.example", "My.Bucket"},
		{"s3.example", "s3.example", ""},
		{".s3.example", "s3.example", ""},
		{"b.s3.example", "", ""},
		{"127.0.0.1:9000", "0.0.1", ""},
		{"[::1]:9000", "1]", ""},
		{"b.other", "s3.example", ""},
	} {
		if got := HostBucket(h.host, h.base); got != h.want {
			t.Errorf("HostBucket(%q, %q) = %q, want %q", h.host, h.base, got, h.want)
		}
	}
}

// TestSigV2PresignedFarExpiresRefused: a SigV2 presigned URL whose Expires
// lies beyond the 7-day cap is refused whatever its size, up to the largest
// int64 (time.Unix wraps around for values that close to it, which must not
// turn a never-expiring URL into one that looks already due).
func TestSigV2PresignedFarExpiresRefused(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	v, err := New(testConfig(false, func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	for _, exp := range []int64{
		now.Add(30 * 24 * time.Hour).Unix(),
		1 << 40,
		1<<62 + 12345,
		math.MaxInt64 - 62135596800, // the last value time.Unix keeps
		math.MaxInt64 - 62135596799, // the first value time.Unix wraps
		math.MaxInt64,
	} {
		t.Run(strconv.FormatInt(exp, 10), func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, botoPresignV2(srv.URL, "b", "k", "", testAK, testSK, exp), nil)
			if err != nil {
				t.Fatal(err)
			}
			o := send(t, req)
			wantErr(t, o, "AccessDenied", 403)
			if !strings.Contains(o.Message, "more than 7 days") {
				t.Fatalf("refused for another reason: %v", o)
			}
		})
	}
}

// TestSigV2SignsPathAndSubResourcesOnly pins what a SigV2 signature covers,
// as on AWS: the method, the path (with the bucket) and S3's
// sub-resources (versionId, response-*, partNumber, acl, ...). Other query
// parameters (a listing's prefix, delimiter, markers, max-keys) are not
// signed, so the holder of a SigV2 presigned listing URL can change them;
// SECURITY.md says so and points to SigV4, which signs the whole query.
func TestSigV2SignsPathAndSubResourcesOnly(t *testing.T) {
	now := time.Now()
	v, err := New(testConfig(false, func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	u := botoPresignV2(srv.URL, "b", "k", "", testAK, testSK, now.Add(time.Hour).Unix())
	for _, c := range []struct {
		add  string
		code string
	}{
		{"", ""},
		{"&prefix=other%2F&max-keys=1000&list-type=2", ""},
		{"&versionId=v1", "SignatureDoesNotMatch"},
		{"&response-content-type=text%2Fhtml", "SignatureDoesNotMatch"},
		{"&partNumber=1", "SignatureDoesNotMatch"},
		{"&acl", "SignatureDoesNotMatch"},
	} {
		req, err := http.NewRequest(http.MethodGet, u+c.add, nil)
		if err != nil {
			t.Fatal(err)
		}
		o := send(t, req)
		if c.code == "" {
			wantOK(t, o, testAK)
		} else {
			wantErr(t, o, c.code, 403)
		}
	}
}
