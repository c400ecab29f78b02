package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	minio "github.com/minio/minio-go/v7"
	miniocred "github.com/minio/minio-go/v7/pkg/credentials"
	"golang.org/x/sync/errgroup"
)

// sdkClient is an aws-sdk-go-v2 client for srv (path-style, no retries so
// a server error is never hidden, default checksum validation on).
func sdkClient(srv *wharfServer, secret string) *s3.Client {
	o := s3.Options{
		BaseEndpoint:     aws.String(srv.url),
		Region:           "us-east-1",
		UsePathStyle:     true,
		RetryMaxAttempts: 1,
		Credentials:      aws.AnonymousCredentials{},
	}
	if srv.accessKey != "" {
		o.Credentials = credentials.NewStaticCredentialsProvider(srv.accessKey, secret, "")
	}
	return s3.New(o)
}

// byteRange is one ranged read: the Range header and the bytes it selects.
type byteRange struct {
	header     string
	start, end int64 // [start, end)
}

// rangesFor returns ranges over a file of size n that cross frame (64 KiB,
// 256 KiB, 1 MiB), part (8 MiB) and chunk boundaries, plus the edge forms.
func rangesFor(n int64) []byteRange {
	var rs []byteRange
	add := func(a, b int64) { // inclusive a-b, clamped like S3
		if a >= n || a < 0 || b < a {
			return
		}
		e := min(b+1, n)
		rs = append(rs, byteRange{fmt.Sprintf("bytes=%d-%d", a, b), a, e})
	}
	add(0, 0)
	add(0, n-1)
	add(n-1, n-1)
	add(0, n+1000) // end past EOF is clamped
	for _, b := range []int64{64 << 10, 256 << 10, 1 << 20, 4 << 20, 8 << 20, 16 << 20} {
		add(b-7, b+7)
		add(b-1, b)
	}
	add(n/3, n/3+3<<20)
	if n > 10 {
		rs = append(rs, byteRange{"bytes=-10", n - 10, n})
	}
	if n > 12345 {
		rs = append(rs, byteRange{fmt.Sprintf("bytes=%d-", n-12345), n - 12345, n})
	}
	return rs
}

// sourceBytes reads bucket/key from the source tree.
func sourceBytes(t *testing.T, bucket, key string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(suite.archives[bucket].dir, filepath.FromSlash(key)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// largeFiles are the files ranged reads and parallel downloads focus on.
var largeFiles = [][2]string{
	{"main", "big/unsplit.bin"},
	{"split", "huge.bin"},
	{"media", "image-1.png"},
	{"main", "nested/x/y/noise.bin"},
	{"direct", "sub/deeper/d3.bin"},
	{"main", "dups/copy-b.txt"},
	{"inc", "change.txt"},
}

func TestAWSSDKGoV2(t *testing.T) {
	for _, srv := range suite.servers() {
		t.Run(srv.name, func(t *testing.T) {
			c := sdkClient(srv, srv.secretKey)
			ctx := context.Background()

			t.Run("ListBuckets", func(t *testing.T) {
				out, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, b := range out.Buckets {
					got = append(got, aws.ToString(b.Name))
				}
				if want := suite.bucketNames(); strings.Join(got, ",") != strings.Join(want, ",") {
					t.Fatalf("ListBuckets = %q, want %q", got, want)
				}
				t.Logf("aws-sdk-go-v2 (%s): ListBuckets lists %d archives", srv.name, len(got))
			})

			for _, name := range suite.bucketNames() {
				a := suite.archives[name]
				t.Run("list/"+name, func(t *testing.T) {
					etags := sdkListAll(t, c, a, 700, "")
					sdkListAll(t, c, a, 1000, "url")
					sdkListV1(t, c, a, 333)
					for _, p := range []string{"", "nested/", "names/", "many/", "sub/", "photos/2024/"} {
						sdkDelimited(t, c, a, p)
					}
					// HEAD a sample (every key except the 2,100-file directory).
					n := 0
					for _, k := range sortedKeys(a.keys) {
						if strings.HasPrefix(k, "many/f") && !strings.HasSuffix(k, "0.txt") {
							continue
						}
						h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &name, Key: aws.String(k)})
						if err != nil {
							t.Fatalf("HeadObject %s/%s: %v", name, k, err)
						}
						if aws.ToInt64(h.ContentLength) != a.keys[k] || aws.ToString(h.ETag) != etags[k] {
							t.Fatalf("HeadObject %s/%s: size %d etag %s, want %d and listing's %s",
								name, k, aws.ToInt64(h.ContentLength), aws.ToString(h.ETag), a.keys[k], etags[k])
						}
						n++
					}
					t.Logf("aws-sdk-go-v2 (%s): %s: v2 pages (plain and encoding-type=url), v1 marker pages, delimiter roll-ups and %d HEADs match the source", srv.name, name, n)
				})
				t.Run("get/"+name, func(t *testing.T) {
					var total atomic.Int64
					forEachKey(t, a, func(key string) error {
						out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(name), Key: aws.String(key)})
						if err != nil {
							return fmt.Errorf("GetObject %s/%s: %w", name, key, err)
						}
						defer out.Body.Close()
						b, err := io.ReadAll(out.Body)
						if err != nil {
							return fmt.Errorf("GetObject %s/%s body: %w", name, key, err)
						}
						if err := sameAsSource(name, key, b); err != nil {
							return err
						}
						total.Add(int64(len(b)))
						return nil
					})
					t.Logf("aws-sdk-go-v2 (%s): GetObject of all %d keys of %s: %d bytes identical", srv.name, len(a.keys), name, total.Load())
				})
			}

			t.Run("ranges", func(t *testing.T) {
				n := 0
				for _, bf := range largeFiles {
					src := sourceBytes(t, bf[0], bf[1])
					for _, r := range rangesFor(int64(len(src))) {
						out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bf[0]), Key: aws.String(bf[1]), Range: aws.String(r.header)})
						if err != nil {
							t.Fatalf("GetObject %s/%s Range %s: %v", bf[0], bf[1], r.header, err)
						}
						b, err := io.ReadAll(out.Body)
						out.Body.Close()
						if err != nil {
							t.Fatalf("GetObject %s/%s Range %s body: %v", bf[0], bf[1], r.header, err)
						}
						wantCR := fmt.Sprintf("bytes %d-%d/%d", r.start, r.end-1, len(src))
						if cr := aws.ToString(out.ContentRange); cr != wantCR {
							t.Fatalf("GetObject %s/%s Range %s: Content-Range %q, want %q", bf[0], bf[1], r.header, cr, wantCR)
						}
						assertSameBytes(t, "aws-sdk-go-v2", bf[0]+"/"+bf[1]+" "+r.header, b, src[r.start:r.end])
						n++
					}
				}
				t.Logf("aws-sdk-go-v2 (%s): %d ranged GETs across frame, part and chunk boundaries match the source", srv.name, n)
			})

			t.Run("transfermanager.DownloadObject", func(t *testing.T) {
				tm := transfermanager.New(c, func(o *transfermanager.Options) {
					o.GetObjectType = tmtypes.GetObjectRanges
					o.PartSizeBytes = 1 << 20
					o.Concurrency = 8
				})
				for _, bf := range largeFiles[:2] {
					src := sourceBytes(t, bf[0], bf[1])
					buf := make(bufferAt, len(src))
					out, err := tm.DownloadObject(ctx, &transfermanager.DownloadObjectInput{Bucket: aws.String(bf[0]), Key: aws.String(bf[1]), WriterAt: buf})
					if err != nil {
						t.Fatalf("DownloadObject %s/%s: %v", bf[0], bf[1], err)
					}
					if n := aws.ToInt64(out.ContentLength); n != int64(len(src)) {
						t.Fatalf("DownloadObject %s/%s: %d bytes, want %d", bf[0], bf[1], n, len(src))
					}
					assertSameBytes(t, "aws-sdk-go-v2 transfermanager", bf[0]+"/"+bf[1], buf, src)
					t.Logf("aws-sdk-go-v2 (%s): transfermanager.DownloadObject (1 MiB ranges, 8 in parallel) of %s/%s: %d bytes identical", srv.name, bf[0], bf[1], len(src))
				}
			})

			t.Run("errors", func(t *testing.T) {
				_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("main"), Key: aws.String("no/such/key.txt")})
				var nsk *types.NoSuchKey
				if !errors.As(err, &nsk) {
					t.Fatalf("GetObject of a missing key: %v, want NoSuchKey", err)
				}
				_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("main"), Key: aws.String("nested")})
				if !errors.As(err, &nsk) {
					t.Fatalf("GetObject of a directory prefix: %v, want NoSuchKey", err)
				}
				_, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("no-such-bucket")})
				if apiCode(err) != "NoSuchBucket" {
					t.Fatalf("ListObjectsV2 of a missing bucket: %v, want NoSuchBucket", err)
				}
				_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("main"), Key: aws.String("README.txt"), Range: aws.String("bytes=999999-")})
				if apiCode(err) != "InvalidRange" {
					t.Fatalf("GetObject with a range past the end: %v, want InvalidRange", err)
				}
				_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("main"), Key: aws.String("new.txt"), Body: strings.NewReader("x")})
				if apiCode(err) != "AccessDenied" {
					t.Fatalf("PutObject: %v, want AccessDenied (read-only)", err)
				}
				_, err = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("main"), Key: aws.String("README.txt")})
				if apiCode(err) != "AccessDenied" {
					t.Fatalf("DeleteObject: %v, want AccessDenied (read-only)", err)
				}
				if srv.accessKey != "" {
					bad := sdkClient(srv, srv.secretKey+"x")
					_, err = bad.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("main"), Key: aws.String("README.txt")})
					if apiCode(err) != "SignatureDoesNotMatch" {
						t.Fatalf("GetObject with a wrong secret: %v, want SignatureDoesNotMatch", err)
					}
					resp, err := http.Get(srv.url + "/main/README.txt")
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusForbidden {
						t.Fatalf("unsigned GET on the keyed server: %s, want 403", resp.Status)
					}
				}
				t.Logf("aws-sdk-go-v2 (%s): NoSuchKey, NoSuchBucket, InvalidRange, AccessDenied on writes (and bad/absent signatures) as AWS gives them", srv.name)
			})
		})
	}
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	if err == nil {
		return "<nil>"
	}
	return "<" + err.Error() + ">"
}

// sameAsSource compares b with the source bytes of bucket/key.
func sameAsSource(bucket, key string, b []byte) error {
	want, err := os.ReadFile(filepath.Join(suite.archives[bucket].dir, filepath.FromSlash(key)))
	if err != nil {
		return err
	}
	if string(b) != string(want) {
		i := 0
		for i < len(b) && i < len(want) && b[i] == want[i] {
			i++
		}
		return fmt.Errorf("%s/%s: got %d bytes, want %d; first difference at byte %d", bucket, key, len(b), len(want), i)
	}
	return nil
}

// forEachKey runs fn for every key of a, a few at a time.
func forEachKey(t *testing.T, a *archiveSpec, fn func(key string) error) {
	t.Helper()
	var g errgroup.Group
	g.SetLimit(8)
	for _, k := range sortedKeys(a.keys) {
		g.Go(func() error { return fn(k) })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// sdkListAll pages through ListObjectsV2 and checks keys and sizes against
// the source; it returns key → ETag.
func sdkListAll(t *testing.T, c *s3.Client, a *archiveSpec, pageSize int32, encoding string) map[string]string {
	t.Helper()
	in := &s3.ListObjectsV2Input{Bucket: aws.String(a.bucket), MaxKeys: aws.Int32(pageSize)}
	if encoding != "" {
		in.EncodingType = types.EncodingType(encoding)
	}
	p := s3.NewListObjectsV2Paginator(c, in)
	got := map[string]int64{}
	etags := map[string]string{}
	var order []string
	pages := 0
	for p.HasMorePages() {
		if limit := listPageCap(len(a.keys), int(pageSize)); pages >= limit {
			t.Fatalf("ListObjectsV2 %s still truncated after %d pages of %d for %d keys: a continuation loop", a.bucket, limit, pageSize, len(a.keys))
		}
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("ListObjectsV2 %s page %d: %v", a.bucket, pages+1, err)
		}
		pages++
		if len(out.Contents) > int(pageSize) {
			t.Fatalf("ListObjectsV2 %s: %d keys in a page of max %d", a.bucket, len(out.Contents), pageSize)
		}
		for _, o := range out.Contents {
			k := aws.ToString(o.Key)
			if encoding == "url" {
				dk, err := url.QueryUnescape(k)
				if err != nil {
					t.Fatalf("ListObjectsV2 encoding-type=url: key %q does not decode: %v", k, err)
				}
				k = dk
			}
			got[k] = aws.ToInt64(o.Size)
			etags[k] = aws.ToString(o.ETag)
			order = append(order, k)
			if etags[k] == "" || !strings.HasPrefix(etags[k], `"`) {
				t.Fatalf("ListObjectsV2 %s: key %q has ETag %q, want a quoted ETag", a.bucket, k, etags[k])
			}
		}
	}
	checkListing(t, "ListObjectsV2 "+a.bucket, a.keys, got, order)
	if want := (len(a.keys) + int(pageSize) - 1) / int(pageSize); pages != max(1, want) {
		t.Fatalf("ListObjectsV2 %s: %d pages of %d, want %d", a.bucket, pages, pageSize, want)
	}
	return etags
}

// listPageCap bounds a paging loop over a listing of at most n entries in
// pages of size: it needs at most n/size+1 pages (one more for an empty
// last page). A continuation bug that keeps answering "truncated" then
// fails the test instead of hanging CI until the go test timeout.
func listPageCap(n, size int) int {
	return n/max(size, 1) + 2
}

// checkListing compares a listing with the source: same keys, sizes, byte order.
func checkListing(t *testing.T, what string, want, got map[string]int64, order []string) {
	t.Helper()
	missing, extra := diffKeys(want, got)
	if len(missing)+len(extra) > 0 {
		t.Fatalf("%s: %d keys missing %q, %d extra %q", what, len(missing), head(missing, 5), len(extra), head(extra, 5))
	}
	if len(order) != len(want) {
		t.Fatalf("%s: %d entries listed for %d keys (duplicates across pages?)", what, len(order), len(want))
	}
	for i := 1; i < len(order); i++ {
		if order[i-1] >= order[i] {
			t.Fatalf("%s: keys out of order: %q then %q", what, order[i-1], order[i])
		}
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("%s: %q has size %d, want %d", what, k, got[k], n)
		}
	}
}

func sdkListV1(t *testing.T, c *s3.Client, a *archiveSpec, pageSize int32) {
	t.Helper()
	got := map[string]int64{}
	var order []string
	marker := ""
	for pages := 1; ; pages++ {
		if limit := listPageCap(len(a.keys), int(pageSize)); pages > limit {
			t.Fatalf("ListObjects (v1) %s still truncated after %d pages of %d for %d keys: a marker loop", a.bucket, limit, pageSize, len(a.keys))
		}
		out, err := c.ListObjects(context.Background(), &s3.ListObjectsInput{Bucket: aws.String(a.bucket), MaxKeys: aws.Int32(pageSize), Marker: aws.String(marker)})
		if err != nil {
			t.Fatalf("ListObjects (v1) %s after %q: %v", a.bucket, marker, err)
		}
		for _, o := range out.Contents {
			got[aws.ToString(o.Key)] = aws.ToInt64(o.Size)
			order = append(order, aws.ToString(o.Key))
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		next := aws.ToString(out.NextMarker)
		if next == "" && len(out.Contents) > 0 {
			next = aws.ToString(out.Contents[len(out.Contents)-1].Key)
		}
		if next == "" || next == marker {
			t.Fatalf("ListObjects (v1) %s: truncated page without progress (marker %q)", a.bucket, marker)
		}
		marker = next
	}
	checkListing(t, "ListObjects (v1) "+a.bucket, a.keys, got, order)
}

func sdkDelimited(t *testing.T, c *s3.Client, a *archiveSpec, prefix string) {
	t.Helper()
	wantFiles, wantPrefixes := rollUp(a.keys, prefix)
	var files, prefixes []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(a.bucket), Prefix: aws.String(prefix), Delimiter: aws.String("/"), MaxKeys: aws.Int32(500)})
	for pages := 1; p.HasMorePages(); pages++ {
		if limit := listPageCap(len(a.keys), 500); pages > limit {
			t.Fatalf("ListObjectsV2 %s prefix %q delimiter /: still truncated after %d pages: a continuation loop", a.bucket, prefix, limit)
		}
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("ListObjectsV2 %s prefix %q delimiter /: %v", a.bucket, prefix, err)
		}
		for _, o := range out.Contents {
			files = append(files, aws.ToString(o.Key))
		}
		for _, cp := range out.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(cp.Prefix))
		}
	}
	if strings.Join(files, "\n") != strings.Join(wantFiles, "\n") || strings.Join(prefixes, "\n") != strings.Join(wantPrefixes, "\n") {
		t.Fatalf("ListObjectsV2 %s prefix %q delimiter /:\n keys %q\n prefixes %q\nwant\n keys %q\n prefixes %q",
			a.bucket, prefix, head(files, 8), prefixes, head(wantFiles, 8), wantPrefixes)
	}
}

func minioClient(t *testing.T, srv *wharfServer) *minio.Client {
	t.Helper()
	u, _ := url.Parse(srv.url)
	mc, err := minio.New(u.Host, &minio.Options{
		Creds:        miniocred.NewStaticV4(srv.accessKey, srv.secretKey, ""),
		Secure:       false,
		BucketLookup: minio.BucketLookupPath,
		MaxRetries:   1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

func TestMinioGo(t *testing.T) {
	for _, srv := range suite.servers() {
		t.Run(srv.name, func(t *testing.T) {
			mc := minioClient(t, srv)
			ctx := context.Background()
			for _, name := range suite.bucketNames() {
				a := suite.archives[name]
				t.Run("list/"+name, func(t *testing.T) {
					for _, v1 := range []bool{false, true} {
						got := map[string]int64{}
						var order []string
						for o := range mc.ListObjects(ctx, name, minio.ListObjectsOptions{Recursive: true, UseV1: v1, MaxKeys: 900}) {
							if o.Err != nil {
								t.Fatalf("ListObjects %s (v1=%v): %v", name, v1, o.Err)
							}
							got[o.Key] = o.Size
							order = append(order, o.Key)
						}
						checkListing(t, fmt.Sprintf("minio ListObjects %s (v1=%v)", name, v1), a.keys, got, order)
					}
					for _, p := range []string{"", "nested/", "names/"} {
						wantFiles, wantPrefixes := rollUp(a.keys, p)
						want := append(append([]string{}, wantFiles...), wantPrefixes...)
						var got []string
						for o := range mc.ListObjects(ctx, name, minio.ListObjectsOptions{Prefix: p}) {
							if o.Err != nil {
								t.Fatalf("ListObjects %s prefix %q: %v", name, p, o.Err)
							}
							got = append(got, o.Key)
						}
						if !sameSet(got, want) {
							t.Fatalf("minio ListObjects %s prefix %q (delimiter /) = %q, want %q", name, p, head(got, 10), head(want, 10))
						}
					}
					t.Logf("minio-go (%s): %s: recursive v2 and v1 listings and delimiter listings match the source", srv.name, name)
				})
			}
			t.Run("stat+readat", func(t *testing.T) {
				n := 0
				for _, bf := range largeFiles {
					src := sourceBytes(t, bf[0], bf[1])
					st, err := mc.StatObject(ctx, bf[0], bf[1], minio.StatObjectOptions{})
					if err != nil {
						t.Fatalf("StatObject %s/%s: %v", bf[0], bf[1], err)
					}
					if st.Size != int64(len(src)) {
						t.Fatalf("StatObject %s/%s: size %d, want %d", bf[0], bf[1], st.Size, len(src))
					}
					obj, err := mc.GetObject(ctx, bf[0], bf[1], minio.GetObjectOptions{})
					if err != nil {
						t.Fatalf("GetObject %s/%s: %v", bf[0], bf[1], err)
					}
					for _, r := range rangesFor(int64(len(src))) {
						buf := make([]byte, r.end-r.start)
						m, err := obj.ReadAt(buf, r.start)
						if err != nil && !(errors.Is(err, io.EOF) && int64(m) == r.end-r.start) {
							t.Fatalf("ReadAt %s/%s [%d,%d): %d bytes, %v", bf[0], bf[1], r.start, r.end, m, err)
						}
						assertSameBytes(t, "minio-go ReadAt", fmt.Sprintf("%s/%s [%d,%d)", bf[0], bf[1], r.start, r.end), buf[:m], src[r.start:r.end])
						n++
					}
					obj.Close()
				}
				t.Logf("minio-go (%s): StatObject and %d ReadAt ranges match the source", srv.name, n)
			})
			t.Run("FGetObject", func(t *testing.T) {
				dir := t.TempDir()
				for _, bf := range append(largeFiles, [2]string{"main", "empty.txt"}, [2]string{"main", "names/ünïcødé-日本語.txt"}, [2]string{"main", "names/a+b c.txt"}) {
					p := filepath.Join(dir, bf[0], filepath.FromSlash(bf[1]))
					if err := mc.FGetObject(ctx, bf[0], bf[1], p, minio.GetObjectOptions{}); err != nil {
						t.Fatalf("FGetObject %s/%s: %v", bf[0], bf[1], err)
					}
					assertSameFile(t, "minio-go FGetObject", p, filepath.Join(suite.archives[bf[0]].dir, filepath.FromSlash(bf[1])))
				}
				t.Logf("minio-go (%s): FGetObject of %d files identical to the source", srv.name, len(largeFiles)+3)
			})
			t.Run("errors", func(t *testing.T) {
				_, err := mc.StatObject(ctx, "main", "missing.txt", minio.StatObjectOptions{})
				if minio.ToErrorResponse(err).StatusCode != http.StatusNotFound {
					t.Fatalf("StatObject of a missing key: %v, want 404", err)
				}
				_, err = mc.PutObject(ctx, "main", "x.txt", strings.NewReader("x"), 1, minio.PutObjectOptions{})
				if code := minio.ToErrorResponse(err).Code; code != "AccessDenied" {
					t.Fatalf("PutObject: %v (code %q), want AccessDenied", err, code)
				}
			})
		})
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
		if m[x] < 0 {
			return false
		}
	}
	return true
}

func TestAdminEndpoints(t *testing.T) {
	for _, srv := range suite.servers() {
		t.Run(srv.name, func(t *testing.T) {
			if srv.adminURL == "" {
				t.Fatal("wharf serve did not log its admin listener address")
			}
			get := func(path string) (int, string) {
				c := &http.Client{Timeout: 10 * time.Second}
				resp, err := c.Get(srv.adminURL + path)
				if err != nil {
					t.Fatalf("GET %s: %v", path, err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			for _, p := range []string{"/healthz", "/readyz"} {
				if code, body := get(p); code != http.StatusOK {
					t.Fatalf("GET %s: %d %s", p, code, body)
				}
			}
			// Make sure at least one request was served, then read metrics.
			resp, err := http.Get(srv.url + "/main/README.txt")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			code, body := get("/metrics")
			if code != http.StatusOK {
				t.Fatalf("GET /metrics: %d", code)
			}
			for _, m := range []string{"wharf_requests_total", "wharf_request_duration_seconds", "wharf_served_bytes_total", "go_goroutines"} {
				if !strings.Contains(body, m) {
					t.Fatalf("/metrics lacks %s", m)
				}
			}
			t.Logf("admin (%s): /healthz, /readyz and /metrics (%d bytes) answer", srv.name, len(body))
		})
	}
}

// bufferAt is an io.WriterAt over a buffer of the object's known size, for
// the transfer manager's parallel ranged download: each part lands at its
// offset, and a part reaching past the end is an error, never a silent grow.
type bufferAt []byte

func (b bufferAt) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(b)) || int64(len(p)) > int64(len(b))-off {
		return 0, fmt.Errorf("write of %d bytes at %d outside the %d-byte object", len(p), off, len(b))
	}
	return copy(b[off:], p), nil
}
