package auth

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// signedHeadersOf returns the SignedHeaders list of a SigV4 Authorization header.
func signedHeadersOf(t *testing.T, req *http.Request) string {
	t.Helper()
	a := req.Header.Get("Authorization")
	i := strings.Index(a, "SignedHeaders=")
	if i < 0 {
		t.Fatalf("no SignedHeaders in %q", a)
	}
	s := a[i+len("SignedHeaders="):]
	if j := strings.IndexByte(s, ','); j >= 0 {
		s = s[:j]
	}
	return s
}

// TestClientRequestShapes reproduces the request shapes of clients that
// cannot run here (see s3-compat-notes §1): which headers they sign and which
// they add unsigned after signing.
func TestClientRequestShapes(t *testing.T) {
	v, err := New(testConfig(false, nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	port := srv.URL[strings.LastIndexByte(srv.URL, ':'):]
	cases := []struct {
		name       string
		method     string
		path       string
		query      string
		host       string            // "" = the server address
		signed     map[string]string // headers present when signing
		unsigned   map[string]string // headers added after signing
		wantSigned string
	}{
		{
			name: "botocore GetObject over HTTP", method: "GET", path: "/bkt/dir/a%2Bb.txt",
			signed: map[string]string{"X-Amz-Checksum-Mode": "ENABLED"},
			unsigned: map[string]string{
				"User-Agent":            "Boto3/1.43.11 md/Botocore#1.43.11 ua/2.1 os/linux lang/python#3.11",
				"Accept-Encoding":       "identity",
				"Amz-Sdk-Invocation-Id": "7f1c2c0e-6a43-4f0b-9c2e-2f2f0f3e1b1a",
				"Amz-Sdk-Request":       "attempt=1",
				"X-Amzn-Trace-Id":       "Root=1-67891233-abcdef012345678912345678",
			},
			wantSigned: "host;x-amz-checksum-mode;x-amz-content-sha256;x-amz-date",
		},
		{
			name: "s3transfer ranged GET with If-Match", method: "GET", path: "/bkt/big.bin",
			signed: map[string]string{
				"Range":               "bytes=8388608-16777215",
				"If-Match":            `"9b2cf535f27731c974343645a3985328"`,
				"X-Amz-Checksum-Mode": "ENABLED",
			},
			unsigned:   map[string]string{"User-Agent": "aws-cli/1.45.11", "Accept-Encoding": "identity"},
			wantSigned: "host;if-match;range;x-amz-checksum-mode;x-amz-content-sha256;x-amz-date",
		},
		{
			name: "botocore ListObjectsV2", method: "GET", path: "/bkt", query: "list-type=2&prefix=&delimiter=%2F&encoding-type=url",
			unsigned:   map[string]string{"User-Agent": "Boto3/1.43.11"},
			wantSigned: "host;x-amz-content-sha256;x-amz-date",
		},
		{
			name: "botocore HeadBucket", method: "HEAD", path: "/bkt",
			wantSigned: "host;x-amz-content-sha256;x-amz-date",
		},
		{
			name: "DuckDB httpfs ranged read, vhost, Range unsigned", method: "GET", path: "/data/part-0.parquet",
			host:       "bkt.localhost" + port,
			unsigned:   map[string]string{"Range": "bytes=0-1", "User-Agent": "duckdb/v1.1.3(linux_amd64) httpfs"},
			wantSigned: "host;x-amz-content-sha256;x-amz-date",
		},
		{
			name: "DuckDB httpfs glob listing", method: "GET", path: "/",
			host: "bkt.localhost" + port, query: "encoding-type=url&list-type=2&prefix=data%2Fpart-",
			wantSigned: "host;x-amz-content-sha256;x-amz-date",
		},
		{
			name: "s3cmd location probe", method: "GET", path: "/bkt/", query: "location",
			unsigned:   map[string]string{"User-Agent": "s3cmd/2.3.0"},
			wantSigned: "host;x-amz-content-sha256;x-amz-date",
		},
	}
	for _, c := range cases {
		for _, payload := range []string{emptyHash, unsignedPL} {
			t.Run(c.name+"/"+payload[:8], func(t *testing.T) {
				req := newReq(t, srv, c.method, c.path, c.query)
				if c.host != "" {
					req.Host = c.host
				}
				for k, val := range c.signed {
					req.Header.Set(k, val)
				}
				awsSign(t, req, testAK, testSK, "us-east-1", payload, time.Now())
				if got := signedHeadersOf(t, req); got != c.wantSigned {
					t.Fatalf("test setup: SignedHeaders = %q, want the client's %q", got, c.wantSigned)
				}
				for k, val := range c.unsigned {
					req.Header.Set(k, val)
				}
				wantOK(t, send(t, req), testAK)
			})
		}
	}
}

// TestTransportEdgeCases covers what net/http does to a request on the way
// in: a default port in Host, Expect, and bodies on GET.
func TestTransportEdgeCases(t *testing.T) {
	v, err := New(testConfig(false, nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)

	t.Run("host with default port, signed without", func(t *testing.T) {
		req := newReq(t, srv, "GET", "/b/k", "")
		req.Host = "s3.example.com"
		awsSign(t, req, testAK, testSK, "us-east-1", emptyHash, time.Now())
		req.Host = "s3.example.com:80"
		wantOK(t, send(t, req), testAK)
	})
	t.Run("signed content-length on PUT (refused later by s3api, not here)", func(t *testing.T) {
		body := []byte("hello")
		req, err := http.NewRequest("PUT", srv.URL+"/b/k", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		awsSign(t, req, testAK, testSK, "us-east-1", otherHash, time.Now())
		if !strings.Contains(signedHeadersOf(t, req), "content-length") {
			t.Fatalf("test setup: content-length not signed: %s", signedHeadersOf(t, req))
		}
		wantOK(t, send(t, req), testAK)
	})
	t.Run("chunked transfer-encoding on GET", func(t *testing.T) {
		req := newReq(t, srv, "GET", "/b/k", "")
		req.Body = io.NopCloser(strings.NewReader("smuggled"))
		req.ContentLength = -1
		req.TransferEncoding = []string{"chunked"}
		awsSign(t, req, testAK, testSK, "us-east-1", emptyHash, time.Now())
		wantErr(t, send(t, req), "InvalidRequest", 400)
	})
	t.Run("content-length body on GET", func(t *testing.T) {
		req, err := http.NewRequest("GET", srv.URL+"/b/k", strings.NewReader("smuggled"))
		if err != nil {
			t.Fatal(err)
		}
		awsSign(t, req, testAK, testSK, "us-east-1", emptyHash, time.Now())
		wantErr(t, send(t, req), "InvalidRequest", 400)
	})
}
