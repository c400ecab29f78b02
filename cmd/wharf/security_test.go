package main

// End-to-end security tests of issue 7 through "wharf serve" (in-process,
// real listeners, archives written by our own writer): slow-loris and idle
// connections, oversized headers and URLs, request smuggling and header
// tricks, replayed presigned URLs, grants on every call, and the per-key
// concurrency limit. The auth package's own tests cover the signature rules
// request by request; these check that the wiring (http.Server limits,
// s3api, auth) holds them on the wire.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/auth"
)

const (
	secAK = "AKSECURITY"
	secSK = "security/secret+key"
	// emptySHA is the SHA-256 of an empty payload.
	emptySHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

func secRand(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// rawConn dials addr.
func rawConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin waits for the server to close c: it reads (discarding) until
// EOF or an error and returns how long that took from start, or fails after
// max.
func closedWithin(t *testing.T, c net.Conn, start time.Time, max time.Duration) time.Duration {
	t.Helper()
	if err := c.SetReadDeadline(start.Add(max)); err != nil {
		t.Fatal(err)
	}
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v", max)
	}
	return time.Since(start)
}

// signV4 signs req with aws-sdk-go-v2's SigV4 signer, as its S3 client does.
func signV4(t *testing.T, req *http.Request, ak, sk string) {
	t.Helper()
	req.Header.Set("X-Amz-Content-Sha256", emptySHA)
	err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk},
		req, emptySHA, "s3", "us-east-1", time.Now(), func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err != nil {
		t.Fatal(err)
	}
}

func sendReq(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func wantS3Error(t *testing.T, what string, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	if resp.StatusCode != status || (code != "" && !strings.Contains(string(body), "<Code>"+code+"</Code>")) {
		t.Errorf("%s: %d %s, want %d %s", what, resp.StatusCode, body, status, code)
	}
}

// TestServeSlowClients: a client dribbling its headers one byte at a time
// is cut off by ReadHeaderTimeout; an idle keep-alive connection is closed
// after IdleTimeout; ReadTimeout never cuts a response that takes longer
// than it to stream.
func TestServeSlowClients(t *testing.T) {
	big := secRand(1, 12<<20)
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n"), "big.bin": big})
	addr, _, _, _ := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", StoreURL: store, Archives: []serveArchive{{Name: "data", ManifestURL: man}},
		Anonymous: true, CacheBytes: 8 << 20,
		ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second, IdleTimeout: 1500 * time.Millisecond,
	})

	t.Run("slow-loris headers", func(t *testing.T) {
		c := rawConn(t, addr)
		start := time.Now()
		msg := "GET /data/a.txt HTTP/1.1\r\nHost: " + addr + "\r\nX-Pad: " + strings.Repeat("a", 40) + "\r\n\r\n"
		stopped := make(chan struct{})
		sent := make(chan int, 1)
		go func() {
			n := 0
			defer func() { sent <- n }()
			for ; n < len(msg); n++ {
				if _, err := c.Write([]byte{msg[n]}); err != nil {
					return
				}
				select {
				case <-stopped:
					return
				case <-time.After(250 * time.Millisecond):
				}
			}
		}()
		d := closedWithin(t, c, start, 8*time.Second)
		close(stopped)
		n := <-sent
		if d < 900*time.Millisecond {
			t.Errorf("closed after %v, before ReadHeaderTimeout", d)
		}
		if n >= len(msg) {
			t.Errorf("the whole request (%d bytes) went out before the cut-off", n)
		}
		t.Logf("slow-loris: connection closed after %v, %d of %d header bytes sent", d.Round(time.Millisecond), n, len(msg))
	})

	t.Run("idle keep-alive", func(t *testing.T) {
		c := rawConn(t, addr)
		if _, err := fmt.Fprintf(c, "GET /data/a.txt HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 || string(b) != "hello\n" || resp.Close {
			t.Fatalf("first request: %d %q %v close=%v", resp.StatusCode, b, err, resp.Close)
		}
		start := time.Now()
		if err := c.SetReadDeadline(start.Add(8 * time.Second)); err != nil {
			t.Fatal(err)
		}
		_, err = br.ReadByte()
		d := time.Since(start)
		if err == nil {
			t.Fatal("server sent bytes on an idle connection")
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("idle connection still open after 8s")
		}
		if d < 1200*time.Millisecond {
			t.Errorf("idle connection closed after %v, before IdleTimeout", d)
		}
		t.Logf("idle keep-alive closed after %v", d.Round(time.Millisecond))
	})

	t.Run("read timeout does not cut a long response", func(t *testing.T) {
		c := rawConn(t, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(32 << 10)
		}
		if _, err := fmt.Fprintf(c, "GET /data/big.bin HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReaderSize(c, 4096)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET big.bin: %v", err)
		}
		head := make([]byte, 4096)
		if _, err := io.ReadFull(resp.Body, head); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // past ReadTimeout (2s), the server is blocked writing
		rest, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(append(head, rest...), big) {
			t.Fatalf("response cut or wrong after ReadTimeout: %v, %d bytes", err, len(head)+len(rest))
		}
	})
}

// TestServeOversizedRequests: more than MaxHeaderBytes (64 KiB by default)
// of request line plus headers is answered 431, for a large header and for
// a large URL alike; a request under the limit is served.
func TestServeOversizedRequests(t *testing.T) {
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	addr, _, logs, _ := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", StoreURL: store, Archives: []serveArchive{{Name: "data", ManifestURL: man}},
		Anonymous: true, CacheBytes: 1 << 20,
	})
	for _, tc := range []struct {
		name   string
		path   string
		header string
		want   int
	}{
		{"32 KiB header is served", "/data/a.txt", strings.Repeat("x", 32<<10), 200},
		{"100 KiB header", "/data/a.txt", strings.Repeat("x", 100<<10), http.StatusRequestHeaderFieldsTooLarge},
		{"1 MiB header", "/data/a.txt", strings.Repeat("x", 1<<20), http.StatusRequestHeaderFieldsTooLarge},
		{"100 KiB URL", "/data/" + strings.Repeat("k", 100<<10), "", http.StatusRequestHeaderFieldsTooLarge},
		{"100 KiB query", "/data/a.txt?x=" + strings.Repeat("q", 100<<10), "", http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", "http://"+addr+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.header != "" {
				req.Header.Set("X-Big", tc.header)
			}
			resp, body := sendReq(t, req)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %.200s", resp.StatusCode, tc.want, body)
			}
			if tc.want == 200 && string(body) != "hello\n" {
				t.Fatalf("body %q", body)
			}
		})
	}
	if strings.Contains(logs.String(), strings.Repeat("k", 1000)) {
		t.Error("an oversized URL reached the access log (it must be refused before the handler)")
	}
}

// TestServeSmugglingAndHeaderTricks: framing and header tricks on the
// wire, through wharf serve with a key (no anonymous access).
func TestServeSmugglingAndHeaderTricks(t *testing.T) {
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n"), "secret.txt": []byte("secret\n")})
	addr, _, logs, _ := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", StoreURL: store, Archives: []serveArchive{{Name: "data", ManifestURL: man}},
		Keys: []auth.Key{{AccessKey: secAK, SecretKey: secSK}}, CacheBytes: 1 << 20,
	})
	base := "http://" + addr

	// A correctly signed request is served: the refusals below are about
	// what was changed, not about the signing.
	req, _ := http.NewRequest("GET", base+"/data/a.txt", nil)
	signV4(t, req, secAK, secSK)
	if resp, body := sendReq(t, req); resp.StatusCode != 200 || string(body) != "hello\n" {
		t.Fatalf("signed GET: %d %s", resp.StatusCode, body)
	}

	t.Run("signature stripped", func(t *testing.T) {
		req, _ := http.NewRequest("GET", base+"/data/a.txt", nil)
		signV4(t, req, secAK, secSK)
		req.Header.Del("Authorization")
		resp, body := sendReq(t, req)
		wantS3Error(t, "Authorization removed", resp, body, 403, "AccessDenied")

		req, _ = http.NewRequest("GET", base+"/data/a.txt", nil)
		signV4(t, req, secAK, secSK)
		req.Header.Set("Authorization", strings.Split(req.Header.Get("Authorization"), ", Signature=")[0])
		resp, body = sendReq(t, req)
		if resp.StatusCode == 200 {
			t.Errorf("Signature= removed from Authorization: served %s", body)
		}
	})

	t.Run("duplicate Authorization headers", func(t *testing.T) {
		req, _ := http.NewRequest("GET", base+"/data/a.txt", nil)
		signV4(t, req, secAK, secSK)
		good := req.Header.Get("Authorization")
		// The valid one first, then another; and the other order.
		for _, pair := range [][2]string{{good, "AWS " + secAK + ":forged"}, {"AWS " + secAK + ":forged", good}, {good, good}} {
			req.Header["Authorization"] = []string{pair[0], pair[1]}
			resp, body := sendReq(t, req)
			wantS3Error(t, "two Authorization headers", resp, body, 400, "AuthorizationHeaderMalformed")
		}
	})

	t.Run("host differs from the signed host", func(t *testing.T) {
		req, _ := http.NewRequest("GET", base+"/data/a.txt", nil)
		signV4(t, req, secAK, secSK)
		for _, host := range []string{"evil.example", "data.evil.example", "127.0.0.2:" + strings.Split(addr, ":")[1]} {
			req.Host = host
			resp, body := sendReq(t, req)
			wantS3Error(t, "Host "+host, resp, body, 403, "SignatureDoesNotMatch")
		}
	})

	// Raw-wire cases: each sends bytes, then reads every response the server
	// gives on that connection until it closes it.
	raw := func(t *testing.T, wire string) []*http.Response {
		t.Helper()
		c := rawConn(t, addr)
		if _, err := io.WriteString(c, wire); err != nil {
			t.Fatal(err)
		}
		if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		var out []*http.Response
		for {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("connection left open after %d responses", len(out))
				}
				return out
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body = io.NopCloser(bytes.NewReader(b))
			out = append(out, resp)
		}
	}
	// signedWire renders a signed GET of path as raw header lines.
	signedWire := func(t *testing.T, path string) string {
		req, _ := http.NewRequest("GET", base+path, nil)
		signV4(t, req, secAK, secSK)
		var b strings.Builder
		fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\n", path, addr)
		for k, vs := range req.Header {
			for _, v := range vs {
				fmt.Fprintf(&b, "%s: %s\r\n", k, v)
			}
		}
		return b.String()
	}
	smuggled := signedWire(t, "/data/secret.txt") + "\r\n"

	for _, tc := range []struct {
		name   string
		wire   string
		status int
		code   string
	}{
		{"chunked GET", signedWire(t, "/data/a.txt") + "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled, 400, "InvalidRequest"},
		{"Content-Length and Transfer-Encoding", signedWire(t, "/data/a.txt") +
			fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 5+len(smuggled)) + smuggled, 400, "InvalidRequest"},
		{"Content-Length body on GET", signedWire(t, "/data/a.txt") +
			fmt.Sprintf("Content-Length: %d\r\n\r\n", len(smuggled)) + smuggled, 400, "InvalidRequest"},
		{"two Content-Length values", signedWire(t, "/data/a.txt") + "Content-Length: 0\r\nContent-Length: 40\r\n\r\n" + smuggled, 400, ""},
		{"two Host headers", signedWire(t, "/data/a.txt") + "Host: evil.example\r\n\r\n" + smuggled, 400, ""},
		{"chunked PUT", "PUT /data/x HTTP/1.1\r\nHost: " + addr + "\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled, 403, "AccessDenied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resps := raw(t, tc.wire)
			if len(resps) != 1 {
				t.Fatalf("%d responses, want exactly one (the smuggled request must never be answered)", len(resps))
			}
			r := resps[0]
			b, _ := io.ReadAll(r.Body)
			if r.StatusCode != tc.status || (tc.code != "" && !strings.Contains(string(b), "<Code>"+tc.code+"</Code>")) {
				t.Fatalf("status %d %s, want %d %s", r.StatusCode, b, tc.status, tc.code)
			}
			if !r.Close {
				t.Error("response does not close the connection")
			}
		})
	}
	// The smuggled GETs never reached the handler.
	if strings.Contains(logs.String(), `"key":"secret.txt"`) {
		t.Errorf("a smuggled request was served:\n%s", logs.String())
	}
	// A clean keep-alive connection still carries several requests (the
	// closes above are specific to bodies).
	resps := raw(t, signedWire(t, "/data/a.txt")+"\r\n"+strings.Replace(signedWire(t, "/data/a.txt"), "HTTP/1.1\r\n", "HTTP/1.1\r\nConnection: close\r\n", 1)+"\r\n")
	if len(resps) != 2 || resps[0].StatusCode != 200 || resps[1].StatusCode != 200 {
		t.Errorf("two pipelined clean requests: %d responses", len(resps))
	}
}

// TestServePresignedReplayAfterExpiry: a presigned URL works until it
// expires and is refused (403 AccessDenied, "Request has expired") when
// replayed afterwards, unchanged.
func TestServePresignedReplayAfterExpiry(t *testing.T) {
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	addr, _, _, _ := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", StoreURL: store, Archives: []serveArchive{{Name: "data", ManifestURL: man}},
		Keys: []auth.Key{{AccessKey: secAK, SecretKey: secSK}}, CacheBytes: 1 << 20,
	})
	c := secClient("http://"+addr, secAK, secSK)
	signedAt := time.Now()
	p, err := s3.NewPresignClient(c, s3.WithPresignExpires(2*time.Second)).PresignGetObject(context.Background(),
		&s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("a.txt")})
	if err != nil {
		t.Fatal(err)
	}
	code, body := get(t, p.URL)
	if code != 200 || string(body) != "hello\n" {
		t.Fatalf("fresh presigned GET: %d %s", code, body)
	}
	// X-Amz-Date has one-second resolution: the URL is valid until at most
	// signedAt+2s.
	time.Sleep(time.Until(signedAt.Add(3100 * time.Millisecond)))
	for i := 0; i < 2; i++ {
		code, body = get(t, p.URL)
		if code != 403 || !strings.Contains(string(body), "<Code>AccessDenied</Code>") || !strings.Contains(string(body), "expired") {
			t.Fatalf("replay %d after expiry: %d %s", i, code, body)
		}
	}
	// Stretching the expiry in the URL breaks the signature instead.
	stretched := strings.Replace(p.URL, "X-Amz-Expires=2", "X-Amz-Expires=3600", 1)
	if stretched == p.URL {
		t.Fatalf("no X-Amz-Expires=2 in %s", p.URL)
	}
	code, body = get(t, stretched)
	if code != 403 || !strings.Contains(string(body), "<Code>SignatureDoesNotMatch</Code>") {
		t.Fatalf("stretched expiry: %d %s", code, body)
	}
}

func secClient(endpoint, ak, sk string) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(endpoint), UsePathStyle: true, Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(ak, sk, ""),
	})
}

// statusOf returns the HTTP status and S3 error code of an SDK error
// (0, "" for success).
func statusOf(err error) (int, string) {
	if err == nil {
		return 0, ""
	}
	status := -1
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return status, ae.ErrorCode()
	}
	return status, err.Error()
}

// TestServeGrantsEveryCall: a key granted bucket "a" is refused (403) on
// every call to bucket "b" and to a bucket that does not exist (no
// existence oracle), while the same calls on "a" succeed; ListBuckets shows
// only "a".
func TestServeGrantsEveryCall(t *testing.T) {
	files := map[string][]byte{"k.txt": []byte("granted\n"), "d/x.bin": secRand(3, 5000)}
	// Two buckets over one archive: the grant, not the content, differs.
	storeA, manA := packServeTree(t, files)
	addr, _, _, _ := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", StoreURL: storeA,
		Archives: []serveArchive{{Name: "a", ManifestURL: manA}, {Name: "b", ManifestURL: manA}},
		Keys: []auth.Key{
			{AccessKey: "AKONLYA", SecretKey: "sa", Buckets: []string{"a"}},
			{AccessKey: "AKALL", SecretKey: "sall"},
		},
		CacheBytes: 1 << 20,
	})
	ctx := context.Background()
	c := secClient("http://"+addr, "AKONLYA", "sa")
	calls := []struct {
		name string
		call func(bucket string) error
	}{
		{"ListObjects", func(b string) error {
			_, err := c.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String(b)})
			return err
		}},
		{"ListObjectsV2", func(b string) error {
			_, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(b), Delimiter: aws.String("/")})
			return err
		}},
		{"ListObjectVersions", func(b string) error {
			_, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(b)})
			return err
		}},
		{"HeadObject", func(b string) error {
			_, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("k.txt")})
			return err
		}},
		{"GetObject", func(b string) error {
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("k.txt")})
			if err != nil {
				return err
			}
			defer out.Body.Close()
			got, err := io.ReadAll(out.Body)
			if err == nil && !bytes.Equal(got, files["k.txt"]) {
				err = fmt.Errorf("wrong bytes %q", got)
			}
			return err
		}},
		{"GetObject missing key", func(b string) error {
			_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("nope")})
			if code, _ := statusOf(err); code == 404 && b == "a" {
				return nil // the granted bucket says 404; the others must say 403
			}
			return err
		}},
		{"HeadBucket", func(b string) error {
			_, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b)})
			return err
		}},
		{"GetBucketLocation", func(b string) error {
			_, err := c.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String(b)})
			return err
		}},
		{"GetBucketAcl", func(b string) error {
			_, err := c.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: aws.String(b)})
			return err
		}},
		{"GetObjectAcl", func(b string) error {
			_, err := c.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: aws.String(b), Key: aws.String("k.txt")})
			return err
		}},
		{"GetBucketVersioning", func(b string) error {
			_, err := c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(b)})
			return err
		}},
		{"GetObjectTagging", func(b string) error {
			_, err := c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(b), Key: aws.String("k.txt")})
			return err
		}},
	}
	for _, call := range calls {
		if err := call.call("a"); err != nil {
			t.Errorf("%s on the granted bucket: %v", call.name, err)
		}
		for _, b := range []string{"b", "no-such-bucket"} {
			status, code := statusOf(call.call(b))
			if status != 403 || (code != "AccessDenied" && code != "Forbidden") {
				t.Errorf("%s on %s: status %d code %q, want 403 AccessDenied", call.name, b, status, code)
			}
		}
	}
	out, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range out.Buckets {
		names = append(names, aws.ToString(b.Name))
	}
	if strings.Join(names, ",") != "a" {
		t.Errorf("ListBuckets for a key granted a: %v", names)
	}
	// The ungranted key sees both (the grant list, not the catalog, limits).
	out, err = secClient("http://"+addr, "AKALL", "sall").ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil || len(out.Buckets) != 2 {
		t.Errorf("ListBuckets for an all-bucket key: %v, %d buckets", err, len(out.Buckets))
	}
}

// TestServeConcurrencyLimit: --max-inflight-per-key reaches the handler:
// with 1, a key holding one stalled response gets 503 SlowDown for its
// next request (counted on /metrics), another key is served, and after the
// stalled body is read to its end (and compared) the key is served again.
func TestServeConcurrencyLimit(t *testing.T) {
	big := secRand(4, 12<<20)
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n"), "big.bin": big})
	addr, admin, _, _ := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: store,
		Archives:   []serveArchive{{Name: "data", ManifestURL: man}},
		Keys:       []auth.Key{{AccessKey: secAK, SecretKey: secSK}, {AccessKey: "AKOTHER", SecretKey: "other"}},
		CacheBytes: 8 << 20, MaxInflightPerKey: 1,
	})
	// Hold the key's only slot: a signed GET whose body we stop reading.
	c := rawConn(t, addr)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(32 << 10)
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/data/big.bin", nil)
	signV4(t, req, secAK, secSK)
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("holder: %v", err)
	}
	head := make([]byte, 4096)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}

	get1 := func(ak, sk string) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/data/a.txt", nil)
		signV4(t, req, ak, sk)
		return sendReq(t, req)
	}
	r, b := get1(secAK, secSK)
	wantS3Error(t, "second request of a busy key", r, b, 503, "SlowDown")
	if r, b := get1("AKOTHER", "other"); r.StatusCode != 200 || string(b) != "hello\n" {
		t.Errorf("another key: %d %s", r.StatusCode, b)
	}
	_, metrics := get(t, "http://"+admin+"/metrics")
	for _, want := range []string{"wharf_throttled_requests_total 1", `wharf_requests_total{code="503",op="GetObject"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	rest, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(append(head, rest...), big) {
		t.Fatalf("held body: %v, equal %v", err, bytes.Equal(append(head, rest...), big))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, b := get1(secAK, secSK)
		if r.StatusCode == 200 && string(b) == "hello\n" {
			break
		}
		if r.StatusCode != 503 || time.Now().After(deadline) {
			t.Fatalf("after the held body finished: %d %s", r.StatusCode, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeKeysConfined (issue 12): an upload under a --discover prefix
// whose manifest names an object outside its own upload tree (another
// tenant's file, through an emptied prefix field) is not served: discovery
// skips it with a reason naming the key, and the object is never read.
// With --allow-key-prefix for that prefix it is served.
func TestServeKeysConfined(t *testing.T) {
	dir := t.TempDir()
	secret := []byte("tenant b's secret\n")
	secretPath := filepath.Join(dir, "lake", "tenant-b", "secret.txt")
	if err := os.MkdirAll(filepath.Dir(secretPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretPath, secret, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(map[string][]byte{"ok.txt": []byte("ok\n")}, time.Unix(1700000000, 0)),
		cargopack.Options{Bucket: "lake", Prefix: "tenant-a", UploadID: "20260101-leak", FrameSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	// The hostile edit: prefix emptied, keys rewritten from the bucket
	// root, and a direct-upload entry for the other tenant's object.
	m := res.Manifest
	for i := range m.Chunks {
		m.Chunks[i].S3Key = "tenant-a/" + strings.TrimPrefix(m.Chunks[i].S3Key, "/")
	}
	for i := range m.Files {
		m.Files[i].S3Key = "tenant-a/" + strings.TrimPrefix(m.Files[i].S3Key, "/")
	}
	m.Prefix = ""
	sum := sha256.Sum256(secret)
	m.Files = append(m.Files, manifest.FileEntry{Path: m.SourcePath + "/leak.txt", Size: int64(len(secret)),
		ModTime: time.Unix(1700000000, 0), S3Key: "tenant-b/secret.txt", Checksum: hex.EncodeToString(sum[:])})
	js, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lake", filepath.FromSlash(res.ManifestKey)), js, 0o644); err != nil {
		t.Fatal(err)
	}
	bucket := catalog.BucketName("20260101-leak")

	addr, admin, logs, _ := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: "file://" + dir,
		Discover: []string{"s3://lake/tenant-a"}, Anonymous: true, CacheBytes: 1 << 20,
	})
	// The archive is refused whole: its bucket is listed and every
	// request answers the refusal, never the other tenant's bytes. The
	// client is told the bucket and the kind of failure; the key and the
	// manifest are in the log and on /-/archives (issue 20, finding 9).
	resp, body := sendReq(t, mustReq(t, "GET", "http://"+addr+"/"+bucket+"/leak.txt"))
	wantS3Error(t, "GET of the leaking key", resp, body, 500, "InternalError")
	if !strings.Contains(string(body), "bucket "+bucket+" could not be opened") || strings.Contains(string(body), "tenant-b/secret.txt") ||
		strings.Contains(string(body), res.ManifestKey) || bytes.Contains(body, secret) {
		t.Errorf("the refusal names the store's keys to the client, or not the bucket: %s", body)
	}
	waitReady(t, admin)
	resp, body = sendReq(t, mustReq(t, "GET", "http://"+admin+"/-/archives"))
	if resp.StatusCode != 200 || !strings.Contains(string(body), `tenant-b/secret.txt`) || !strings.Contains(string(body), "outside the archive") ||
		!strings.Contains(string(body), `"state": "failed"`) {
		t.Fatalf("/-/archives does not name the refused key: %s", body)
	}
	if !strings.Contains(logs.String(), "tenant-b/secret.txt") {
		t.Error("the refusal is not logged with the key")
	}

	addr2, _, _, _ := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", StoreURL: "file://" + dir, Discover: []string{"s3://lake/tenant-a"},
		Anonymous: true, CacheBytes: 1 << 20, Read: readOptions{AllowKeyPrefixes: []string{"tenant-b/"}},
	})
	resp, body = sendReq(t, mustReq(t, "GET", "http://"+addr2+"/"+bucket+"/leak.txt"))
	if resp.StatusCode != 200 || !bytes.Equal(body, secret) {
		t.Fatalf("with --allow-key-prefix tenant-b/: %d %q", resp.StatusCode, body)
	}
}

// TestServeAnonymousOverrides (issue 12): an unsigned GET may not set
// response headers (response-content-type=text/html would let anyone serve
// archived content as HTML from wharf's origin): 400 InvalidRequest, as S3
// answers (signed requests may set them: s3api tests).
func TestServeAnonymousOverrides(t *testing.T) {
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("<script>alert(1)</script>\n")})
	addr, _, _, _ := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", StoreURL: store, Archives: []serveArchive{{Name: "data", ManifestURL: man}},
		Anonymous: true, CacheBytes: 1 << 20,
	})
	for _, q := range []string{"response-content-type=text/html", "response-content-disposition=inline", "response-cache-control=x"} {
		resp, body := sendReq(t, mustReq(t, "GET", "http://"+addr+"/data/a.txt?"+q))
		wantS3Error(t, q, resp, body, 400, "InvalidRequest")
		if ct := resp.Header.Get("Content-Type"); strings.Contains(ct, "text/html") {
			t.Fatalf("%s: Content-Type %q", q, ct)
		}
	}
	resp, _ := sendReq(t, mustReq(t, "GET", "http://"+addr+"/data/a.txt"))
	if resp.StatusCode != 200 || strings.Contains(resp.Header.Get("Content-Type"), "html") {
		t.Fatalf("plain anonymous GET: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func mustReq(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
