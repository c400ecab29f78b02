package s3api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// chainUpload is one upload of a served test chain (oldest first).
type chainUpload struct {
	id      string
	files   map[string][]byte
	deleted []string
	created time.Time
	opt     cargopack.Options
}

// wantVersion is one version the reference model expects.
type wantVersion struct {
	key, id  string
	dm       bool
	data     []byte
	created  time.Time
	isLatest bool
}

// chainVersions is the reference: keys in byte order, each key's versions
// newest first; a file in upload U is version U, else a deleted path in U
// is a delete marker U.
func chainVersions(ups []chainUpload) []wantVersion {
	keys := map[string]bool{}
	for _, u := range ups {
		for k := range u.files {
			keys[k] = true
		}
		for _, k := range u.deleted {
			keys[k] = true
		}
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []wantVersion
	for _, k := range sorted {
		first := true
		for i := len(ups) - 1; i >= 0; i-- {
			u := ups[i]
			w := wantVersion{key: k, id: u.id, created: u.created, isLatest: first}
			if d, ok := u.files[k]; ok {
				w.data = d
			} else if containsStr(u.deleted, k) {
				w.dm = true
			} else {
				continue
			}
			out = append(out, w)
			first = false
		}
	}
	return out
}

func containsStr(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// testChain is three uploads: a framed base with many keys, a delta that
// modifies and deletes, and an unframed 2.0 delta that re-adds a deleted
// file and deletes more.
func testChain() []chainUpload {
	day := func(d int) time.Time { return time.Date(2025, 7, d, 8, 0, 0, 0, time.UTC) }
	base := map[string][]byte{
		"doc.txt":  []byte("version one\n"),
		"gone.txt": []byte("to be deleted"),
		"big.bin":  randBytes(7, 300<<10),
		"a b+c":    []byte("odd key"),
	}
	for i := 0; i < 30; i++ {
		base[fmt.Sprintf("k/%02d", i)] = []byte(fmt.Sprintf("k%d@u1", i))
	}
	d2 := map[string][]byte{"doc.txt": []byte("version two, longer\n"), "big.bin": randBytes(8, 200<<10)}
	for i := 0; i < 10; i++ {
		d2[fmt.Sprintf("k/%02d", i)] = []byte(fmt.Sprintf("k%d@u2", i))
	}
	d3 := map[string][]byte{"doc.txt": []byte("v3"), "gone.txt": []byte("back again"), "k/03": []byte("k3@u3")}
	return []chainUpload{
		{id: "up-1", created: day(1), files: base, opt: cargopack.Options{FrameSize: 64 << 10}},
		{id: "up-2", created: day(2), files: d2, deleted: []string{"gone.txt", "k/10", "k/11"}, opt: cargopack.Options{FrameSize: 32 << 10}},
		{id: "up-3", created: day(3), files: d3, deleted: []string{"k/11", "k/12", "a b+c"}, opt: cargopack.Options{Version: "2.0"}},
	}
}

// newChainFixture packs ups as an incremental chain with our own writer
// and serves the newest manifest as bucket "bkt".
func newChainFixture(t testing.TB, ups []chainUpload) *fixture {
	t.Helper()
	return newChainFixtureWrap(t, ups, nil, fixtureOpts{})
}

// newChainFixtureWrap is newChainFixture with the store wrapped (wrap may
// be nil) and fixture options.
func newChainFixtureWrap(t testing.TB, ups []chainUpload, wrap func(backend.Store) backend.Store, o fixtureOpts) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	var top, prev string
	for _, u := range ups {
		opt := u.opt
		opt.Bucket, opt.Prefix, opt.UploadID, opt.Created = "src", "p", u.id, u.created
		if prev != "" {
			opt.PreviousManifestID, opt.SyncType, opt.DeletedPaths = prev, "incremental", u.deleted
		}
		res, err := cargopack.Write(ctx, cargopack.DirSink(dir), cargopack.FromMap(u.files, u.created), opt)
		if err != nil {
			t.Fatalf("cargopack.Write %s: %v", u.id, err)
		}
		top, prev = res.ManifestKey, u.id
	}
	store := backend.Store(backend.NewFileStore(dir))
	if wrap != nil {
		store = wrap(store)
	}
	a, err := archiveview.Open(ctx, store, "src", top, archiveview.Options{Name: testBucket})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	f := newFixtureFromArchive(t, a, o)
	f.store = store
	return f
}

func sdkVersionsAll(t *testing.T, c *s3.Client, maxKeys int32, prefix, delim string) ([]wantVersion, []string) {
	t.Helper()
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(testBucket), MaxKeys: aws.Int32(maxKeys)}
	if prefix != "" {
		in.Prefix = aws.String(prefix)
	}
	if delim != "" {
		in.Delimiter = aws.String(delim)
	}
	p := s3.NewListObjectVersionsPaginator(c, in)
	var got []wantVersion
	var prefixes []string
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("ListObjectVersions page %d: %v", pages, err)
		}
		pages++
		n := len(out.Versions) + len(out.DeleteMarkers) + len(out.CommonPrefixes)
		if n > int(maxKeys) {
			t.Fatalf("page of %d entries, max-keys %d", n, maxKeys)
		}
		// Versions and delete markers come as separate lists from the SDK;
		// merge them back into key order, newest first.
		var page []wantVersion
		for _, v := range out.Versions {
			if v.StorageClass == "" {
				t.Fatalf("version without StorageClass")
			}
			page = append(page, wantVersion{key: aws.ToString(v.Key), id: aws.ToString(v.VersionId), isLatest: aws.ToBool(v.IsLatest),
				created: aws.ToTime(v.LastModified), data: []byte(strings.Trim(aws.ToString(v.ETag), `"`))})
			if v.Owner == nil || v.Size == nil {
				t.Fatalf("version %s@%s without Owner/Size", aws.ToString(v.Key), aws.ToString(v.VersionId))
			}
		}
		for _, d := range out.DeleteMarkers {
			page = append(page, wantVersion{key: aws.ToString(d.Key), id: aws.ToString(d.VersionId), dm: true, isLatest: aws.ToBool(d.IsLatest),
				created: aws.ToTime(d.LastModified)})
		}
		sort.SliceStable(page, func(i, j int) bool {
			if page[i].key != page[j].key {
				return page[i].key < page[j].key
			}
			return page[i].id > page[j].id // upload ids of the test sort by age
		})
		got = append(got, page...)
		for _, cp := range out.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(cp.Prefix))
		}
	}
	return got, prefixes
}

// TestVersionsAWSSDK drives versions through aws-sdk-go-v2: versioning
// status, ListObjectVersions paged with max-keys 1, 3 and 1000 (with and
// without a delimiter), GetObject and HeadObject with VersionId compared
// byte for byte with each upload's source, delete markers, unknown ids.
func TestVersionsAWSSDK(t *testing.T) {
	ups := testChain()
	f := newChainFixture(t, ups)
	c := newSDKClient(t, f.srv.URL, testAK, testSK)
	ctx := context.Background()

	vo, err := c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(testBucket)})
	if err != nil || vo.Status != s3types.BucketVersioningStatusEnabled {
		t.Fatalf("GetBucketVersioning: %v %v", vo, err)
	}

	want := chainVersions(ups)
	for _, max := range []int32{1, 3, 1000} {
		got, _ := sdkVersionsAll(t, c, max, "", "")
		if len(got) != len(want) {
			t.Fatalf("max-keys %d: %d versions, want %d", max, len(got), len(want))
		}
		for i, w := range want {
			g := got[i]
			if g.key != w.key || g.id != w.id || g.dm != w.dm || g.isLatest != w.isLatest {
				t.Fatalf("max-keys %d: entry %d = %s@%s dm=%v latest=%v, want %s@%s dm=%v latest=%v",
					max, i, g.key, g.id, g.dm, g.isLatest, w.key, w.id, w.dm, w.isLatest)
			}
			if !g.created.Equal(w.created) {
				t.Fatalf("%s@%s LastModified %v, want %v", w.key, w.id, g.created, w.created)
			}
		}
	}
	// With a delimiter: k/ rolls up once, across pages.
	for _, max := range []int32{1, 3, 1000} {
		got, prefixes := sdkVersionsAll(t, c, max, "", "/")
		if strings.Join(prefixes, ",") != "k/" {
			t.Fatalf("max-keys %d: common prefixes %q", max, prefixes)
		}
		n := 0
		for _, w := range want {
			if !strings.HasPrefix(w.key, "k/") {
				n++
			}
		}
		if len(got) != n {
			t.Fatalf("max-keys %d delimiter /: %d versions, want %d", max, len(got), n)
		}
	}

	for _, w := range want {
		in := &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(w.key), VersionId: aws.String(w.id)}
		out, err := c.GetObject(ctx, in)
		if w.dm {
			var re interface{ HTTPStatusCode() int }
			if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusMethodNotAllowed {
				t.Fatalf("GetObject delete marker %s@%s: %v", w.key, w.id, err)
			}
			_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String(w.key), VersionId: aws.String(w.id)})
			if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusMethodNotAllowed {
				t.Fatalf("HeadObject delete marker %s@%s: %v", w.key, w.id, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("GetObject %s@%s: %v", w.key, w.id, err)
		}
		body, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil || !bytes.Equal(body, w.data) {
			t.Fatalf("GetObject %s@%s: %d bytes (%v), want the source's %d", w.key, w.id, len(body), err, len(w.data))
		}
		if aws.ToString(out.VersionId) != w.id {
			t.Fatalf("GetObject %s@%s: x-amz-version-id %q", w.key, w.id, aws.ToString(out.VersionId))
		}
		h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String(w.key), VersionId: aws.String(w.id)})
		if err != nil || aws.ToInt64(h.ContentLength) != int64(len(w.data)) || aws.ToString(h.VersionId) != w.id {
			t.Fatalf("HeadObject %s@%s: %v %v", w.key, w.id, h, err)
		}
		if len(w.data) > 100 {
			rg, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(w.key), VersionId: aws.String(w.id),
				Range: aws.String(fmtRange(50, int64(len(w.data)-7)))})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rg.Body)
			rg.Body.Close()
			if !bytes.Equal(b, w.data[50:len(w.data)-6]) {
				t.Fatalf("ranged GetObject %s@%s differs from the source", w.key, w.id)
			}
		}
		// Without VersionId: the latest, which names its version.
		if w.isLatest {
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(w.key)})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(out.Body)
			out.Body.Close()
			if !bytes.Equal(b, w.data) || aws.ToString(out.VersionId) != w.id {
				t.Fatalf("GetObject %s (latest): version %q, body equal %v", w.key, aws.ToString(out.VersionId), bytes.Equal(b, w.data))
			}
		}
	}
	for _, c2 := range []struct{ key, id string }{{"doc.txt", "up-0"}, {"k/20", "up-2"}, {"nope", "up-1"}} {
		_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(c2.key), VersionId: aws.String(c2.id)})
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "NoSuchVersion" {
			t.Fatalf("GetObject %s@%s: %v, want NoSuchVersion", c2.key, c2.id, err)
		}
		_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String(c2.key), VersionId: aws.String(c2.id)})
		var re interface{ HTTPStatusCode() int }
		if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusNotFound {
			t.Fatalf("HeadObject %s@%s: %v, want 404", c2.key, c2.id, err)
		}
	}
}

// TestVersionsRawXML checks the wire format: element set and order, url
// encoding, markers, delete-marker headers, argument errors.
func TestVersionsRawXML(t *testing.T) {
	ups := testChain()
	f := newChainFixture(t, ups)
	anon := newFixtureFromArchive(t, f.archive, fixtureOpts{anonymous: true})

	resp, body := anon.do(t, "GET", "/bkt?versions&prefix=a&encoding-type=url", nil)
	mustStatus(t, resp, body, 200)
	wantBody := `<ListVersionsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bkt</Name><Prefix>a</Prefix>` +
		`<KeyMarker></KeyMarker><VersionIdMarker></VersionIdMarker><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>` +
		`<EncodingType>url</EncodingType><DeleteMarker><Key>a%20b%2Bc</Key><VersionId>up-3</VersionId><IsLatest>true</IsLatest>` +
		`<LastModified>2025-07-03T08:00:00.000Z</LastModified><Owner><ID>`
	if !strings.Contains(string(body), wantBody) || !strings.Contains(string(body), `</DeleteMarker><Version><Key>a%20b%2Bc</Key><VersionId>up-1</VersionId><IsLatest>false</IsLatest>`) {
		t.Fatalf("body:\n%s", body)
	}

	// Truncated page: NextKeyMarker/NextVersionIdMarker, then continue.
	resp, body = anon.do(t, "GET", "/bkt?versions&max-keys=2&prefix=doc", nil)
	mustStatus(t, resp, body, 200)
	var page struct {
		IsTruncated         bool
		NextKeyMarker       string
		NextVersionIdMarker string
		Version             []struct{ Key, VersionId string }
	}
	if err := xml.Unmarshal(body, &page); err != nil {
		t.Fatal(err)
	}
	if !page.IsTruncated || page.NextKeyMarker != "doc.txt" || page.NextVersionIdMarker != "up-2" || len(page.Version) != 2 {
		t.Fatalf("page %+v", page)
	}
	resp, body = anon.do(t, "GET", "/bkt?versions&max-keys=2&prefix=doc&key-marker=doc.txt&version-id-marker=up-2", nil)
	mustStatus(t, resp, body, 200)
	if !strings.Contains(string(body), "<Version><Key>doc.txt</Key><VersionId>up-1</VersionId>") || strings.Contains(string(body), "<VersionId>up-2</VersionId>") {
		t.Fatalf("continuation: %s", body)
	}

	resp, body = anon.do(t, "GET", "/bkt?versions&version-id-marker=up-1", nil)
	wantError(t, resp, body, 400, "InvalidArgument")
	resp, body = anon.do(t, "GET", "/bkt?versions&key-marker=doc.txt&version-id-marker=nope", nil)
	wantError(t, resp, body, 400, "InvalidArgument")
	resp, body = anon.do(t, "GET", "/bkt?versions&max-keys=-1", nil)
	wantError(t, resp, body, 400, "InvalidArgument")
	resp, body = anon.do(t, "GET", "/bkt/doc.txt?versionId=", nil)
	wantError(t, resp, body, 400, "InvalidArgument")

	// Delete markers: versioned GET/HEAD are 405 with the marker headers;
	// an unversioned GET of a key whose latest version is a marker is 404
	// NoSuchKey with the same headers.
	for _, m := range []string{"GET", "HEAD"} {
		resp, body = anon.do(t, m, "/bkt/gone.txt?versionId=up-2", nil)
		wantError(t, resp, body, 405, "MethodNotAllowed")
		if resp.Header.Get("x-amz-delete-marker") != "true" || resp.Header.Get("x-amz-version-id") != "up-2" {
			t.Fatalf("%s delete marker headers: %v", m, resp.Header)
		}
		resp, body = anon.do(t, m, "/bkt/k/12", nil)
		wantError(t, resp, body, 404, "NoSuchKey")
		if resp.Header.Get("x-amz-delete-marker") != "true" || resp.Header.Get("x-amz-version-id") != "up-3" {
			t.Fatalf("%s deleted key headers: %v", m, resp.Header)
		}
		resp, body = anon.do(t, m, "/bkt/k/20", nil)
		mustStatus(t, resp, body, 200)
		if resp.Header.Get("x-amz-version-id") != "up-1" {
			t.Fatalf("%s k/20: x-amz-version-id %q", m, resp.Header.Get("x-amz-version-id"))
		}
	}
	// ?acl and ?tagging of a version.
	resp, body = anon.do(t, "GET", "/bkt/doc.txt?acl&versionId=up-1", nil)
	mustStatus(t, resp, body, 200)
	resp, body = anon.do(t, "GET", "/bkt/doc.txt?tagging&versionId=up-9", nil)
	wantError(t, resp, body, 404, "NoSuchVersion")
	resp, body = anon.do(t, "GET", "/bkt/k/12?tagging", nil)
	wantError(t, resp, body, 404, "NoSuchKey")

	resp, body = anon.do(t, "GET", "/bkt/nope", nil)
	wantError(t, resp, body, 404, "NoSuchKey")
	if resp.Header.Get("x-amz-delete-marker") != "" {
		t.Fatal("a never-existing key carries x-amz-delete-marker")
	}
	// Conditionals apply to the version asked for.
	old := chainVersions(ups)
	for _, w := range old {
		if w.key == "doc.txt" && w.id == "up-1" {
			resp, body = anon.do(t, "GET", "/bkt/doc.txt?versionId=up-1", nil)
			mustStatus(t, resp, body, 200)
			if !bytes.Equal(body, w.data) {
				t.Fatalf("doc.txt@up-1 = %q", body)
			}
			etag := resp.Header.Get("ETag")
			resp, _ = anon.do(t, "GET", "/bkt/doc.txt?versionId=up-1", map[string]string{"If-None-Match": etag})
			if resp.StatusCode != 304 {
				t.Fatalf("If-None-Match on a version: %d", resp.StatusCode)
			}
			resp, body = anon.do(t, "GET", "/bkt/doc.txt", map[string]string{"If-Match": etag})
			wantError(t, resp, body, 412, "PreconditionFailed")
		}
	}
}

// TestVersionsSingleUploadServed: a single upload is versioned too: one
// version per key, the upload id.
func TestVersionsSingleUploadServed(t *testing.T) {
	f := newFixture(t, map[string][]byte{"x": []byte("one"), "d/y": []byte("two")}, fixtureOpts{anonymous: true})
	resp, body := f.do(t, "GET", "/bkt?versions", nil)
	mustStatus(t, resp, body, 200)
	if strings.Count(string(body), "<Version>") != 2 || strings.Count(string(body), "<VersionId>u1</VersionId><IsLatest>true</IsLatest>") != 2 {
		t.Fatalf("%s", body)
	}
	resp, body = f.do(t, "GET", "/bkt/d/y?versionId=u1", nil)
	mustStatus(t, resp, body, 200)
	if string(body) != "two" || resp.Header.Get("x-amz-version-id") != "u1" {
		t.Fatalf("%q %v", body, resp.Header)
	}
	resp, body = f.do(t, "GET", "/bkt/d/y?versionId=u2", nil)
	wantError(t, resp, body, 404, "NoSuchVersion")
}

// TestVersionsMinioGo lists versions with minio-go (WithVersions) and gets
// each by VersionID.
func TestVersionsMinioGo(t *testing.T) {
	ups := testChain()
	f := newChainFixture(t, ups)
	host := strings.TrimPrefix(f.srv.URL, "http://")
	mc, err := minio.New(host, &minio.Options{Creds: miniocreds.NewStaticV4(testAK, testSK, ""), Secure: false})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg, err := mc.GetBucketVersioning(ctx, testBucket)
	if err != nil || !cfg.Enabled() {
		t.Fatalf("GetBucketVersioning: %+v %v", cfg, err)
	}
	want := chainVersions(ups)
	var got []minio.ObjectInfo
	for oi := range mc.ListObjects(ctx, testBucket, minio.ListObjectsOptions{WithVersions: true, Recursive: true, MaxKeys: 3}) {
		if oi.Err != nil {
			t.Fatal(oi.Err)
		}
		got = append(got, oi)
	}
	if len(got) != len(want) {
		t.Fatalf("%d versions, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Key != w.key || g.VersionID != w.id || g.IsDeleteMarker != w.dm || g.IsLatest != w.isLatest {
			t.Fatalf("entry %d = %s@%s dm=%v latest=%v, want %+v", i, g.Key, g.VersionID, g.IsDeleteMarker, g.IsLatest, w)
		}
		if w.dm {
			continue
		}
		obj, err := mc.GetObject(ctx, testBucket, w.key, minio.GetObjectOptions{VersionID: w.id})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(obj)
		obj.Close()
		if err != nil || !bytes.Equal(b, w.data) {
			t.Fatalf("minio GetObject %s@%s: %d bytes, %v", w.key, w.id, len(b), err)
		}
	}
}

// botoVersionsScript lists every version with boto3's paginator (page
// size from argv) and gets each non-marker version by VersionId, printing
// JSON for the Go side to compare with the sources.
const botoVersionsScript = `
import base64, json, sys
import boto3
from botocore.config import Config
endpoint, ak, sk, bucket, page = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key=sk,
                  region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))
out = {"status": s3.get_bucket_versioning(Bucket=bucket).get("Status"), "versions": [], "markers": [], "bodies": {}}
for p in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, PaginationConfig={"PageSize": page}):
    for v in p.get("Versions", []):
        out["versions"].append([v["Key"], v["VersionId"], v["IsLatest"], v["Size"], v["LastModified"].isoformat()])
    for d in p.get("DeleteMarkers", []):
        out["markers"].append([d["Key"], d["VersionId"], d["IsLatest"], d["LastModified"].isoformat()])
for k, vid, *_ in out["versions"]:
    r = s3.get_object(Bucket=bucket, Key=k, VersionId=vid)
    assert r["VersionId"] == vid, (k, vid, r["VersionId"])
    out["bodies"][k + "@" + vid] = base64.b64encode(r["Body"].read()).decode()
for k, vid, *_ in out["markers"]:
    try:
        s3.get_object(Bucket=bucket, Key=k, VersionId=vid)
        raise SystemExit("delete marker %s@%s was served" % (k, vid))
    except s3.exceptions.ClientError as e:
        assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 405, e.response
        assert e.response["ResponseMetadata"]["HTTPHeaders"].get("x-amz-delete-marker") == "true", e.response
# Presigned GETs of an old version, SigV2 (versionId is a signed
# sub-resource) and SigV4; changing the versionId breaks the signature.
import urllib.request, urllib.error
out["presigned"] = {}
for sv in ("s3", "s3v4"):
    c = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key=sk,
                     region_name="us-east-1", config=Config(signature_version=sv, s3={"addressing_style": "path"}))
    url = c.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "doc.txt", "VersionId": "up-1"}, ExpiresIn=600)
    assert "versionId=up-1" in url, url
    out["presigned"][sv] = base64.b64encode(urllib.request.urlopen(url).read()).decode()
    try:
        urllib.request.urlopen(url.replace("versionId=up-1", "versionId=up-2"))
        raise SystemExit("tampered versionId served (%s)" % sv)
    except urllib.error.HTTPError as e:
        assert e.code == 403, (sv, e.code)
json.dump(out, sys.stdout)
`

// TestVersionsBoto3 runs boto3 (python3 on PATH; a missing boto3 fails):
// list_object_versions shows the versions and delete markers, and
// get_object(VersionId=...) returns each upload's bytes.
func TestVersionsBoto3(t *testing.T) {
	ups := testChain()
	f := newChainFixture(t, ups)
	want := chainVersions(ups)
	for _, page := range []string{"1", "1000"} {
		cmd := exec.Command("python3", "-c", botoVersionsScript, f.srv.URL, testAK, testSK, testBucket, page)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("python3 boto3 script (page %s): %v\n%s", page, err, stderr.String())
		}
		var res struct {
			Status    string
			Versions  [][]any
			Markers   [][]any
			Bodies    map[string]string
			Presigned map[string]string
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("script output: %v: %s", err, out)
		}
		if res.Status != "Enabled" {
			t.Errorf("versioning status %q", res.Status)
		}
		var wv, wm []string
		for _, w := range want {
			if w.dm {
				wm = append(wm, fmt.Sprintf("%s@%s latest=%v %s", w.key, w.id, w.isLatest, w.created.Format("2006-01-02T15:04:05+00:00")))
				continue
			}
			wv = append(wv, fmt.Sprintf("%s@%s latest=%v size=%d %s", w.key, w.id, w.isLatest, len(w.data), testMTimeFor(w)))
			b, ok := res.Bodies[w.key+"@"+w.id]
			data, err := base64.StdEncoding.DecodeString(b)
			if !ok || err != nil || !bytes.Equal(data, w.data) {
				t.Fatalf("boto3 get_object %s@%s: %d bytes (present %v), want the source's %d", w.key, w.id, len(data), ok, len(w.data))
			}
		}
		var gv, gm []string
		for _, v := range res.Versions {
			gv = append(gv, fmt.Sprintf("%s@%s latest=%v size=%v %s", v[0], v[1], v[2], v[3], v[4]))
		}
		for _, m := range res.Markers {
			gm = append(gm, fmt.Sprintf("%s@%s latest=%v %s", m[0], m[1], m[2], m[3]))
		}
		if strings.Join(gv, "\n") != strings.Join(wv, "\n") {
			t.Fatalf("boto3 versions:\n%s\nwant:\n%s", strings.Join(gv, "\n"), strings.Join(wv, "\n"))
		}
		if strings.Join(gm, "\n") != strings.Join(wm, "\n") {
			t.Fatalf("boto3 delete markers:\n%s\nwant:\n%s", strings.Join(gm, "\n"), strings.Join(wm, "\n"))
		}
		for _, sv := range []string{"s3", "s3v4"} {
			b, err := base64.StdEncoding.DecodeString(res.Presigned[sv])
			if err != nil || string(b) != "version one\n" {
				t.Fatalf("presigned (%s) doc.txt@up-1 = %q %v", sv, b, err)
			}
		}
		if len(res.Bodies) != len(wv) {
			t.Fatalf("%d bodies, want %d", len(res.Bodies), len(wv))
		}
	}
}

// testMTimeFor is a file version's LastModified as boto3 prints it: the
// upload's file mtime (cargopack.FromMap gets the upload's time).
func testMTimeFor(w wantVersion) string { return w.created.Format("2006-01-02T15:04:05+00:00") }

// TestVersionsFaults: a store failure while the history is built is a 503
// naming the key for versioned requests (retried on the next request, not
// remembered), while a plain GET, which never needs the history, serves the
// latest bytes with their x-amz-version-id; an old version whose chunk is
// corrupt is a 500, never wrong bytes.
func TestVersionsFaults(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2025, 8, d, 0, 0, 0, 0, time.UTC) }
	ups := []chainUpload{
		{id: "v1", created: day(1), files: map[string][]byte{"f": randBytes(11, 150<<10)}, opt: cargopack.Options{FrameSize: 16 << 10}},
		{id: "v2", created: day(2), files: map[string][]byte{"f": randBytes(12, 50<<10)}, opt: cargopack.Options{FrameSize: 16 << 10}},
	}
	var faulty *faults.Faulty
	f := newChainFixtureWrap(t, ups, func(s backend.Store) backend.Store {
		faulty = faults.NewFaulty(s, faults.FaultConfig{})
		return faulty
	}, fixtureOpts{anonymous: true})

	faulty.SetHook(func(r faults.Request) faults.Fault {
		if strings.Contains(r.Key, "manifest") {
			return faults.Fault{Kind: faults.FaultError}
		}
		return faults.Fault{}
	})
	resp, body := f.do(t, "GET", "/bkt/f?versionId=v1", nil)
	wantError(t, resp, body, 503, "SlowDown")
	resp, body = f.do(t, "GET", "/bkt?versions", nil)
	wantError(t, resp, body, 503, "SlowDown")
	resp, body = f.do(t, "GET", "/bkt/f", nil)
	mustStatus(t, resp, body, 200)
	if !bytes.Equal(body, ups[1].files["f"]) || resp.Header.Get("x-amz-version-id") != "v2" {
		t.Fatalf("plain GET during a history failure: %d bytes, version %q", len(body), resp.Header.Get("x-amz-version-id"))
	}

	// Silent corruption in the old upload's chunk: frames are verified.
	faulty.SetHook(func(r faults.Request) faults.Fault {
		if r.Op == "range" && strings.Contains(r.Key, "/v1/") {
			return faults.Fault{Kind: faults.FaultFlip, FlipAt: []int64{r.Off + r.Len/2}}
		}
		return faults.Fault{}
	})
	resp, body = f.do(t, "GET", "/bkt/f?versionId=v1", nil)
	wantError(t, resp, body, 500, "InternalError")
	if !strings.Contains(f.logs.String(), `key \"f\"`) && !strings.Contains(f.logs.String(), "key f") {
		t.Errorf("the read failure does not name the key: %s", f.logs.String())
	}
	resp, body = f.do(t, "GET", "/bkt/f?versionId=v2", nil)
	mustStatus(t, resp, body, 200)
	if !bytes.Equal(body, ups[1].files["f"]) || resp.Header.Get("x-amz-version-id") != "v2" {
		t.Fatal("latest version through the history")
	}

	faulty.SetHook(nil)
	resp, body = f.do(t, "GET", "/bkt/f?versionId=v1", nil)
	mustStatus(t, resp, body, 200)
	if !bytes.Equal(body, ups[0].files["f"]) || resp.Header.Get("x-amz-version-id") != "v1" {
		t.Fatal("old version after the faults")
	}
}
