package auth

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go/encoding/httpbinding"
	"github.com/minio/minio-go/v7/pkg/s3utils"
	"github.com/minio/minio-go/v7/pkg/signer"
)

// awsSign signs req in place with the aws-sdk-go-v2 SigV4 signer, configured
// as its S3 client configures it (no second path escaping).
func awsSign(t *testing.T, req *http.Request, ak, sk, region, payload string, at time.Time) {
	t.Helper()
	req.Header.Set("X-Amz-Content-Sha256", payload)
	err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk},
		req, payload, "s3", region, at, func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err != nil {
		t.Fatal(err)
	}
}

// awsPresign presigns req with aws-sdk-go-v2 and returns the URL to GET.
func awsPresign(t *testing.T, req *http.Request, ak, sk, region, expires string, at time.Time) string {
	t.Helper()
	q := req.URL.Query()
	q.Set("X-Amz-Expires", expires)
	req.URL.RawQuery = q.Encode()
	u, _, err := v4.NewSigner().PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk},
		req, unsignedPL, "s3", region, at, func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// minioSign signs req with minio-go's SigV4 signer and returns the signed request.
func minioSign(req *http.Request, ak, sk, region, payload string) *http.Request {
	req.Header.Set("X-Amz-Content-Sha256", payload)
	return signer.SignV4(*req, ak, sk, "", region)
}

type keyCase struct{ name, path string }

// keyCases are request paths as S3 SDKs put them on the wire.
func keyCases(escape func(string) string) []keyCase {
	keys := []keyCase{
		{"plain", "file.txt"},
		{"plus", "a+b"},
		{"space", "a b"},
		{"literal percent", "a%20b"},
		{"double slash", "dir//x"},
		{"unicode", "ü.txt"},
		{"dot segments", "x/./y/../z"},
		{"sub-delims", "a=b&c;d:e@f,g$h'(i)*!"},
		{"unreserved", "~user/file-1_2.3"},
		{"trailing slash", "dir/"},
		{"bucket only", ""},
	}
	out := make([]keyCase, 0, len(keys)+1)
	for _, k := range keys {
		out = append(out, keyCase{k.name, escape("/b/" + k.path)})
	}
	return append(out, keyCase{"root", "/"})
}

var queryCases = []struct{ name, raw string }{
	{"none", ""},
	{"versionId", "versionId=3%2FL4kqtJlcpXroDTDmJ%2BrmSpXd3dIbrHY"},
	{"listing", "list-type=2&prefix=a%20b%2Bc%C3%BC&delimiter=%2F&encoding-type=url&max-keys=7"},
	{"location empty value", "location="},
	{"acl without =", "acl"},
	{"response overrides", "response-content-type=text%2Fplain%3B%20charset%3Dutf-8&response-content-disposition=attachment%3B%20filename%3D%22%C3%BC.txt%22"},
	{"partNumber", "partNumber=1"},
	{"repeated key", "tag=b&tag=a"},
}

// TestSigV4PathsAndQueries signs GETs for awkward keys and sub-resource
// queries with both real signers and checks each verifies.
func TestSigV4PathsAndQueries(t *testing.T) {
	v, err := New(testConfig(false, nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	signers := []struct {
		name   string
		escape func(string) string
		sign   func(t *testing.T, req *http.Request) *http.Request
	}{
		{"aws-sdk-go-v2", func(p string) string { return httpbinding.EscapePath(p, false) },
			func(t *testing.T, req *http.Request) *http.Request {
				awsSign(t, req, testAK, testSK, "us-east-1", emptyHash, time.Now())
				return req
			}},
		{"minio-go", s3utils.EncodePath,
			func(t *testing.T, req *http.Request) *http.Request {
				return minioSign(req, testAK, testSK, "us-east-1", emptyHash)
			}},
	}
	for _, sg := range signers {
		for _, kc := range keyCases(sg.escape) {
			for _, qc := range queryCases {
				if sg.name == "minio-go" && qc.name == "repeated key" {
					// minio-go (url.Values.Encode) keeps repeated values in
					// request order; AWS sorts them. No S3 read sends them.
					continue
				}
				t.Run(sg.name+"/"+kc.name+"/"+qc.name, func(t *testing.T) {
					req := sg.sign(t, newReq(t, srv, http.MethodGet, kc.path, qc.raw))
					wantOK(t, send(t, req), testAK)
				})
			}
		}
	}
}

// TestSigV4HeadersRegionsPayloads covers signed Range / If-Match /
// x-amz-checksum-mode headers, every region spelling, both payload hash
// forms and both read methods, for both signers.
func TestSigV4HeadersRegionsPayloads(t *testing.T) {
	v, err := New(testConfig(false, nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	headerSets := []struct {
		name string
		h    map[string]string
	}{
		{"none", nil},
		{"range", map[string]string{"Range": "bytes=8388608-16777215"}},
		{"if-match", map[string]string{"If-Match": `"0a1b2c3d4e5f-7"`}},
		{"checksum-mode", map[string]string{"X-Amz-Checksum-Mode": "ENABLED"}},
		{"all three + spaces", map[string]string{"Range": "bytes=0-9", "If-Match": `  "e t  ag"  `, "X-Amz-Checksum-Mode": "ENABLED"}},
	}
	for _, region := range []string{"us-east-1", "eu-west-1", "auto"} {
		for _, payload := range []string{emptyHash, unsignedPL} {
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				for _, hs := range headerSets {
					name := region + "/" + payload[:8] + "/" + method + "/" + hs.name
					t.Run("aws-sdk-go-v2/"+name, func(t *testing.T) {
						req := newReq(t, srv, method, "/b/dir%2F%2Fx/%C3%BC.txt", "versionId=v1")
						for k, val := range hs.h {
							req.Header.Set(k, val)
						}
						awsSign(t, req, testAK, testSK, region, payload, time.Now())
						wantOK(t, send(t, req), testAK)
					})
					t.Run("minio-go/"+name, func(t *testing.T) {
						req := newReq(t, srv, method, "/b/a%2Bb", "partNumber=1")
						for k, val := range hs.h {
							req.Header.Set(k, val)
						}
						wantOK(t, send(t, minioSign(req, grantAK, grantSK, region, payload)), grantAK)
					})
				}
			}
		}
	}
}

// TestSigV4Refusals tampers with correctly signed requests and checks each
// is refused with the code AWS gives.
func TestSigV4Refusals(t *testing.T) {
	now := time.Now()
	v, err := New(testConfig(false, func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	signed := func(t *testing.T, method, path, query string, at time.Time) *http.Request {
		req := newReq(t, srv, method, path, query)
		req.Header.Set("Range", "bytes=0-99")
		awsSign(t, req, testAK, testSK, "eu-west-1", emptyHash, at)
		return req
	}
	cases := []struct {
		name   string
		req    func(t *testing.T) *http.Request
		code   string
		status int
	}{
		{"control: untampered", func(t *testing.T) *http.Request {
			return signed(t, "GET", "/b/k", "versionId=1", now)
		}, "", 0},
		{"tampered path", func(t *testing.T) *http.Request {
			r := signed(t, "GET", "/b/k", "", now)
			r.URL.Path, r.URL.RawPath = "/b/other", ""
			return r
		}, "SignatureDoesNotMatch", 403},
		{"tampered path: bucket", func(t *testing.T) *http.Request {
			r := signed(t, "GET", "/b/k", "", now)
			r.URL.Path = "/c/k"
			return r
		}, "SignatureDoesNotMatch", 403},
		{"tampered query value", func(t *testing.T) *http.Request {
			r := signed(t, "GET", "/b/k", "versionId=1", now)
			r.URL.RawQuery = strings.Replace(r.URL.RawQuery, "versionId=1", "versionId=2", 1)
			return r
		}, "SignatureDoesNotMatch", 403},
		{"added query parameter", func(t *testing.T) *http.Request {
			r := signed(t, "GET", "/b/", "list-type=2", now)
			r.URL.RawQuery += "&prefix=secret%2F"
			return r
		}, "SignatureDoesNotMatch", 403},
		{"removed query parameter", func(t *testing.T) *http.Request {
			r := signed(t, "GET", "/b/", "list-type=2&prefix=p", now)
			r.URL.RawQuery = "list-type=2"
			return r
		}, "SignatureDoesNotMatch", 403},
		{"tampered signed header", func(t *testing.T) *http.Request {
			r := signed(t, "GET", "/b/k", "", now)
			r.Header.Set("Range", "bytes=0-999999")
			return r
		}, "SignatureDoesNotMatch", 403},
		{"removed signed header", func(t *testing.T) *http.Request {
			r := signed(t, "GET", "/b/k", "", now)
			r.Header.Del("Range")
			return r
		}, "SignatureDoesNotMatch", 403},
		{"tampered method", func(t *testing.T) *http.Request {
			r := signed(t, "GET", "/b/k", "", now)
			r.Method = "HEAD"
			return r
		}, "SignatureDoesNotMatch", 403},
		{"tampered host", func(t *testing.T) *http.Request {
			r := signed(t, "GET", "/b/k", "", now)
			r.Host = "evil.example:1234"
			return r
		}, "SignatureDoesNotMatch", 403},
		{"wrong secret", func(t *testing.T) *http.Request {
			r := newReq(t, srv, "GET", "/b/k", "")
			awsSign(t, r, testAK, testSK+"x", "us-east-1", emptyHash, now)
			return r
		}, "SignatureDoesNotMatch", 403},
		{"other key's secret", func(t *testing.T) *http.Request {
			r := newReq(t, srv, "GET", "/b/k", "")
			awsSign(t, r, testAK, grantSK, "us-east-1", emptyHash, now)
			return r
		}, "SignatureDoesNotMatch", 403},
		{"unknown access key", func(t *testing.T) *http.Request {
			r := newReq(t, srv, "GET", "/b/k", "")
			awsSign(t, r, "AKIAUNKNOWN", testSK, "us-east-1", emptyHash, now)
			return r
		}, "InvalidAccessKeyId", 403},
		{"skewed +16m", func(t *testing.T) *http.Request {
			return signed(t, "GET", "/b/k", "", now.Add(16*time.Minute))
		}, "RequestTimeTooSkewed", 403},
		{"skewed -16m", func(t *testing.T) *http.Request {
			return signed(t, "GET", "/b/k", "", now.Add(-16*time.Minute))
		}, "RequestTimeTooSkewed", 403},
		{"skew +14m accepted", func(t *testing.T) *http.Request {
			return signed(t, "GET", "/b/k", "", now.Add(14*time.Minute))
		}, "", 0},
		{"skew -14m accepted", func(t *testing.T) *http.Request {
			return signed(t, "GET", "/b/k", "", now.Add(-14*time.Minute))
		}, "", 0},
		{"scope date differs from x-amz-date", func(t *testing.T) *http.Request {
			r := signed(t, "GET", "/b/k", "", now)
			day := now.UTC().Format("20060102")
			prev := now.UTC().AddDate(0, 0, -1).Format("20060102")
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/"+day+"/", "/"+prev+"/", 1))
			return r
		}, "AuthorizationHeaderMalformed", 400},
		{"x-amz-date replaced", func(t *testing.T) *http.Request {
			r := signed(t, "GET", "/b/k", "", now)
			r.Header.Set("X-Amz-Date", now.Add(time.Second).UTC().Format("20060102T150405Z"))
			return r
		}, "SignatureDoesNotMatch", 403},
		{"no date at all", func(t *testing.T) *http.Request {
			r := signed(t, "GET", "/b/k", "", now)
			r.Header.Del("X-Amz-Date")
			return r
		}, "AccessDenied", 403},
		{"service not s3", func(t *testing.T) *http.Request {
			r := newReq(t, srv, "GET", "/b/k", "")
			r.Header.Set("X-Amz-Content-Sha256", emptyHash)
			if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSK},
				r, emptyHash, "iam", "us-east-1", now); err != nil {
				t.Fatal(err)
			}
			return r
		}, "AuthorizationHeaderMalformed", 400},
		{"host not signed", func(t *testing.T) *http.Request {
			r := signed(t, "GET", "/b/k", "", now)
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "SignedHeaders=host;", "SignedHeaders=", 1))
			return r
		}, "AuthorizationHeaderMalformed", 400},
		{"unsigned x-amz header added", func(t *testing.T) *http.Request {
			r := signed(t, "GET", "/b/k", "", now)
			r.Header.Set("X-Amz-Checksum-Mode", "ENABLED")
			return r
		}, "AccessDenied", 403},
		{"garbage authorization", func(t *testing.T) *http.Request {
			r := newReq(t, srv, "GET", "/b/k", "")
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=x")
			return r
		}, "AuthorizationHeaderMalformed", 400},
		{"unsupported algorithm (SigV4a)", func(t *testing.T) *http.Request {
			r := newReq(t, srv, "GET", "/b/k", "")
			r.Header.Set("Authorization", "AWS4-ECDSA-P256-SHA256 Credential=x")
			return r
		}, "InvalidArgument", 400},
		{"streaming payload", func(t *testing.T) *http.Request {
			r := newReq(t, srv, "GET", "/b/k", "")
			awsSign(t, r, testAK, testSK, "us-east-1", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", now)
			return r
		}, "InvalidRequest", 400},
		{"non-empty body hash on GET", func(t *testing.T) *http.Request {
			r := newReq(t, srv, "GET", "/b/k", "")
			awsSign(t, r, testAK, testSK, "us-east-1", otherHash, now)
			return r
		}, "XAmzContentSHA256Mismatch", 400},
		{"non-empty body hash on HEAD", func(t *testing.T) *http.Request {
			r := newReq(t, srv, "HEAD", "/b/k", "")
			awsSign(t, r, testAK, testSK, "us-east-1", otherHash, now)
			return r
		}, "XAmzContentSHA256Mismatch", 400},
		{"malformed payload hash", func(t *testing.T) *http.Request {
			r := newReq(t, srv, "GET", "/b/k", "")
			awsSign(t, r, testAK, testSK, "us-east-1", "abc", now)
			return r
		}, "InvalidArgument", 400},
		{"missing payload hash", func(t *testing.T) *http.Request {
			r := newReq(t, srv, "GET", "/b/k", "")
			if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSK},
				r, emptyHash, "s3", "us-east-1", now); err != nil {
				t.Fatal(err)
			}
			return r
		}, "InvalidRequest", 400},
		{"session token (signed)", func(t *testing.T) *http.Request {
			r := newReq(t, srv, "GET", "/b/k", "")
			r.Header.Set("X-Amz-Content-Sha256", emptyHash)
			if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSK, SessionToken: "FwoGZXIvYXdzE"},
				r, emptyHash, "s3", "us-east-1", now); err != nil {
				t.Fatal(err)
			}
			return r
		}, "InvalidToken", 400},
		{"duplicate authorization headers", func(t *testing.T) *http.Request {
			r := signed(t, "GET", "/b/k", "", now)
			r.Header.Add("Authorization", r.Header.Get("Authorization"))
			return r
		}, "AuthorizationHeaderMalformed", 400},
		{"header and query auth together", func(t *testing.T) *http.Request {
			r := signed(t, "GET", "/b/k", "", now)
			r.URL.RawQuery = "X-Amz-Algorithm=AWS4-HMAC-SHA256"
			return r
		}, "InvalidArgument", 400},
		{"unsigned request", func(t *testing.T) *http.Request {
			return newReq(t, srv, "GET", "/b/k", "")
		}, "AccessDenied", 403},
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

// TestSigV4Presigned covers presigned URLs from both signers: valid, at the
// limits, expired, over a week, negative, not yet valid, and tampered.
func TestSigV4Presigned(t *testing.T) {
	now := time.Now()
	v, err := New(testConfig(false, func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	get := func(t *testing.T, u string) *http.Request {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	aws := func(t *testing.T, path, query, expires string, at time.Time) string {
		return awsPresign(t, newReq(t, srv, http.MethodGet, path, query), testAK, testSK, "auto", expires, at)
	}
	cases := []struct {
		name   string
		url    func(t *testing.T) string
		code   string
		status int
	}{
		{"aws: valid", func(t *testing.T) string { return aws(t, "/b/%C3%BC%20x%2By", "", "3600", now) }, "", 0},
		{"aws: valid with response override", func(t *testing.T) string {
			return aws(t, "/b/k", "response-content-disposition=attachment%3B%20filename%3D%22x%2By.txt%22", "60", now)
		}, "", 0},
		{"aws: valid, 7 days, signed 7 days ago", func(t *testing.T) string {
			return aws(t, "/b/k", "", "604800", now.Add(-604800*time.Second+time.Minute))
		}, "", 0},
		{"aws: expired", func(t *testing.T) string { return aws(t, "/b/k", "", "3600", now.Add(-3601*time.Second)) }, "AccessDenied", 403},
		{"aws: expires=0 is already expired", func(t *testing.T) string { return aws(t, "/b/k", "", "0", now.Add(-time.Second)) }, "AccessDenied", 403},
		{"aws: over 7 days", func(t *testing.T) string { return aws(t, "/b/k", "", "604801", now) }, "AuthorizationQueryParametersError", 403},
		{"aws: negative", func(t *testing.T) string { return aws(t, "/b/k", "", "-7", now) }, "AuthorizationQueryParametersError", 403},
		{"aws: not a number", func(t *testing.T) string { return aws(t, "/b/k", "", "1e3", now) }, "AuthorizationQueryParametersError", 400},
		{"aws: not valid yet", func(t *testing.T) string { return aws(t, "/b/k", "", "3600", now.Add(time.Hour)) }, "AccessDenied", 403},
		{"aws: tampered path", func(t *testing.T) string {
			return strings.Replace(aws(t, "/b/k1", "", "3600", now), "/b/k1?", "/b/k2?", 1)
		}, "SignatureDoesNotMatch", 403},
		{"aws: tampered expires", func(t *testing.T) string {
			return strings.Replace(aws(t, "/b/k", "", "3600", now), "X-Amz-Expires=3600", "X-Amz-Expires=3601", 1)
		}, "SignatureDoesNotMatch", 403},
		{"aws: added parameter", func(t *testing.T) string {
			return aws(t, "/b/k", "", "3600", now) + "&response-content-type=text%2Fhtml"
		}, "SignatureDoesNotMatch", 403},
		{"aws: unknown key", func(t *testing.T) string {
			return awsPresign(t, newReq(t, srv, "GET", "/b/k", ""), "AKIANOPE", testSK, "us-east-1", "60", now)
		}, "InvalidAccessKeyId", 403},
		{"aws: wrong secret", func(t *testing.T) string {
			return awsPresign(t, newReq(t, srv, "GET", "/b/k", ""), testAK, "nope", "us-east-1", "60", now)
		}, "SignatureDoesNotMatch", 403},
		{"aws: missing signature", func(t *testing.T) string {
			u := aws(t, "/b/k", "", "60", now)
			return u[:strings.Index(u, "&X-Amz-Signature=")]
		}, "AuthorizationQueryParametersError", 400},
		{"aws: wrong algorithm", func(t *testing.T) string {
			return strings.Replace(aws(t, "/b/k", "", "60", now), "X-Amz-Algorithm=AWS4-HMAC-SHA256", "X-Amz-Algorithm=AWS4-HMAC-SHA512", 1)
		}, "AuthorizationQueryParametersError", 400},
		{"aws: duplicated signature", func(t *testing.T) string {
			u := aws(t, "/b/k", "", "60", now)
			return u + u[strings.Index(u, "&X-Amz-Signature="):]
		}, "AuthorizationQueryParametersError", 400},
		{"minio: valid", func(t *testing.T) string {
			return signer.PreSignV4(*newReq(t, srv, "GET", "/b/dir%2F%2Fa%2Bb", "versionId=x"), testAK, testSK, "", "eu-west-1", 600).URL.String()
		}, "", 0},
		{"minio: session token", func(t *testing.T) string {
			return signer.PreSignV4(*newReq(t, srv, "GET", "/b/k", ""), testAK, testSK, "TOKEN", "eu-west-1", 600).URL.String()
		}, "InvalidToken", 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := send(t, get(t, c.url(t)))
			if c.code == "" {
				wantOK(t, o, testAK)
				return
			}
			wantErr(t, o, c.code, c.status)
		})
	}
}

// TestSigV4RepeatedKeysSortedByValue: the canonical query sorts pairs by
// key and then by value, whatever order they come in on the wire. The
// aws-sdk-go-v2 signer rewrites the URL into canonical order when it signs,
// so the wire order is put back afterwards: a verifier that kept repeated
// keys in request order would refuse these requests.
func TestSigV4RepeatedKeysSortedByValue(t *testing.T) {
	got := canonicalQuery(Query{{"tag", "b"}, {"z", ""}, {"tag", "a"}, {"a", "2"}, {"tag", "a "}, {"a", "1"}}, "")
	if want := "a=1&a=2&tag=a&tag=a%20&tag=b&z="; got != want {
		t.Fatalf("canonicalQuery = %q, want %q", got, want)
	}
	v, err := New(testConfig(false, nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	for _, raw := range []string{"tag=b&tag=a", "x=3&tag=c&x=1&tag=b&x=2", "prefix=p&k=%C3%BC&k=u&k=%20"} {
		t.Run(raw, func(t *testing.T) {
			req := newReq(t, srv, http.MethodGet, "/b/key", raw)
			awsSign(t, req, testAK, testSK, "us-east-1", emptyHash, time.Now())
			if req.URL.RawQuery == raw {
				t.Fatalf("the signer kept the wire order %q: the test would not test the sort", raw)
			}
			req.URL.RawQuery = raw
			wantOK(t, send(t, req), testAK)
		})
	}
}

// TestSigV4PresignedUnsignedAmzHeaders: a presigned request carrying an
// x-amz-* header that its X-Amz-SignedHeaders does not list is refused, as
// AWS refuses it ("There were headers present in the request which were
// not signed") and as header auth here refuses it: such a header changes
// what is answered (x-amz-optional-object-attributes makes a listing look
// up every object's restore state in the store, x-amz-checksum-mode adds
// a checksum), which the signer did not authorize. An x-amz-* header the
// signer did sign is served.
func TestSigV4PresignedUnsignedAmzHeaders(t *testing.T) {
	now := time.Now()
	v, err := New(testConfig(false, func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	get := func(t *testing.T, u string, hdr ...string) *http.Request {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Add(hdr[i], hdr[i+1])
		}
		return req
	}
	u := awsPresign(t, newReq(t, srv, http.MethodGet, "/b/k", ""), testAK, testSK, "us-east-1", "600", now)
	wantOK(t, send(t, get(t, u)), testAK)
	wantOK(t, send(t, get(t, u, "Range", "bytes=0-1")), testAK) // not x-amz-*: AWS does not require it signed
	for _, h := range []string{"X-Amz-Optional-Object-Attributes", "X-Amz-Checksum-Mode", "x-amz-expected-bucket-owner", "X-Amz-Date"} {
		t.Run(h, func(t *testing.T) {
			o := send(t, get(t, u, h, "RestoreStatus"))
			wantErr(t, o, "AccessDenied", 403)
			if !strings.Contains(o.Message, "not signed: "+strings.ToLower(h)) {
				t.Fatalf("message does not name the header: %v", o)
			}
		})
	}
	t.Run("signed x-amz header", func(t *testing.T) {
		req := newReq(t, srv, http.MethodGet, "/b/k", "")
		req.Header.Set("X-Amz-Content-Sha256", emptyHash) // aws-sdk-go-v2 keeps it a signed header
		u := awsPresign(t, req, testAK, testSK, "us-east-1", "600", now)
		if !strings.Contains(u, "x-amz-content-sha256") {
			t.Fatalf("the presigner did not sign the header: %s", u)
		}
		wantOK(t, send(t, get(t, u, "X-Amz-Content-Sha256", emptyHash)), testAK)
		wantErr(t, send(t, get(t, u, "X-Amz-Content-Sha256", emptyHash, "X-Amz-Request-Payer", "requester")), "AccessDenied", 403)
	})
}
