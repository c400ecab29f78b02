package s3api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/s3api"
)

// The read API surface of issue 12 §4, each item with S3's codes and
// bodies, through real clients (aws-sdk-go-v2, minio-go, net/http for
// the CORS preflight no SDK sends).

// sdkErr splits an aws-sdk-go-v2 error into S3 code, message and status;
// it fails the test on a success or a transport error.
func sdkErr(t *testing.T, err error) (code, msg string, status int) {
	t.Helper()
	var ae smithy.APIError
	var re *smithyhttp.ResponseError
	if !errors.As(err, &ae) || !errors.As(err, &re) {
		t.Fatalf("want an S3 error response, got %v", err)
	}
	return ae.ErrorCode(), ae.ErrorMessage(), re.HTTPStatusCode()
}

func wantSDKErr(t *testing.T, what string, err error, code string, status int) string {
	t.Helper()
	c, m, s := sdkErr(t, err)
	if c != code || s != status {
		t.Fatalf("%s: %s/%d (%s), want %s/%d", what, c, s, m, code, status)
	}
	return m
}

// anonSDKClient is an unsigned aws-sdk-go-v2 client.
func anonSDKClient(endpoint string) *s3.Client {
	return s3.New(s3.Options{BaseEndpoint: aws.String(endpoint), UsePathStyle: true, Region: "us-east-1",
		Credentials: aws.AnonymousCredentials{}})
}

type rangeError struct {
	Code             string
	RangeRequested   string
	ActualObjectSize *int64
}

// Issue 12 §4: the 416 body names the range and the object's size, also
// for an empty object (ActualObjectSize 0), so smart_open can read the
// size from it; and (§5) an end equal to the size is clamped.
func TestInvalidRangeBodyAndClamp(t *testing.T) {
	hundred := randBytes(5, 100)
	f := newFixture(t, map[string][]byte{"hundred.bin": hundred, "empty": {}}, fixtureOpts{anonymous: true})
	c := newSDKClient(t, f.srv.URL, testAK, testSK)
	ctx := context.Background()

	for _, tc := range []struct {
		key, rng string
		size     int64
	}{
		{"hundred.bin", "bytes=100-200", 100},
		{"hundred.bin", "bytes=100-", 100},
		{"hundred.bin", "bytes=-0", 100},
		{"empty", "bytes=0-", 0},
		{"empty", "bytes=0-0", 0},
		{"empty", "bytes=-5", 0},
	} {
		_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(tc.key), Range: aws.String(tc.rng)})
		wantSDKErr(t, tc.key+" "+tc.rng, err, "InvalidRange", 416)

		resp, body := f.do(t, "GET", "/bkt/"+tc.key, map[string]string{"Range": tc.rng})
		wantError(t, resp, body, 416, "InvalidRange")
		var e rangeError
		if err := xml.Unmarshal(body, &e); err != nil {
			t.Fatal(err)
		}
		if e.RangeRequested != tc.rng || e.ActualObjectSize == nil || *e.ActualObjectSize != tc.size {
			t.Errorf("%s %s: RangeRequested %q ActualObjectSize %v, want %q %d; body %s", tc.key, tc.rng, e.RangeRequested, e.ActualObjectSize, tc.rng, tc.size, body)
		}
		if want := "bytes */" + itoa(int(tc.size)); resp.Header.Get("Content-Range") != want {
			t.Errorf("%s %s: Content-Range %q, want %q", tc.key, tc.rng, resp.Header.Get("Content-Range"), want)
		}
	}
	// Other errors carry neither element.
	resp, body := f.do(t, "GET", "/bkt/nope", map[string]string{"Range": "bytes=0-1"})
	wantError(t, resp, body, 404, "NoSuchKey")
	if bytes.Contains(body, []byte("ActualObjectSize")) || bytes.Contains(body, []byte("RangeRequested")) {
		t.Errorf("NoSuchKey body has range elements: %s", body)
	}

	// bytes=90-100 on 100 bytes: the end equal to the size is clamped to
	// the last byte: exactly bytes 90..99, never an 11th byte.
	for _, rng := range []string{"bytes=90-100", "bytes=90-99", "bytes=0-100"} {
		g, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("hundred.bin"), Range: aws.String(rng)})
		if err != nil {
			t.Fatalf("%s: %v", rng, err)
		}
		got, err := io.ReadAll(g.Body)
		g.Body.Close()
		start := 90
		if rng == "bytes=0-100" {
			start = 0
		}
		want := "bytes " + itoa(start) + "-99/100"
		if err != nil || !bytes.Equal(got, hundred[start:]) || aws.ToString(g.ContentRange) != want || aws.ToInt64(g.ContentLength) != int64(100-start) {
			t.Fatalf("%s: %d bytes (equal %v, %v), Content-Range %q, Content-Length %d; want %d bytes, %q",
				rng, len(got), bytes.Equal(got, hundred[start:]), err, aws.ToString(g.ContentRange), aws.ToInt64(g.ContentLength), 100-start, want)
		}
	}
	resp, body = f.do(t, "GET", "/bkt/hundred.bin", map[string]string{"Range": "bytes=90-100"})
	mustStatus(t, resp, body, 206)
	if !bytes.Equal(body, hundred[90:]) || resp.Header.Get("Content-Range") != "bytes 90-99/100" {
		t.Fatalf("raw bytes=90-100: %d bytes, Content-Range %q", len(body), resp.Header.Get("Content-Range"))
	}
}

// Issue 12 §4: x-amz-expected-bucket-owner must name the owner wharf
// reports (the Owner ID of listings), else 403 AccessDenied, on every
// bucket operation.
func TestExpectedBucketOwner(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{})
	c := newSDKClient(t, f.srv.URL, testAK, testSK)
	ctx := context.Background()
	v1, err := c.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String(testBucket), MaxKeys: aws.Int32(1)})
	if err != nil || len(v1.Contents) != 1 || v1.Contents[0].Owner == nil {
		t.Fatalf("ListObjects: %v", err)
	}
	owner := aws.ToString(v1.Contents[0].Owner.ID)

	for _, exp := range []string{owner, "111122223333"} {
		ok := exp == owner
		check := func(what string, err error, headOnly bool) {
			t.Helper()
			if ok {
				if err != nil {
					t.Fatalf("%s with the right owner: %v", what, err)
				}
				return
			}
			code := "AccessDenied"
			if headOnly {
				code = "Forbidden" // a HEAD error has no body
			}
			wantSDKErr(t, what+" with owner "+exp, err, code, 403)
		}
		_, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(testBucket), ExpectedBucketOwner: aws.String(exp)})
		check("ListObjectsV2", err, false)
		_, err = c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(testBucket), ExpectedBucketOwner: aws.String(exp)})
		check("HeadBucket", err, true)
		_, err = c.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String(testBucket), ExpectedBucketOwner: aws.String(exp)})
		check("GetBucketLocation", err, false)
		_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String("hello.txt"), ExpectedBucketOwner: aws.String(exp)})
		check("HeadObject", err, true)
		g, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("hello.txt"), ExpectedBucketOwner: aws.String(exp)})
		if err == nil {
			got, _ := io.ReadAll(g.Body)
			g.Body.Close()
			if string(got) != "hello world\n" {
				t.Fatalf("GetObject with the right owner: %q", got)
			}
		}
		check("GetObject", err, false)
		_, err = c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(testBucket), Key: aws.String("hello.txt"),
			ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesObjectSize}, ExpectedBucketOwner: aws.String(exp)})
		check("GetObjectAttributes", err, false)
		_, err = c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(testBucket), ExpectedBucketOwner: aws.String(exp)})
		check("ListObjectVersions", err, false)
	}
	// A missing bucket with a wrong owner is refused the same way: the
	// header does not probe existence.
	_, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("nobucket"), ExpectedBucketOwner: aws.String("111122223333")})
	wantSDKErr(t, "missing bucket, wrong owner", err, "AccessDenied", 403)
	_, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("nobucket"), ExpectedBucketOwner: aws.String(owner)})
	wantSDKErr(t, "missing bucket, right owner", err, "NoSuchBucket", 404)
}

// Issue 12 §4: GetObjectAttributes, as aws-sdk-go-v2 calls it.
func TestGetObjectAttributes(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{})
	c := newSDKClient(t, f.srv.URL, testAK, testSK)
	ctx := context.Background()
	all := []types.ObjectAttributes{types.ObjectAttributesEtag, types.ObjectAttributesChecksum,
		types.ObjectAttributesObjectParts, types.ObjectAttributesStorageClass, types.ObjectAttributesObjectSize}

	for _, key := range []string{"dir/a.bin", "hello.txt", "empty", "a b", "ü", "big.bin"} {
		src := f.files[key]
		head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(testBucket), Key: aws.String(key), ObjectAttributes: all})
		if err != nil {
			t.Fatalf("GetObjectAttributes %q: %v", key, err)
		}
		sum := sha256.Sum256(src)
		if aws.ToString(out.ETag) != strings.Trim(aws.ToString(head.ETag), `"`) || aws.ToString(out.ETag) == "" {
			t.Errorf("%q: ETag %q, HEAD %q (want it unquoted)", key, aws.ToString(out.ETag), aws.ToString(head.ETag))
		}
		if out.Checksum == nil || aws.ToString(out.Checksum.ChecksumSHA256) != base64.StdEncoding.EncodeToString(sum[:]) || out.Checksum.ChecksumType != types.ChecksumTypeFullObject {
			t.Errorf("%q: Checksum %+v, want SHA256 %s FULL_OBJECT", key, out.Checksum, base64.StdEncoding.EncodeToString(sum[:]))
		}
		if out.ObjectParts != nil {
			t.Errorf("%q: ObjectParts %+v for a single-part object", key, out.ObjectParts)
		}
		if out.StorageClass != types.StorageClassStandard || aws.ToInt64(out.ObjectSize) != int64(len(src)) {
			t.Errorf("%q: StorageClass %q ObjectSize %d", key, out.StorageClass, aws.ToInt64(out.ObjectSize))
		}
		if !aws.ToTime(out.LastModified).Equal(aws.ToTime(head.LastModified)) || aws.ToString(out.VersionId) != aws.ToString(head.VersionId) || aws.ToString(out.VersionId) == "" {
			t.Errorf("%q: LastModified %v VersionId %q; HEAD %v %q", key, out.LastModified, aws.ToString(out.VersionId), head.LastModified, aws.ToString(head.VersionId))
		}
	}
	// Only what is asked for.
	out, err := c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(testBucket), Key: aws.String("hello.txt"),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesObjectSize}})
	if err != nil || aws.ToInt64(out.ObjectSize) != 12 || out.ETag != nil || out.Checksum != nil || out.StorageClass != "" {
		t.Errorf("ObjectSize only: %v %+v", err, out)
	}
	// Errors: a missing key, an unknown attribute, no attribute.
	_, err = c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(testBucket), Key: aws.String("nope"), ObjectAttributes: all})
	wantSDKErr(t, "missing key", err, "NoSuchKey", 404)
	_, err = c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(testBucket), Key: aws.String("hello.txt"),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesEtag, "Bogus"}})
	if m := wantSDKErr(t, "unknown attribute", err, "InvalidArgument", 400); m != "Invalid attribute name specified." {
		t.Errorf("unknown attribute message %q", m)
	}
	anon := newFixtureFromArchive(t, f.archive, fixtureOpts{anonymous: true})
	resp, body := anon.do(t, "GET", "/bkt/hello.txt?attributes", nil)
	if e := wantError(t, resp, body, 400, "InvalidRequest"); e.Message != "The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty" {
		t.Errorf("no attributes: message %q", e.Message)
	}
	resp, body = anon.do(t, "GET", "/bkt/hello.txt?attributes", map[string]string{"x-amz-object-attributes": " , "})
	wantError(t, resp, body, 400, "InvalidRequest")
	resp, body = anon.do(t, "GET", "/bkt/hello.txt?attributes", map[string]string{"x-amz-object-attributes": "etag"})
	wantError(t, resp, body, 400, "InvalidArgument") // names are case-sensitive
	resp, body = anon.do(t, "HEAD", "/bkt/hello.txt?attributes", map[string]string{"x-amz-object-attributes": "ETag, ObjectSize"})
	mustStatus(t, resp, body, 200)
	if len(body) != 0 || resp.Header.Get("Last-Modified") == "" {
		t.Errorf("HEAD ?attributes: %d body bytes, Last-Modified %q", len(body), resp.Header.Get("Last-Modified"))
	}

	// An archive without file checksums has no Checksum to report.
	nf := newFixture(t, map[string][]byte{"x.txt": []byte("no sums")}, fixtureOpts{noChecksums: true})
	nc := newSDKClient(t, nf.srv.URL, testAK, testSK)
	out, err = nc.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(testBucket), Key: aws.String("x.txt"), ObjectAttributes: all})
	if err != nil || out.Checksum != nil || aws.ToString(out.ETag) == "" || aws.ToInt64(out.ObjectSize) != 7 {
		t.Errorf("no checksums: %v Checksum %+v ETag %q", err, out.Checksum, aws.ToString(out.ETag))
	}
}

// GetObjectAttributes with ?versionId follows GetObject: an older version's
// attributes, NoSuchVersion, a delete marker's 405, a deleted key's 404.
func TestGetObjectAttributesVersions(t *testing.T) {
	f := newChainFixture(t, testChain())
	c := newSDKClient(t, f.srv.URL, testAK, testSK)
	ctx := context.Background()
	all := []types.ObjectAttributes{types.ObjectAttributesEtag, types.ObjectAttributesChecksum, types.ObjectAttributesObjectSize}
	for _, vid := range []string{"up-1", "up-2", "up-3", ""} {
		in := &s3.GetObjectAttributesInput{Bucket: aws.String(testBucket), Key: aws.String("doc.txt"), ObjectAttributes: all}
		gin := &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("doc.txt")}
		if vid != "" {
			in.VersionId, gin.VersionId = aws.String(vid), aws.String(vid)
		}
		out, err := c.GetObjectAttributes(ctx, in)
		if err != nil {
			t.Fatalf("doc.txt@%q: %v", vid, err)
		}
		g, err := c.GetObject(ctx, gin)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(g.Body)
		g.Body.Close()
		sum := sha256.Sum256(body)
		wantVID := vid
		if vid == "" {
			wantVID = "up-3"
		}
		if aws.ToString(out.VersionId) != wantVID || aws.ToInt64(out.ObjectSize) != int64(len(body)) ||
			aws.ToString(out.ETag) != strings.Trim(aws.ToString(g.ETag), `"`) ||
			out.Checksum == nil || aws.ToString(out.Checksum.ChecksumSHA256) != base64.StdEncoding.EncodeToString(sum[:]) ||
			!aws.ToTime(out.LastModified).Equal(aws.ToTime(g.LastModified)) {
			t.Errorf("doc.txt@%q: VersionId %q size %d ETag %q checksum %+v; GET gave %d bytes ETag %s", vid,
				aws.ToString(out.VersionId), aws.ToInt64(out.ObjectSize), aws.ToString(out.ETag), out.Checksum, len(body), aws.ToString(g.ETag))
		}
	}
	_, err := c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(testBucket), Key: aws.String("doc.txt"), VersionId: aws.String("up-9"), ObjectAttributes: all})
	wantSDKErr(t, "unknown version", err, "NoSuchVersion", 404)
	_, err = c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(testBucket), Key: aws.String("gone.txt"), VersionId: aws.String("up-2"), ObjectAttributes: all})
	wantSDKErr(t, "delete marker version", err, "MethodNotAllowed", 405)
	_, err = c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(testBucket), Key: aws.String("a b+c"), ObjectAttributes: all})
	wantSDKErr(t, "deleted key", err, "NoSuchKey", 404)
}

// Issue 12 §4: Object Lock, retention, legal hold and policy status are
// answered "none configured" as S3 answers for a bucket without them.
func TestObjectLockAndPolicyStatus(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{})
	c := newSDKClient(t, f.srv.URL, testAK, testSK)
	ctx := context.Background()
	_, err := c.GetObjectLockConfiguration(ctx, &s3.GetObjectLockConfigurationInput{Bucket: aws.String(testBucket)})
	if m := wantSDKErr(t, "GetObjectLockConfiguration", err, "ObjectLockConfigurationNotFoundError", 404); m != "Object Lock configuration does not exist for this bucket" {
		t.Errorf("object-lock message %q", m)
	}
	_, err = c.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: aws.String(testBucket), Key: aws.String("hello.txt")})
	if m := wantSDKErr(t, "GetObjectRetention", err, "InvalidRequest", 400); m != "Bucket is missing Object Lock Configuration" {
		t.Errorf("retention message %q", m)
	}
	_, err = c.GetObjectLegalHold(ctx, &s3.GetObjectLegalHoldInput{Bucket: aws.String(testBucket), Key: aws.String("hello.txt")})
	if m := wantSDKErr(t, "GetObjectLegalHold", err, "InvalidRequest", 400); m != "Bucket is missing Object Lock Configuration" {
		t.Errorf("legal-hold message %q", m)
	}
	_, err = c.GetObjectLockConfiguration(ctx, &s3.GetObjectLockConfigurationInput{Bucket: aws.String("nobucket")})
	wantSDKErr(t, "GetObjectLockConfiguration on a missing bucket", err, "NoSuchBucket", 404)

	ps, err := c.GetBucketPolicyStatus(ctx, &s3.GetBucketPolicyStatusInput{Bucket: aws.String(testBucket)})
	if err != nil || ps.PolicyStatus == nil || ps.PolicyStatus.IsPublic == nil || *ps.PolicyStatus.IsPublic {
		t.Fatalf("GetBucketPolicyStatus, signed-only server: %v %+v", err, ps)
	}
	anon := newFixtureFromArchive(t, f.archive, fixtureOpts{anonymous: true})
	ps, err = newSDKClient(t, anon.srv.URL, testAK, testSK).GetBucketPolicyStatus(ctx, &s3.GetBucketPolicyStatusInput{Bucket: aws.String(testBucket)})
	if err != nil || ps.PolicyStatus == nil || !aws.ToBool(ps.PolicyStatus.IsPublic) {
		t.Fatalf("GetBucketPolicyStatus, anonymous server: %v %+v", err, ps)
	}
	ps, err = anonSDKClient(anon.srv.URL).GetBucketPolicyStatus(ctx, &s3.GetBucketPolicyStatusInput{Bucket: aws.String(testBucket)})
	if err != nil || !aws.ToBool(ps.PolicyStatus.IsPublic) {
		t.Fatalf("GetBucketPolicyStatus, unsigned: %v", err)
	}
}

// Issue 12 §4: continuation-token= (empty) is the first page, not a 400.
func TestEmptyContinuationToken(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	c := newSDKClient(t, f.srv.URL, testAK, testSK)
	ctx := context.Background()
	first, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(testBucket), MaxKeys: aws.Int32(3)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(testBucket), MaxKeys: aws.Int32(3), ContinuationToken: aws.String("")})
	if err != nil {
		t.Fatalf("empty continuation token: %v", err)
	}
	if len(out.Contents) != 3 || aws.ToString(out.Contents[0].Key) != aws.ToString(first.Contents[0].Key) ||
		aws.ToString(out.ContinuationToken) != "" || aws.ToString(out.NextContinuationToken) != aws.ToString(first.NextContinuationToken) {
		t.Fatalf("empty token page differs from the first page: %+v", out)
	}
	// With start-after, an empty token leaves start-after in force.
	out, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(testBucket), ContinuationToken: aws.String(""), StartAfter: aws.String("dir/")})
	if err != nil || len(out.Contents) == 0 || aws.ToString(out.Contents[0].Key) != "dir/a.bin" {
		t.Fatalf("empty token + start-after: %v", err)
	}
	resp, body := f.do(t, "GET", "/bkt?list-type=2&continuation-token=&max-keys=1", nil)
	mustStatus(t, resp, body, 200)
	// Echoed empty, as AWS does (ceph/s3-tests, issue 20 finding 17).
	if !bytes.Contains(body, []byte("<ContinuationToken></ContinuationToken>")) {
		t.Errorf("an empty token is not echoed: %s", body)
	}
	resp, body = f.do(t, "GET", "/bkt?list-type=2&continuation-token=x", nil)
	wantError(t, resp, body, 400, "InvalidArgument")
}

// testCORS stands for a bucket CORS configuration behind Config.CORS:
// bucket "bkt" allows GET from one origin.
type testCORS struct{ origin string }

func (p testCORS) Preflight(bucket, origin, method string, headers []string) (http.Header, bool) {
	if bucket != testBucket {
		return nil, false
	}
	if origin != p.origin || method != "GET" {
		return nil, true
	}
	return http.Header{"Access-Control-Allow-Origin": {origin}, "Access-Control-Allow-Methods": {"GET, HEAD"},
		"Access-Control-Allow-Headers": {strings.Join(headers, ", ")}}, true
}

func (p testCORS) Actual(bucket, origin, method string) http.Header {
	if bucket != testBucket || origin != p.origin {
		return nil
	}
	return http.Header{"Access-Control-Allow-Origin": {origin}}
}

func (p testCORS) Rules(bucket string) []s3api.CORSRule {
	if bucket != testBucket {
		return nil
	}
	return []s3api.CORSRule{{AllowedOrigins: []string{p.origin}, AllowedMethods: []string{"GET"}}}
}

// Issue 12 §4: OPTIONS is a CORS preflight: 400 without Origin, 403 with
// one and no CORS configuration, unauthenticated; a policy behind
// Config.CORS decides when there is one.
func TestCORSPreflight(t *testing.T) {
	const notEnabled = "CORSResponse: CORS is not enabled for this bucket."
	const notAllowed = "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec."
	f := newFixture(t, standardFiles(), fixtureOpts{}) // signed-only: preflights need no signature
	for _, p := range []string{"/bkt/hello.txt", "/bkt", "/nobucket/x", "/"} {
		resp, body := f.do(t, "OPTIONS", p, nil)
		if e := wantError(t, resp, body, 400, "BadRequest"); e.Message != "Insufficient information. Origin request header needed." {
			t.Errorf("OPTIONS %s without Origin: message %q", p, e.Message)
		}
		resp, body = f.do(t, "OPTIONS", p, map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "GET"})
		if e := wantError(t, resp, body, 403, "AccessForbidden"); e.Message != notEnabled {
			t.Errorf("OPTIONS %s with Origin: message %q", p, e.Message)
		}
	}
	if v := metricValue(t, f.reg, "wharf_requests_total", map[string]string{"op": "CORSPreflight", "code": "403"}); v != 4 {
		t.Errorf("CORSPreflight 403 counted %v times, want 4", v)
	}

	a, _ := openArchive(t, map[string][]byte{"k": []byte("v")}, fixtureOpts{})
	cf := newFixtureFromArchive(t, a, fixtureOpts{cors: testCORS{origin: "https://app.example"}})
	resp, body := cf.do(t, "OPTIONS", "/bkt/k", map[string]string{"Origin": "https://app.example",
		"Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "range, x-amz-date"})
	mustStatus(t, resp, body, 200)
	if resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" || resp.Header.Get("Access-Control-Allow-Headers") != "range, x-amz-date" || len(body) != 0 {
		t.Errorf("allowed preflight: %v %q", resp.Header, body)
	}
	resp, body = cf.do(t, "OPTIONS", "/bkt/k", map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"})
	if e := wantError(t, resp, body, 403, "AccessForbidden"); e.Message != notAllowed {
		t.Errorf("refused preflight: message %q", e.Message)
	}
	resp, body = cf.do(t, "OPTIONS", "/other/k", map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "GET"})
	if e := wantError(t, resp, body, 403, "AccessForbidden"); e.Message != notEnabled {
		t.Errorf("bucket without CORS: message %q", e.Message)
	}
}

// Issue 12 §3: an unsigned GET or HEAD with response-* overrides is 400
// InvalidRequest, through the SDK as an anonymous caller; signed, the
// override applies.
func TestAnonymousResponseOverrides(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	ctx := context.Background()
	anon := anonSDKClient(f.srv.URL)
	_, err := anon.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("hello.txt"), ResponseContentType: aws.String("text/html")})
	if m := wantSDKErr(t, "anonymous GetObject with ResponseContentType", err, "InvalidRequest", 400); m != "Request specific response headers cannot be used for anonymous GET requests." {
		t.Errorf("message %q", m)
	}
	_, err = anon.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String("hello.txt"), ResponseContentDisposition: aws.String("inline")})
	wantSDKErr(t, "anonymous HeadObject with ResponseContentDisposition", err, "BadRequest", 400)
	g, err := anon.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("hello.txt")})
	if err != nil {
		t.Fatalf("anonymous GetObject: %v", err)
	}
	g.Body.Close()

	c := newSDKClient(t, f.srv.URL, testAK, testSK)
	g, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("hello.txt"), ResponseContentType: aws.String("text/html")})
	if err != nil {
		t.Fatalf("signed GetObject with ResponseContentType: %v", err)
	}
	body, _ := io.ReadAll(g.Body)
	g.Body.Close()
	if aws.ToString(g.ContentType) != "text/html" || string(body) != "hello world\n" {
		t.Errorf("signed override: %q %q", aws.ToString(g.ContentType), body)
	}

	// minio-go, anonymous, with a response override.
	mc, err := minio.New(strings.TrimPrefix(f.srv.URL, "http://"), &minio.Options{Creds: miniocreds.NewStaticV4("", "", "")})
	if err != nil {
		t.Fatal(err)
	}
	opts := minio.GetObjectOptions{}
	opts.AddReqParam("response-content-type", "text/html")
	_, err = mc.StatObject(ctx, testBucket, "hello.txt", minio.StatObjectOptions(opts))
	if er := minio.ToErrorResponse(err); er.StatusCode != 400 {
		t.Errorf("minio-go anonymous stat with override: %v", err)
	}
}

// Issue 12 §5: a refused write is counted and logged as a write, never as
// GetObject (the op label and the access log's op).
func TestRefusedWriteNotCountedAsGet(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	c := newSDKClient(t, f.srv.URL, testAK, testSK)
	ctx := context.Background()
	_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(testBucket), Key: aws.String("hello.txt"), Body: strings.NewReader("x")})
	wantSDKErr(t, "PutObject", err, "AccessDenied", 403)
	_, err = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(testBucket), Key: aws.String("hello.txt")})
	wantSDKErr(t, "DeleteObject", err, "AccessDenied", 403)
	resp, body := f.do(t, "POST", "/bkt/hello.txt?uploads", nil)
	wantError(t, resp, body, 403, "AccessDenied")

	if v := metricValue(t, f.reg, "wharf_requests_total", map[string]string{"op": "Write", "code": "403"}); v != 3 {
		t.Errorf("Write 403 = %v, want 3", v)
	}
	for _, op := range []string{"GetObject", "HeadObject"} {
		if v := opTotal(t, f.reg, op); v != 0 {
			t.Errorf("%s counted %v requests; only writes were sent", op, v)
		}
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
		var l struct{ Op, Method string }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if l.Method == "PUT" || l.Method == "POST" || l.Method == "DELETE" {
			n++
			if l.Op != "Write" {
				t.Errorf("%s logged as op %q: %s", l.Method, l.Op, line)
			}
		}
	}
	if n != 3 {
		t.Errorf("%d write access lines, want 3:\n%s", n, f.logs.String())
	}
}

// opTotal sums wharf_requests_total over every code of op.
func opTotal(t *testing.T, reg *prometheus.Registry, op string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "wharf_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "op" && lp.GetValue() == op {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// TestExpectedBucketOwnerPresigned: aws-sdk-go-v2's presigner moves
// x-amz-expected-bucket-owner into the URL's query (as it does every
// x-amz-* header S3 accepts there), and S3 applies it from there: a
// presigned GET naming another owner is 403 AccessDenied, one naming
// wharf's owner is served.
func TestExpectedBucketOwnerPresigned(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{})
	p := s3.NewPresignClient(newSDKClient(t, f.srv.URL, testAK, testSK))
	ctx := context.Background()
	for _, c := range []struct {
		owner  string
		status int
	}{{"wharf", 200}, {"111122223333", 403}} {
		req, err := p.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("hello.txt"),
			ExpectedBucketOwner: aws.String(c.owner)})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.ToLower(req.URL), "x-amz-expected-bucket-owner="+c.owner) {
			t.Fatalf("the presigner did not put the owner in the query: %s", req.URL)
		}
		resp, err := http.Get(req.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || (c.status == 200) != (string(body) == "hello world\n") {
			t.Fatalf("presigned GET expecting owner %s: %d %s", c.owner, resp.StatusCode, body)
		}
	}
}
