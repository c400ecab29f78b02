package s3api_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
)

func itoa(n int) string { return strconv.Itoa(n) }

// maxPages caps every paging loop of the client tests: a continuation bug
// that repeats a page fails the test instead of hanging CI.
const maxPages = 10_000

func startServer(t testing.TB, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// newSDKClient is a real aws-sdk-go-v2 S3 client, path-style, SigV4 signed.
func newSDKClient(t testing.TB, endpoint, ak, sk string) *s3.Client {
	t.Helper()
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider(ak, sk, ""),
	})
}

func sdkListBuckets(t testing.TB, c *s3.Client) []string {
	t.Helper()
	out, err := c.ListBuckets(context.Background(), &s3.ListBucketsInput{})
	if err != nil {
		t.Fatalf("ListBuckets: %v", err)
	}
	var names []string
	for _, b := range out.Buckets {
		names = append(names, aws.ToString(b.Name))
	}
	return names
}

// sdkListErr lists bucket and returns the S3 error code ("" = success).
func sdkListErr(c *s3.Client, bucket string) string {
	_, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err == nil {
		return ""
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return err.Error()
}

// Checklist 5, 9, 11, 14, 15, 17, 24, 29 with aws-sdk-go-v2: listing
// (paginated, url-encoded keys), HEAD, full GET with checksum validation,
// ranged GET, and the transfer manager's parallel ranged and part downloads.
func TestClientAWSSDK(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{})
	c := newSDKClient(t, f.srv.URL, testAK, testSK)
	ctx := context.Background()

	if names := sdkListBuckets(t, c); strings.Join(names, ",") != testBucket {
		t.Fatalf("buckets %v", names)
	}
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(testBucket)}); err != nil {
		t.Fatalf("HeadBucket: %v", err)
	}
	var listed []string
	etags := map[string]string{}
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(testBucket), MaxKeys: aws.Int32(3), EncodingType: "url"})
	for pages := 0; p.HasMorePages(); pages++ {
		if pages == maxPages {
			t.Fatalf("ListObjectsV2: still truncated after %d pages", maxPages)
		}
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("ListObjectsV2: %v", err)
		}
		for _, o := range page.Contents {
			// The SDK does not decode url-encoded keys itself.
			k, err := urlDecode(aws.ToString(o.Key))
			if err != nil {
				t.Fatal(err)
			}
			listed = append(listed, k)
			etags[k] = aws.ToString(o.ETag)
		}
	}
	var want []string
	for k := range f.files {
		want = append(want, k)
	}
	sort.Strings(want)
	if strings.Join(listed, "|") != strings.Join(want, "|") {
		t.Fatalf("listed %q\nwant %q", listed, want)
	}
	for key, src := range f.files {
		h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("HeadObject %q: %v", key, err)
		}
		if aws.ToInt64(h.ContentLength) != int64(len(src)) || aws.ToString(h.ETag) != etags[key] {
			t.Fatalf("HeadObject %q: %d bytes ETag %s", key, aws.ToInt64(h.ContentLength), aws.ToString(h.ETag))
		}
		g, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key), ChecksumMode: "ENABLED"})
		if err != nil {
			t.Fatalf("GetObject %q: %v", key, err)
		}
		body, err := io.ReadAll(g.Body) // the SDK validates x-amz-checksum-sha256 at EOF
		g.Body.Close()
		if err != nil || !bytes.Equal(body, src) {
			t.Fatalf("GetObject %q: err %v, equal %v", key, err, bytes.Equal(body, src))
		}
		if len(src) > 10 {
			g, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key),
				Range: aws.String("bytes=3-9"), IfMatch: aws.String(etags[key])})
			if err != nil {
				t.Fatalf("ranged GetObject %q: %v", key, err)
			}
			body, _ := io.ReadAll(g.Body)
			g.Body.Close()
			if !bytes.Equal(body, src[3:10]) || aws.ToString(g.ContentRange) != "bytes 3-9/"+itoa(len(src)) {
				t.Fatalf("ranged GetObject %q: %q %s", key, body, aws.ToString(g.ContentRange))
			}
		}
	}
	_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("dir/nope")})
	var nsk interface{ ErrorCode() string }
	if !errors.As(err, &nsk) || nsk.ErrorCode() != "NoSuchKey" {
		t.Fatalf("missing key: %v", err)
	}

	// Parallel ranged download with If-Match, as s3transfer does, then the
	// transfer manager's default part download (partNumber=1: one part).
	big := f.files["big.bin"]
	for _, mode := range []tmtypes.GetObjectType{tmtypes.GetObjectRanges, tmtypes.GetObjectParts} {
		before := strings.Count(f.logs.String(), `"range":"bytes=`)
		tm := transfermanager.New(c, func(o *transfermanager.Options) {
			o.GetObjectType, o.PartSizeBytes, o.Concurrency = mode, 1<<20, 4
		})
		buf := tmtypes.NewWriteAtBuffer(nil)
		out, err := tm.DownloadObject(ctx, &transfermanager.DownloadObjectInput{Bucket: aws.String(testBucket),
			Key: aws.String("big.bin"), WriterAt: buf, IfMatch: aws.String(etags["big.bin"])})
		if err != nil || aws.ToInt64(out.ContentLength) != int64(len(big)) || !bytes.Equal(buf.Bytes(), big) {
			t.Fatalf("transfermanager %s: err=%v, equal %v", mode, err, bytes.Equal(buf.Bytes(), big))
		}
		// The ranged mode really ranged: one GET per MiB.
		if ranged := strings.Count(f.logs.String(), `"range":"bytes=`) - before; mode == tmtypes.GetObjectRanges && ranged < len(big)>>20 {
			t.Fatalf("transfermanager ranged download sent %d ranged GETs, want >= %d", ranged, len(big)>>20)
		}
	}

	// Checklist 23: response-* overrides on a presigned GET.
	ps := s3.NewPresignClient(c)
	pr, err := ps.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("a b"),
		ResponseContentType: aws.String("text/csv"), ResponseContentDisposition: aws.String("attachment")})
	if err != nil {
		t.Fatal(err)
	}
	presp, err := http.Get(pr.URL)
	if err != nil {
		t.Fatal(err)
	}
	pbody, _ := io.ReadAll(presp.Body)
	presp.Body.Close()
	if presp.StatusCode != 200 || string(pbody) != "space" || presp.Header.Get("Content-Type") != "text/csv" || presp.Header.Get("Content-Disposition") != "attachment" {
		t.Errorf("presigned GET: %d %q %v", presp.StatusCode, pbody, presp.Header)
	}

	// Wrong secret and unknown key come back as the auth error codes.
	bad := newSDKClient(t, f.srv.URL, testAK, "wrong")
	if code := sdkListErr(bad, testBucket); code != "SignatureDoesNotMatch" {
		t.Errorf("wrong secret: %s", code)
	}
	unknown := newSDKClient(t, f.srv.URL, "AKUNKNOWN", testSK)
	if code := sdkListErr(unknown, testBucket); code != "InvalidAccessKeyId" {
		t.Errorf("unknown key: %s", code)
	}
	// A write through the SDK is refused.
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(testBucket), Key: aws.String("new"), Body: strings.NewReader("x")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDenied" {
		t.Errorf("PutObject: %v", err)
	}
}

// urlDecode undoes encoding-type=url the way botocore does (unquote_plus).
func urlDecode(s string) (string, error) {
	return queryUnescape(s)
}

// Checklist 2, 5, 9, 11, 14, 15 with minio-go v7: GetBucketLocation first,
// ListObjectsV2 with encoding-type=url and fetch-owner, Stat, GetObject +
// ReadAt (If-Match on later reads), FGetObject, BucketExists.
func TestClientMinioGo(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{})
	host := strings.TrimPrefix(f.srv.URL, "http://")
	mc, err := minio.New(host, &minio.Options{Creds: miniocreds.NewStaticV4(testAK, testSK, ""), Secure: false})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ok, err := mc.BucketExists(ctx, testBucket)
	if err != nil || !ok {
		t.Fatalf("BucketExists: %v %v", ok, err)
	}
	ok, err = mc.BucketExists(ctx, "nope")
	if err != nil || ok {
		t.Fatalf("BucketExists(nope): %v %v", ok, err)
	}
	// minio-go pages inside ListObjects; a bounded count of entries stands
	// in for the page cap, and cancelling stops its paging goroutine.
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var keys []string
	for o := range mc.ListObjects(lctx, testBucket, minio.ListObjectsOptions{Recursive: true, MaxKeys: 4}) {
		if o.Err != nil {
			t.Fatalf("ListObjects: %v", o.Err)
		}
		if len(keys) == 4*maxPages {
			t.Fatalf("ListObjects: more than %d entries (%d pages of 4): paging does not end", len(keys), maxPages)
		}
		keys = append(keys, o.Key)
		if src := f.files[o.Key]; o.Size != int64(len(src)) {
			t.Errorf("%q: listed size %d, source %d", o.Key, o.Size, len(src))
		}
	}
	if len(keys) != len(f.files) {
		t.Fatalf("minio listed %d keys (%q), want %d", len(keys), keys, len(f.files))
	}
	var dirs []string
	for o := range mc.ListObjects(lctx, testBucket, minio.ListObjectsOptions{Prefix: "dir/"}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if len(dirs) == 1000*maxPages {
			t.Fatalf("ListObjects(dir/): more than %d entries: paging does not end", len(dirs))
		}
		dirs = append(dirs, o.Key)
	}
	if strings.Join(dirs, ",") != "dir/a.bin,dir/sub/" {
		t.Errorf("non-recursive dir/: %v", dirs)
	}
	for key, src := range f.files {
		st, err := mc.StatObject(ctx, testBucket, key, minio.StatObjectOptions{})
		if err != nil || st.Size != int64(len(src)) {
			t.Fatalf("StatObject %q: %v size %d", key, err, st.Size)
		}
		obj, err := mc.GetObject(ctx, testBucket, key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(src) > 20 {
			p := make([]byte, 10)
			if _, err := obj.ReadAt(p, 7); err != nil || !bytes.Equal(p, src[7:17]) {
				t.Fatalf("ReadAt %q: %v", key, err)
			}
			if _, err := obj.ReadAt(p, int64(len(src)-10)); err != nil && err != io.EOF || !bytes.Equal(p, src[len(src)-10:]) {
				t.Fatalf("second ReadAt %q: %v", key, err)
			}
		}
		obj.Close()
	}
	dst := filepath.Join(t.TempDir(), "big.bin")
	if err := mc.FGetObject(ctx, testBucket, "big.bin", dst, minio.GetObjectOptions{}); err != nil {
		t.Fatalf("FGetObject: %v", err)
	}
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, f.files["big.bin"]) {
		t.Fatalf("FGetObject content differs: %v", err)
	}
	_, err = mc.StatObject(ctx, testBucket, "dir/nope", minio.StatObjectOptions{})
	if minio.ToErrorResponse(err).StatusCode != 404 {
		t.Fatalf("Stat missing: %v", err)
	}
}
