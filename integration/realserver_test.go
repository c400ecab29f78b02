package integration

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// TestUnknownAccessKey (issue 25): wharf given an access key the store
// does not know tells the user the server's own error code and message,
// never "manifest ... not found (check the URL ...)". versitygw answers an
// unknown key with 404 XAdminUserNotFound (S3 would say 403
// InvalidAccessKeyId); both `wharf ls` and `wharf serve`'s start-up must
// say so. gofakes3 checks no credentials, so against it there is nothing
// to test: scripts/test.sh runs this test against versitygw.
func TestUnknownAccessKey(t *testing.T) {
	if s3BackendName() == "gofakes3" {
		t.Skip("gofakes3 checks no credentials; scripts/test.sh runs this test with WHARF_S3_BACKEND=versitygw")
	}
	env := suite.serverEnv()
	for i, kv := range env {
		if strings.HasPrefix(kv, "AWS_ACCESS_KEY_ID=") {
			env[i] = "AWS_ACCESS_KEY_ID=WHARFUNKNOWNKEY0000"
		}
	}
	store := []string{"--store", "s3://", "--s3-endpoint", suite.s3url, "--s3-path-style", "--s3-region", "us-east-1"}
	manifest := suite.archives["main"].manifestURL
	check := func(what, out string) {
		t.Helper()
		if strings.Contains(out, "not found (check the URL") {
			t.Errorf("%s blames the URL for an unknown access key:\n%s", what, tail(out, 10))
		}
		want := "InvalidAccessKeyId"
		if s3BackendName() == "versitygw" {
			want = "XAdminUserNotFound"
		}
		if !strings.Contains(out, want) {
			t.Errorf("%s does not name the server's code %s:\n%s", what, want, tail(out, 10))
		}
	}
	_, stderr, err := runErr(env, "", suite.bin, append(append([]string{"ls"}, store...), manifest)...)
	if err == nil {
		t.Fatal("wharf ls with an unknown access key succeeded")
	}
	check("wharf ls", stderr)

	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--anonymous"}, store...)
	args = append(args, "--archive", "main="+manifest)
	stdout, stderr, err := runErr(env, "", suite.bin, args...)
	if err == nil {
		t.Fatal("wharf serve with an unknown access key started")
	}
	check("wharf serve", stdout+stderr)
}

// TestReplacedChunkEndToEnd (issue 25): a chunk overwritten on the real
// S3 server after wharf read from it is refused by ETag pinning (the
// server answers the ranged GET's If-Match with 412) and the client is
// told 409 ObjectChanged with the chunk's key, not 500 "Please try again".
//
// Not parallel: the suite books listings by start-up window, and
// overlapping start-ups would be booked twice.
func TestReplacedChunkEndToEnd(t *testing.T) {
	ctx := context.Background()
	big := bytes.Repeat([]byte("pinned by etag "), 70000) // ~1 MiB, many 16 KiB frames
	res, err := cargopack.Write(ctx, cargopack.S3Sink(suite.s3client), cargopack.FromMap(map[string][]byte{"big.bin": big}, treeMTime),
		cargopack.Options{Bucket: srcBucket, Prefix: "replaced", UploadID: "up-replaced", SourcePath: "/srv/replaced", FrameSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := startWharf(suite.bin, "replaced", []string{"serve", "--listen", "127.0.0.1:0", "--store", "s3://",
		"--s3-endpoint", suite.s3url, "--s3-path-style", "--s3-region", "us-east-1", "--anonymous",
		"--archive", "rep=s3://" + srcBucket + "/" + res.ManifestKey}, suite.serverEnv())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	get := func(rng string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.url+"/rep/big.bin", nil)
		req.Header.Set("Range", rng)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if resp, b := get("bytes=0-99"); resp.StatusCode != http.StatusPartialContent || !bytes.Equal(b, big[:100]) {
		t.Fatalf("first read: %d, %d bytes", resp.StatusCode, len(b))
	}
	for _, key := range res.ObjectKeys {
		out, err := suite.s3client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(srcBucket), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(out.Body)
		out.Body.Close()
		b[len(b)-1] ^= 0xff // another object of the same size: another ETag
		if _, err := suite.s3client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(srcBucket), Key: aws.String(key),
			Body: bytes.NewReader(b)}); err != nil {
			t.Fatal(err)
		}
	}
	resp, b := get("bytes=900000-900099")
	if resp.StatusCode != http.StatusConflict || !bytes.Contains(b, []byte("<Code>ObjectChanged</Code>")) ||
		!bytes.Contains(b, []byte("s3://"+srcBucket+"/"+res.ObjectKeys[0])) || bytes.Contains(b, []byte("try again.")) {
		t.Fatalf("read after the chunk was replaced: %d\n%s\nwant 409 ObjectChanged naming s3://%s/%s", resp.StatusCode, b, srcBucket, res.ObjectKeys[0])
	}
}
