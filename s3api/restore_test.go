package s3api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
	"github.com/wharf-s3/wharf/s3api"
)

// archivedFixture serves a direct upload (one object per file) read
// through the Glacier model: cold.bin is GLACIER, deep.bin DEEP_ARCHIVE,
// it.bin Intelligent-Tiering in ARCHIVE_ACCESS, warm.txt STANDARD.
type archivedFixture struct {
	files map[string][]byte
	g     *faults.Glacier
	reg   *prometheus.Registry
	logs  *syncWriter
	url   string
}

func newArchivedFixture(t *testing.T, allowRestore bool, keys []auth.Key) *archivedFixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	files := map[string][]byte{
		"cold.bin": randBytes(21, 300<<10), "deep.bin": randBytes(22, 5000),
		"it.bin": randBytes(23, 7000), "warm.txt": []byte("warm bytes\n"),
	}
	res, err := cargopack.Write(ctx, cargopack.DirSink(dir), cargopack.FromMap(files, testMTime),
		cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1", Direct: true})
	if err != nil {
		t.Fatal(err)
	}
	g := faults.NewGlacier(faults.GlacierConfig{Delay: 300 * time.Millisecond})
	g.SetClass("src", "p/uploads/u1/files/cold.bin", backend.ClassGlacier, "")
	g.SetClass("src", "p/uploads/u1/files/deep.bin", backend.ClassDeepArchive, "")
	g.SetClass("src", "p/uploads/u1/files/it.bin", backend.ClassIntelligentTiering, backend.TierArchiveAccess)
	a, err := archiveview.Open(ctx, g.Store(backend.NewFileStore(dir)), "src", res.ManifestKey,
		archiveview.Options{Name: testBucket, StorageClasses: true, RestoreTTL: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	v, err := auth.New(auth.Config{Keys: keys, Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	f := &archivedFixture{files: files, g: g, reg: prometheus.NewRegistry(), logs: &syncWriter{w: &bytes.Buffer{}}}
	srv := httptest.NewServer(s3api.New(s3api.Config{
		Catalog:      catalog.NewStatic(map[string]*archiveview.Archive{testBucket: a}),
		Verifier:     v,
		Logger:       zerolog.New(f.logs),
		Registerer:   f.reg,
		AllowRestore: allowRestore,
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// restoreStatus sends RestoreObject and returns the HTTP status. The
// SDK signs the body's sha256; with a checksum algorithm it also sends
// x-amz-checksum-<alg>, which wharf checks too.
func restoreStatus(t *testing.T, c *s3.Client, key string, days int32, tier types.Tier, alg ...types.ChecksumAlgorithm) (int, error) {
	t.Helper()
	in := &s3.RestoreObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key), RestoreRequest: &types.RestoreRequest{}}
	if len(alg) > 0 {
		in.ChecksumAlgorithm = alg[0]
	}
	if days > 0 {
		in.RestoreRequest.Days = aws.Int32(days)
	}
	if tier != "" {
		in.RestoreRequest.GlacierJobParameters = &types.GlacierJobParameters{Tier: tier}
	}
	out, err := c.RestoreObject(context.Background(), in)
	if err != nil {
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) {
			return re.HTTPStatusCode(), err
		}
		return 0, err
	}
	if resp, ok := awsmiddleware.GetRawResponse(out.ResultMetadata).(*smithyhttp.Response); ok {
		return resp.StatusCode, nil
	}
	t.Fatal("no raw response")
	return 0, nil
}

// TestArchivedFilesSDK drives the archived-file surface with aws-sdk-go-v2:
// listing classes and RestoreStatus, HEAD before, during and after a
// restore, GET refused with InvalidObjectState (StorageClass, AccessTier)
// and then served exact, RestoreObject's status codes, the restore metric
// and the restore log line.
func TestArchivedFilesSDK(t *testing.T) {
	f := newArchivedFixture(t, true, []auth.Key{{AccessKey: testAK, SecretKey: testSK}})
	c := newSDKClient(t, f.url, testAK, testSK)
	ctx := context.Background()

	list := func() map[string]types.Object {
		t.Helper()
		out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(testBucket),
			OptionalObjectAttributes: []types.OptionalObjectAttributes{types.OptionalObjectAttributesRestoreStatus}})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]types.Object{}
		for _, o := range out.Contents {
			m[aws.ToString(o.Key)] = o
		}
		return m
	}
	l := list()
	for k, want := range map[string]types.ObjectStorageClass{"cold.bin": "GLACIER", "deep.bin": "DEEP_ARCHIVE", "it.bin": "INTELLIGENT_TIERING", "warm.txt": "STANDARD"} {
		if l[k].StorageClass != want || l[k].RestoreStatus != nil {
			t.Fatalf("listed %s: %s %+v, want %s without RestoreStatus", k, l[k].StorageClass, l[k].RestoreStatus, want)
		}
	}
	head := func(key string) *s3.HeadObjectOutput {
		t.Helper()
		out, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("HEAD %s: %v", key, err)
		}
		return out
	}
	if h := head("cold.bin"); h.StorageClass != "GLACIER" || h.Restore != nil || aws.ToInt64(h.ContentLength) != 300<<10 {
		t.Fatalf("HEAD cold before: %s %v", h.StorageClass, h.Restore)
	}
	if h := head("it.bin"); h.StorageClass != "INTELLIGENT_TIERING" || h.ArchiveStatus != "ARCHIVE_ACCESS" {
		t.Fatalf("HEAD it.bin: %s %s", h.StorageClass, h.ArchiveStatus)
	}
	get := func(key, rng string) ([]byte, error) {
		in := &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key)}
		if rng != "" {
			in.Range = aws.String(rng)
		}
		out, err := c.GetObject(ctx, in)
		if err != nil {
			return nil, err
		}
		defer out.Body.Close()
		return io.ReadAll(out.Body)
	}
	for _, tc := range []struct{ key, class, tier string }{{"cold.bin", "GLACIER", ""}, {"deep.bin", "DEEP_ARCHIVE", ""}, {"it.bin", "INTELLIGENT_TIERING", "ARCHIVE_ACCESS"}} {
		_, err := get(tc.key, "bytes=0-9")
		var ios *types.InvalidObjectState
		if !errors.As(err, &ios) || string(ios.StorageClass) != tc.class || string(ios.AccessTier) != tc.tier ||
			!strings.Contains(aws.ToString(ios.Message), "not valid for the object's storage class") {
			t.Fatalf("GET %s: %v; want InvalidObjectState %s/%s", tc.key, err, tc.class, tc.tier)
		}
	}
	// The refusal carries none of the object's headers: a client that
	// validates x-amz-checksum-* (x-amz-checksum-mode: ENABLED) would
	// apply them to the error document.
	req, _ := http.NewRequest("GET", f.url+"/"+testBucket+"/cold.bin", nil)
	req.Header.Set("x-amz-checksum-mode", "ENABLED")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, h := range []string{"x-amz-checksum-sha256", "x-amz-checksum-type", "x-amz-storage-class", "ETag", "Last-Modified", "x-amz-meta-mtime"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("InvalidObjectState response carries %s: %q", h, v)
		}
	}
	if resp.StatusCode != 403 || !strings.Contains(string(body), "<StorageClass>GLACIER</StorageClass>") || strings.Contains(string(body), "AccessTier") {
		t.Fatalf("raw GET: %d %s", resp.StatusCode, body)
	}
	if b, err := get("warm.txt", ""); err != nil || !bytes.Equal(b, f.files["warm.txt"]) {
		t.Fatalf("GET warm: %v", err)
	}
	if n := f.g.Refusals(); n != 0 {
		t.Fatalf("%d archived GETs reached the store", n)
	}

	// RestoreObject's answers.
	for _, tc := range []struct {
		key    string
		days   int32
		tier   types.Tier
		status int
		code   string
		alg    types.ChecksumAlgorithm
	}{
		{"warm.txt", 1, "", 403, "InvalidObjectState", ""},
		{"nope", 1, "", 404, "NoSuchKey", ""},
		{"deep.bin", 1, types.TierExpedited, 400, "InvalidArgument", ""},
		{"deep.bin", 0, types.TierBulk, 400, "InvalidArgument", ""},
		{"it.bin", 3, "", 400, "InvalidArgument", ""},
		{"cold.bin", 2, types.TierBulk, 202, "", types.ChecksumAlgorithmCrc32},
		{"cold.bin", 2, types.TierBulk, 409, "RestoreAlreadyInProgress", types.ChecksumAlgorithmSha256},
		{"it.bin", 0, types.TierExpedited, 202, "", types.ChecksumAlgorithmCrc64nvme},
	} {
		status, err := restoreStatus(t, c, tc.key, tc.days, tc.tier, tc.alg)
		if status != tc.status || apiCode(err) != tc.code {
			t.Fatalf("restore %s %d %s: %d %v; want %d %s", tc.key, tc.days, tc.tier, status, err, tc.status, tc.code)
		}
	}
	// The InvalidArgument message is the refusal's reason, as
	// backend.InvalidRestoreError carries it (issue 21: it was sliced out
	// of the error's text), without the sentinel or the object's name.
	_, err = restoreStatus(t, c, "deep.bin", 1, types.TierExpedited)
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorMessage() != "Expedited retrieval is not available for objects in DEEP_ARCHIVE" {
		t.Fatalf("InvalidArgument message: %v", err)
	}
	if h := head("cold.bin"); aws.ToString(h.Restore) != `ongoing-request="true"` {
		t.Fatalf("HEAD during the restore: %q", aws.ToString(h.Restore))
	}
	if l := list(); l["cold.bin"].RestoreStatus == nil || !aws.ToBool(l["cold.bin"].RestoreStatus.IsRestoreInProgress) {
		t.Fatalf("listed RestoreStatus during the restore: %+v", l["cold.bin"].RestoreStatus)
	}
	deadline := time.Now().Add(10 * time.Second)
	var h *s3.HeadObjectOutput
	for {
		h = head("cold.bin")
		if !strings.Contains(aws.ToString(h.Restore), `"true"`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := aws.ToString(h.Restore); !strings.HasPrefix(r, `ongoing-request="false", expiry-date="`) {
		t.Fatalf("HEAD after the restore: %q", r)
	}
	if b, err := get("cold.bin", ""); err != nil || !bytes.Equal(b, f.files["cold.bin"]) {
		t.Fatalf("GET after the restore: %v", err)
	}
	if b, err := get("cold.bin", "bytes=1000-2999"); err != nil || !bytes.Equal(b, f.files["cold.bin"][1000:3000]) {
		t.Fatalf("ranged GET after the restore: %v", err)
	}
	if l := list(); l["cold.bin"].RestoreStatus == nil || aws.ToBool(l["cold.bin"].RestoreStatus.IsRestoreInProgress) ||
		l["cold.bin"].RestoreStatus.RestoreExpiryDate == nil || l["cold.bin"].StorageClass != "GLACIER" {
		t.Fatalf("listed RestoreStatus after the restore: %+v", l["cold.bin"].RestoreStatus)
	}
	if status, err := restoreStatus(t, c, "cold.bin", 2, types.TierBulk); status != 200 || err != nil {
		t.Fatalf("restore of a restored file: %d %v", status, err)
	}
	if got := len(f.g.Started()); got != 2 {
		t.Fatalf("%d restores started in the store, want 2 (cold.bin, it.bin)", got)
	}
	if v := counterValue(t, f.reg, "wharf_restores_total", "Bulk"); v != 1 {
		t.Fatalf("wharf_restores_total{tier=Bulk} = %v", v)
	}
	if v := counterValue(t, f.reg, "wharf_restore_bytes_total", "Bulk"); v != 300<<10 {
		t.Fatalf("wharf_restore_bytes_total{tier=Bulk} = %v", v)
	}
	logs := f.logs.String()
	if !strings.Contains(logs, `"message":"restore"`) || !strings.Contains(logs, `"access_key":"`+testAK+`"`) ||
		!strings.Contains(logs, `"key":"p/uploads/u1/files/cold.bin","size":307200,"class":"GLACIER","sent":true,"result":"started"`) {
		t.Fatalf("no restore log line with objects and key:\n%s", logs)
	}
}

// counterValue reads one tier-labelled series of a counter vector on reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name, tier string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tier" && l.GetValue() == tier {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series %s{tier=%q}", name, tier)
	return 0
}

// TestRestoreRefusals: RestoreObject is refused (403 AccessDenied, nothing
// sent) without AllowRestore, for a key whose grant denies it or names
// other buckets, and for anonymous callers; other writes stay refused.
func TestRestoreRefusals(t *testing.T) {
	keys := []auth.Key{
		{AccessKey: testAK, SecretKey: testSK},
		{AccessKey: "DENIED", SecretKey: testSK, Restore: auth.RestoreGrant{Deny: true}},
		{AccessKey: "ELSEWHERE", SecretKey: testSK, Restore: auth.RestoreGrant{Buckets: []string{"other"}}},
		{AccessKey: "GRANTED", SecretKey: testSK, Buckets: []string{testBucket}, Restore: auth.RestoreGrant{Buckets: []string{testBucket}}},
	}
	off := newArchivedFixture(t, false, keys)
	on := newArchivedFixture(t, true, keys)
	for _, tc := range []struct {
		name string
		f    *archivedFixture
		ak   string
		want int
	}{
		{"server without --allow-restore", off, testAK, 403},
		{"grant false", on, "DENIED", 403},
		{"grant for another bucket", on, "ELSEWHERE", 403},
		{"granted", on, "GRANTED", 202},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newSDKClient(t, tc.f.url, tc.ak, testSK)
			status, err := restoreStatus(t, c, "cold.bin", 1, types.TierStandard)
			if status != tc.want || (tc.want == 403 && apiCode(err) != "AccessDenied") {
				t.Fatalf("%d %v; want %d", status, err, tc.want)
			}
		})
	}
	if n := len(off.g.Calls()); n != 0 {
		t.Fatalf("%d RestoreObject calls reached the store of the server without --allow-restore", n)
	}
	if n := len(on.g.Calls()); n != 1 {
		t.Fatalf("%d RestoreObject calls, want 1 (the granted key)", n)
	}
	// Anonymous, and other POSTs, with restores on.
	body := `<RestoreRequest><Days>1</Days></RestoreRequest>`
	for _, path := range []string{"/" + testBucket + "/deep.bin?restore", "/" + testBucket + "/deep.bin?uploads", "/" + testBucket + "?delete"} {
		resp, err := http.Post(on.url+path, "application/xml", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || !strings.Contains(string(b), "<Code>AccessDenied</Code>") {
			t.Fatalf("anonymous POST %s: %d %s", path, resp.StatusCode, b)
		}
	}
	if n := len(on.g.Calls()); n != 1 {
		t.Fatalf("%d RestoreObject calls after anonymous POSTs", n)
	}
}

// TestRestorePresignedPayloadHash: a presigned RestoreObject whose query
// signs the body's sha256 (X-Amz-Content-Sha256 in the URL) is served only
// with that body. Another body (a costlier tier, more days) is refused with
// XAmzContentSHA256Mismatch and reaches no store, as AWS refuses a body
// that is not the one signed.
func TestRestorePresignedPayloadHash(t *testing.T) {
	f := newArchivedFixture(t, true, []auth.Key{{AccessKey: testAK, SecretKey: testSK}})
	signedBody := `<RestoreRequest><Days>1</Days><GlacierJobParameters><Tier>Bulk</Tier></GlacierJobParameters></RestoreRequest>`
	sum := sha256.Sum256([]byte(signedBody))
	hash := hex.EncodeToString(sum[:])
	presign := func(t *testing.T, key string) string {
		req, err := http.NewRequest(http.MethodPost, f.url+"/"+testBucket+"/"+key+"?restore&X-Amz-Expires=600&X-Amz-Content-Sha256="+hash, nil)
		if err != nil {
			t.Fatal(err)
		}
		u, _, err := v4.NewSigner().PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSK},
			req, hash, "s3", "us-east-1", time.Now(), func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	post := func(t *testing.T, u, body string) (int, string) {
		resp, err := http.Post(u, "application/xml", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	other := `<RestoreRequest><Days>30</Days><GlacierJobParameters><Tier>Expedited</Tier></GlacierJobParameters></RestoreRequest>`
	if status, body := post(t, presign(t, "cold.bin"), other); status != 400 || !strings.Contains(body, "<Code>XAmzContentSHA256Mismatch</Code>") {
		t.Fatalf("presigned restore with another body than signed: %d %s", status, body)
	}
	if calls := f.g.Calls(); len(calls) != 0 {
		t.Fatalf("a body that was not signed reached the store: %+v", calls)
	}
	if status, body := post(t, presign(t, "deep.bin"), signedBody); status != 202 {
		t.Fatalf("presigned restore with the signed body: %d %s", status, body)
	}
	if calls := f.g.Calls(); len(calls) != 1 || calls[0].Days != 1 || calls[0].Tier != "Bulk" {
		t.Fatalf("restore calls %+v, want one of 1 day, Bulk", calls)
	}
}
