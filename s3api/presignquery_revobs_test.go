package s3api_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/xml"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestPresignedAmzQueryParams: aws-sdk-go-v2's presigner moves the x-amz-*
// headers that need not stay headers into the presigned URL's query
// (x-amz-checksum-mode, x-amz-object-attributes,
// x-amz-optional-object-attributes, ...), and S3 applies them from there
// as if sent as headers. wharf read them only from headers: a presigned
// GET or HEAD with ChecksumMode ENABLED came back without
// x-amz-checksum-sha256 (so the SDK user's checksum validation had nothing
// to check), and a presigned GetObjectAttributes or ListObjectsV2 with
// RestoreStatus lost what it asked for.
func TestPresignedAmzQueryParams(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{})
	ctx := context.Background()
	ps := s3.NewPresignClient(newSDKClient(t, f.srv.URL, testAK, testSK))
	sum := sha256.Sum256(f.files["dir/a.bin"])
	want := base64.StdEncoding.EncodeToString(sum[:])

	get, err := ps.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("dir/a.bin"),
		ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	head, err := ps.PresignHeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String("dir/a.bin"),
		ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		method, url string
	}{{http.MethodGet, get.URL}, {http.MethodHead, head.URL}} {
		if !strings.Contains(strings.ToLower(p.url), "x-amz-checksum-mode=enabled") {
			t.Fatalf("the presigner did not put the checksum mode in the query: %s", p.url)
		}
		req, _ := http.NewRequest(p.method, p.url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("presigned %s with checksum mode: %d %s", p.method, resp.StatusCode, body)
		}
		if got := resp.Header.Get("x-amz-checksum-sha256"); got != want {
			t.Errorf("presigned %s with x-amz-checksum-mode=ENABLED in the query: x-amz-checksum-sha256 %q, want %q", p.method, got, want)
		}
	}

	// Operations the presign client has no method for, presigned with the
	// SDK's v4 signer, which hoists their x-amz-* headers the same way.
	presign := func(method, pathQuery, name, value string) string {
		t.Helper()
		req, _ := http.NewRequest(method, f.srv.URL+pathQuery, nil)
		q := req.URL.Query()
		q.Set("X-Amz-Expires", "900") // as the presign client sets it
		req.URL.RawQuery = q.Encode()
		req.Header.Set(name, value)
		u, _, err := v4.NewSigner().PresignHTTP(ctx, aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSK}, req,
			"UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.ToLower(u), strings.ToLower(name)+"=") {
			t.Fatalf("the signer did not put %s in the query: %s", name, u)
		}
		return u
	}
	fetch := func(u string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	code, body := fetch(presign("GET", "/"+testBucket+"/dir/a.bin?attributes", "X-Amz-Object-Attributes", "ObjectSize,Checksum"))
	var attrs struct {
		ObjectSize int64
		Checksum   struct{ ChecksumSHA256 string }
	}
	if code != 200 {
		t.Errorf("presigned GetObjectAttributes with x-amz-object-attributes in the query: %d %s", code, body)
	} else if err := xml.Unmarshal(body, &attrs); err != nil || attrs.ObjectSize != int64(len(f.files["dir/a.bin"])) || attrs.Checksum.ChecksumSHA256 != want {
		t.Errorf("presigned GetObjectAttributes: %+v (%v) from %s", attrs, err, body)
	}

	code, body = fetch(presign("GET", "/"+testBucket+"?list-type=2&prefix=hello", "X-Amz-Optional-Object-Attributes", "Bogus"))
	if code != 400 || !strings.Contains(string(body), "InvalidArgument") {
		t.Errorf("presigned ListObjectsV2 with a bad x-amz-optional-object-attributes in the query: %d %s, want 400 InvalidArgument as for the header", code, body)
	}
}
