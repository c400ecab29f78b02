package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// Archived uploads end to end: a second gofakes3 behind the Glacier model
// (backend/faults) holds two uploads whose chunks are in archive classes,
// served by two `wharf serve` processes, one with --allow-restore and a
// keys file of restore grants, one without. boto3 walks a split file
// through its restore, the aws CLI a file of a chained upload, and the
// binary's `wharf restore --dry-run` reports the chunks. The model's log
// says which objects were restored: exactly the chunks holding the file.

const (
	restoreAK, restoreSK     = "RESTOREKEYOK", "restore-secret-ok"
	denyAK, denySK           = "RESTOREKEYDENY", "restore-secret-deny"
	splitOnlyAK, splitOnlySK = "RESTOREKEYSPLIT", "restore-secret-split"
	restoreDelay             = 2 * time.Second
	bulkDelay                = 8 * time.Second
)

// archivedFixture is the archived backend and its servers.
type archivedFixture struct {
	g         *faults.Glacier
	backend   *countingHandler
	s3url     string
	on, off   *wharfServer
	split     archivedUpload
	chain     archivedUpload
	splitKeys []string // chunk keys of big.bin, in file order
	firstKey  string   // big.bin's first part's chunk: left STANDARD
	baseKeys  []string // chunk keys of base.txt (upload c1, DEEP_ARCHIVE)
}

type archivedUpload struct {
	bucket, manifestKey string
	files               map[string][]byte
	res                 *cargopack.Result
}

// chunkKeysOf returns the stored keys of the objects holding path in the
// manifest res wrote under prefix (distinct, in part order).
func chunkKeysOf(res *cargopack.Result, prefix, path string) []string {
	type part struct {
		idx int
		key string
	}
	var parts []part
	for _, e := range res.Manifest.Files {
		if k, err := manifest.RelativeKey(res.Manifest.SourcePath, e.Path); err == nil && k == path {
			parts = append(parts, part{e.PartIndex, prefix + "/" + e.S3Key})
		}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].idx < parts[j].idx })
	var keys []string
	for _, p := range parts {
		if !slices.Contains(keys, p.key) {
			keys = append(keys, p.key)
		}
	}
	return keys
}

func newArchivedFixture(t *testing.T) *archivedFixture {
	t.Helper()
	ctx := context.Background()
	// The aws CLI (a second or so per command) restores with Bulk, which
	// takes longer, so that its HEAD and second restore still see the
	// restore running.
	f := &archivedFixture{g: faults.NewGlacier(faults.GlacierConfig{Delay: restoreDelay,
		TierDelay: map[string]time.Duration{backend.RetrievalBulk: bulkDelay}})}
	mem := s3mem.New()
	f.backend = &countingHandler{h: f.g.HTTP(gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())}
	srv := httptest.NewServer(f.backend)
	t.Cleanup(srv.Close)
	f.s3url = srv.URL
	client := s3.New(s3.Options{BaseEndpoint: aws.String(srv.URL), Region: "us-east-1", UsePathStyle: true,
		Credentials:                credentials.NewStaticCredentialsProvider(backendKey, backendSecret, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired})
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(srcBucket)}); err != nil {
		t.Fatal(err)
	}
	sink := cargopack.S3Sink(client)
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

	// The split upload: big.bin in 1 MiB parts, one chunk each.
	f.split = archivedUpload{bucket: "arch-split", files: map[string][]byte{
		"big.bin": randomBytes(301, 3<<20+12345), "notes/a.txt": textBytes(302, 40<<10), "notes/b.txt": textBytes(303, 900),
		"zz/other.bin": randomBytes(304, 1<<20+777),
	}}
	res, err := cargopack.Write(ctx, sink, cargopack.FromMap(f.split.files, mtime), cargopack.Options{
		Bucket: srcBucket, Prefix: "archives/arch-split", UploadID: "up-arch-split", SourcePath: "/srv/arch-split",
		FrameSize: 256 << 10, ChunkSize: 1 << 20, SplitSize: 1 << 20, ContentHash: true})
	if err != nil {
		t.Fatal(err)
	}
	f.split.res, f.split.manifestKey = res, res.ManifestKey
	f.splitKeys = chunkKeysOf(res, "archives/arch-split", "big.bin")
	if len(f.splitKeys) < 3 {
		t.Fatalf("test setup: big.bin lies in %v; want one chunk per part", f.splitKeys)
	}
	f.firstKey = f.splitKeys[0]
	f.g.SetPrefixClass(srcBucket, "archives/arch-split/uploads/", backend.ClassGlacier, "")
	f.g.SetClass(srcBucket, res.ManifestKey, backend.ClassStandard, "")
	f.g.SetClass(srcBucket, f.firstKey, backend.ClassStandard, "")

	// The chain: base upload c1 in Deep Archive, delta c2 in STANDARD.
	base := map[string][]byte{"base.txt": textBytes(311, 20<<10), "changed.txt": textBytes(312, 3000)}
	delta := map[string][]byte{"changed.txt": textBytes(313, 4000), "new.txt": textBytes(314, 500)}
	common := cargopack.Options{Bucket: srcBucket, Prefix: "archives/arch-chain", SourcePath: "/srv/arch-chain", FrameSize: 64 << 10, ContentHash: true}
	o := common
	o.UploadID, o.SyncType = "c1", "full"
	r1, err := cargopack.Write(ctx, sink, cargopack.FromMap(base, mtime), o)
	if err != nil {
		t.Fatal(err)
	}
	o = common
	o.UploadID, o.PreviousManifestID, o.SyncType = "c2", "c1", "incremental"
	r2, err := cargopack.Write(ctx, sink, cargopack.FromMap(delta, mtime.Add(time.Hour)), o)
	if err != nil {
		t.Fatal(err)
	}
	f.chain = archivedUpload{bucket: "arch-chain", manifestKey: r2.ManifestKey, res: r2,
		files: map[string][]byte{"base.txt": base["base.txt"], "changed.txt": delta["changed.txt"], "new.txt": delta["new.txt"]}}
	f.baseKeys = chunkKeysOf(r1, "archives/arch-chain", "base.txt")
	f.g.SetPrefixClass(srcBucket, "archives/arch-chain/uploads/c1/", backend.ClassDeepArchive, "")
	f.g.SetClass(srcBucket, r1.ManifestKey, backend.ClassStandard, "")

	keys := filepath.Join(t.TempDir(), "keys.yaml")
	doc := fmt.Sprintf("keys:\n  - {access_key: %s, secret_key: %s}\n  - {access_key: %s, secret_key: %s, restore: false}\n  - {access_key: %s, secret_key: %s, restore: [arch-split]}\n",
		restoreAK, restoreSK, denyAK, denySK, splitOnlyAK, splitOnlySK)
	if err := os.WriteFile(keys, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--store", "s3://",
		"--s3-endpoint", f.s3url, "--s3-path-style", "--s3-region", "us-east-1", "--keys-file", keys,
		"--restore-status-ttl", "100ms",
		"--archive", "arch-split=s3://" + srcBucket + "/" + f.split.manifestKey,
		"--archive", "arch-chain=s3://" + srcBucket + "/" + f.chain.manifestKey}
	f.on, err = startWharf(suite.bin, "archived-restore", append(args, "--allow-restore"), suite.serverEnv())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.on.Stop() })
	f.off, err = startWharf(suite.bin, "archived-norestore", args, suite.serverEnv())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.off.Stop() })
	return f
}

// startedKeys returns the objects of the model whose restore started.
func (f *archivedFixture) startedKeys() []string {
	var keys []string
	for _, s := range f.g.Started() {
		keys = append(keys, strings.TrimPrefix(s, srcBucket+"/"))
	}
	sort.Strings(keys)
	return keys
}

func TestArchivedUploads(t *testing.T) {
	f := newArchivedFixture(t)
	// The dry run first, while nothing is restored (the binary lists the
	// upload when it opens it, like a server at start).
	t.Run("wharf restore dry run", func(t *testing.T) { archivedRestoreCommand(t, f) })
	lists := f.backend.lists.Load()
	t.Run("boto3 split file", func(t *testing.T) { archivedBoto3(t, f) })
	t.Run("aws cli chained upload", func(t *testing.T) { archivedAWSCLI(t, f) })
	if n := f.backend.lists.Load() - lists; n != 0 {
		t.Errorf("the servers listed the archived backend %d times while serving (classes come from the listing at open)", n)
	}
	for _, s := range []*wharfServer{f.on, f.off} {
		if s.Exited() {
			t.Errorf("wharf serve (%s) exited: %v\n%s", s.name, s.err, tail(s.Logs(), 30))
		}
	}
}

// apiOutcome is one call's status and error as boto3 saw them.
type apiOutcome struct {
	Status       int
	Code         string
	Message      string
	StorageClass string `json:"storage_class"`
	AccessTier   string `json:"access_tier"`
}

type listedObject struct {
	Class   string
	Restore *struct {
		InProgress bool `json:"in_progress"`
		Expiry     string
	}
}

type headSeen struct {
	Class   string
	Restore *string
	Length  int64
}

func archivedBoto3(t *testing.T, f *archivedFixture) {
	py := findPython(t, "python3-boto3", "boto3")
	script, _ := filepath.Abs("clients/boto3_restore.py")
	out := t.TempDir()
	big := f.split.files["big.bin"]
	job := map[string]any{
		"endpoint": f.on.url, "norestore_endpoint": f.off.url, "out": out,
		"keys":   map[string][2]string{"ok": {restoreAK, restoreSK}, "deny": {denyAK, denySK}},
		"bucket": f.split.bucket, "key": "big.bin", "readable_range": "bytes=1000-99999",
		"wait_seconds": 60,
	}
	jb, _ := json.Marshal(job)
	home := clientHome(t)
	stdout := run(t, append(baseEnv(home), "AWS_CONFIG_FILE="+filepath.Join(home, "none"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "none"), "AWS_EC2_METADATA_DISABLED=true"), "", py, script, string(jb))
	var rep struct {
		Boto3, Botocore  string
		ListBefore       map[string]listedObject `json:"list_before"`
		ListDuring       map[string]listedObject `json:"list_during"`
		ListAfter        map[string]listedObject `json:"list_after"`
		HeadBefore       headSeen                `json:"head_before"`
		HeadDuring       headSeen                `json:"head_during"`
		HeadAfter        headSeen                `json:"head_after"`
		GetBefore        apiOutcome              `json:"get_before"`
		GetDuring        apiOutcome              `json:"get_during"`
		RestoreDeniedKey apiOutcome              `json:"restore_denied_key"`
		RestoreNoAllow   apiOutcome              `json:"restore_no_allow"`
		RestoreFirst     apiOutcome              `json:"restore_first"`
		RestoreDuring    apiOutcome              `json:"restore_during"`
		RestoreAgain     apiOutcome              `json:"restore_after"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("boto3 report is not JSON: %v\n%s", err, tail(stdout, 10))
	}
	who := "boto3 " + rep.Boto3 + "/botocore " + rep.Botocore

	// The listing shows each file's class: big.bin and notes/* in archived
	// chunks are GLACIER (its first part's chunk is STANDARD, but the
	// coldest wins); no restore yet.
	if o := rep.ListBefore["big.bin"]; o.Class != "GLACIER" || o.Restore != nil {
		t.Fatalf("%s: listed big.bin %+v before the restore", who, o)
	}
	if len(rep.ListBefore) != len(f.split.files) {
		t.Fatalf("%s: listing %v", who, rep.ListBefore)
	}
	if h := rep.HeadBefore; h.Class != "GLACIER" || h.Restore != nil || h.Length != int64(len(big)) {
		t.Fatalf("%s: HEAD before: %+v", who, h)
	}
	if g := rep.GetBefore; g.Status != 403 || g.Code != "InvalidObjectState" || g.StorageClass != "GLACIER" ||
		g.Message != "The operation is not valid for the object's storage class" {
		t.Fatalf("%s: GET before the restore: %+v", who, g)
	}
	// A range inside the first part (a STANDARD chunk) is served.
	got, err := os.ReadFile(filepath.Join(out, "range"))
	if err != nil {
		t.Fatal(err)
	}
	assertSameBytes(t, who, "big.bin bytes 1000-99999 (readable chunk)", got, big[1000:100000])

	for what, o := range map[string]apiOutcome{"a key whose grant denies restores": rep.RestoreDeniedKey, "a server without --allow-restore": rep.RestoreNoAllow} {
		if o.Status != 403 || o.Code != "AccessDenied" {
			t.Fatalf("%s: restore by %s: %+v", who, what, o)
		}
	}
	if rep.RestoreFirst.Status != 202 {
		t.Fatalf("%s: first restore: %+v", who, rep.RestoreFirst)
	}
	if h := rep.HeadDuring; h.Restore == nil || *h.Restore != `ongoing-request="true"` || h.Class != "GLACIER" {
		t.Fatalf("%s: HEAD during the restore: %+v", who, h)
	}
	if o := rep.ListDuring["big.bin"]; o.Restore == nil || !o.Restore.InProgress {
		t.Fatalf("%s: listed RestoreStatus during the restore: %+v", who, o)
	}
	if o := rep.RestoreDuring; o.Status != 409 || o.Code != "RestoreAlreadyInProgress" {
		t.Fatalf("%s: restore during the restore: %+v", who, o)
	}
	if o := rep.GetDuring; o.Status != 403 || o.Code != "InvalidObjectState" {
		t.Fatalf("%s: GET during the restore: %+v", who, o)
	}
	if h := rep.HeadAfter; h.Restore == nil || !strings.HasPrefix(*h.Restore, `ongoing-request="false", expiry-date="`) {
		t.Fatalf("%s: HEAD after the restore: %+v", who, h)
	}
	got, err = os.ReadFile(filepath.Join(out, "whole"))
	if err != nil {
		t.Fatal(err)
	}
	assertSameBytes(t, who, "big.bin after the restore", got, big)
	if o := rep.ListAfter["big.bin"]; o.Restore == nil || o.Restore.InProgress || o.Restore.Expiry == "" || o.Class != "GLACIER" {
		t.Fatalf("%s: listed RestoreStatus after the restore: %+v", who, o)
	}
	if o := rep.RestoreAgain; o.Status != 200 {
		t.Fatalf("%s: restore of the restored file: %+v", who, o)
	}

	// Exactly the archived chunks holding big.bin were restored, once each:
	// not its STANDARD first chunk, not the chunks of zz/other.bin.
	want := slices.Clone(f.splitKeys[1:])
	sort.Strings(want)
	if got := f.startedKeys(); !slices.Equal(got, want) {
		t.Fatalf("%s: restores started for %v, want exactly %v", who, got, want)
	}
	if n := len(f.g.Calls()); n != len(want) {
		t.Fatalf("%s: %d RestoreObject calls reached the store, want %d (one per chunk; the 409 and the 200 sent nothing)", who, n, len(want))
	}
	if n := f.g.Refusals(); n != 0 {
		t.Fatalf("%s: %d GETs of archived chunks reached the store", who, n)
	}
	logs := f.on.Logs()
	if !strings.Contains(logs, `"message":"restore"`) || !strings.Contains(logs, `"access_key":"`+restoreAK+`"`) ||
		!strings.Contains(logs, `"key":"`+f.splitKeys[1]+`"`) {
		t.Fatalf("no restore log line naming the key and the chunks:\n%s", tail(logs, 20))
	}
	if m := adminMetric(t, f.on, `wharf_restores_total{tier="Standard"}`); m != fmt.Sprint(len(want)) {
		t.Fatalf("wharf_restores_total{tier=\"Standard\"} = %s, want %d", m, len(want))
	}
	t.Logf("%s: split file over %d chunks: GET refused (InvalidObjectState GLACIER), readable range served, restore 202 → 409 → done → 200, %d chunks restored", who, len(f.splitKeys), len(want))
}

// adminMetric reads one series from the server's /metrics.
func adminMetric(t *testing.T, s *wharfServer, series string) string {
	t.Helper()
	resp, err := http.Get(s.adminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			return v
		}
	}
	t.Fatalf("no series %s in /metrics", series)
	return ""
}

// awsJSON runs an aws CLI command with --output json and decodes stdout.
func awsJSON(t *testing.T, cli awsCLI, env []string, v any, args ...string) {
	t.Helper()
	out := run(t, env, "", cli.path, append(args, "--output", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("aws %s: not JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// awsFails runs an aws CLI command that must fail with code.
func awsFails(t *testing.T, cli awsCLI, env []string, code string, args ...string) {
	t.Helper()
	_, stderr, err := runErr(env, "", cli.path, args...)
	if err == nil || !strings.Contains(stderr, "("+code+")") {
		t.Fatalf("aws %s: %v, stderr %q; want an error (%s)", strings.Join(args, " "), err, stderr, code)
	}
}

func archivedAWSCLI(t *testing.T, f *archivedFixture) {
	cli := findAWSCLIs(t)[0]
	env := awsEnv(t, &wharfServer{url: f.on.url, accessKey: restoreAK, secretKey: restoreSK})
	ep := []string{"--endpoint-url", f.on.url}
	b := f.chain.bucket
	s3api := func(op string, args ...string) []string { return append(append([]string{"s3api", op}, ep...), args...) }

	var listing struct {
		Contents []struct {
			Key, StorageClass string
			RestoreStatus     *struct{ IsRestoreInProgress bool }
		}
	}
	awsJSON(t, cli, env, &listing, s3api("list-objects-v2", "--bucket", b, "--optional-object-attributes", "RestoreStatus")...)
	classes := map[string]string{}
	for _, c := range listing.Contents {
		classes[c.Key] = c.StorageClass
		if c.RestoreStatus != nil {
			t.Fatalf("%s: %s has a RestoreStatus before any restore", cli.version, c.Key)
		}
	}
	if want := map[string]string{"base.txt": "DEEP_ARCHIVE", "changed.txt": "STANDARD", "new.txt": "STANDARD"}; !mapsEqual(classes, want) {
		t.Fatalf("%s: listed classes %v, want %v", cli.version, classes, want)
	}
	var h struct {
		StorageClass, Restore string
		ContentLength         int64
	}
	awsJSON(t, cli, env, &h, s3api("head-object", "--bucket", b, "--key", "base.txt")...)
	if h.StorageClass != "DEEP_ARCHIVE" || h.Restore != "" {
		t.Fatalf("%s: HEAD before: %+v", cli.version, h)
	}
	// The older version of changed.txt lives in the Deep Archive upload.
	var hv struct{ StorageClass, VersionId string }
	awsJSON(t, cli, env, &hv, s3api("head-object", "--bucket", b, "--key", "changed.txt", "--version-id", "c1")...)
	if hv.StorageClass != "DEEP_ARCHIVE" || hv.VersionId != "c1" {
		t.Fatalf("%s: HEAD of version c1: %+v", cli.version, hv)
	}
	dst := filepath.Join(t.TempDir(), "base.txt")
	awsFails(t, cli, env, "InvalidObjectState", s3api("get-object", "--bucket", b, "--key", "base.txt", dst)...)
	awsFails(t, cli, env, "InvalidObjectState", s3api("restore-object", "--bucket", b, "--key", "new.txt", "--restore-request", "Days=1")...)
	awsFails(t, cli, env, "InvalidArgument", s3api("restore-object", "--bucket", b, "--key", "base.txt",
		"--restore-request", `{"Days":1,"GlacierJobParameters":{"Tier":"Expedited"}}`)...)
	other := &wharfServer{url: f.on.url, accessKey: splitOnlyAK, secretKey: splitOnlySK}
	awsFails(t, cli, awsEnv(t, other), "AccessDenied", s3api("restore-object", "--bucket", b, "--key", "base.txt", "--restore-request", "Days=1")...)
	if n := len(f.g.Calls()); n != len(f.splitKeys)-1 {
		t.Fatalf("%s: refused restores reached the store (%d calls)", cli.version, n)
	}

	before := len(f.g.Calls())
	run(t, env, "", cli.path, s3api("restore-object", "--bucket", b, "--key", "base.txt",
		"--restore-request", `{"Days":2,"GlacierJobParameters":{"Tier":"Bulk"}}`)...)
	awsJSON(t, cli, env, &h, s3api("head-object", "--bucket", b, "--key", "base.txt")...)
	if h.Restore != `ongoing-request="true"` {
		t.Fatalf("%s: HEAD during the restore: %+v", cli.version, h)
	}
	awsFails(t, cli, env, "RestoreAlreadyInProgress", s3api("restore-object", "--bucket", b, "--key", "base.txt", "--restore-request", "Days=2")...)
	deadline := time.Now().Add(60 * time.Second)
	for strings.Contains(h.Restore, `"true"`) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		awsJSON(t, cli, env, &h, s3api("head-object", "--bucket", b, "--key", "base.txt")...)
	}
	if !strings.HasPrefix(h.Restore, `ongoing-request="false", expiry-date="`) {
		t.Fatalf("%s: HEAD after the restore: %+v", cli.version, h)
	}
	run(t, env, "", cli.path, s3api("get-object", "--bucket", b, "--key", "base.txt", dst)...)
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	assertSameBytes(t, cli.version, "base.txt after the restore", got, f.chain.files["base.txt"])

	// Only base.txt's chunk in the base upload was restored.
	var chainStarted []string
	for _, c := range f.g.Calls()[before:] {
		chainStarted = append(chainStarted, c.Key)
		if c.Days != 2 || c.Tier != "Bulk" || c.Result != backend.RestoreStarted {
			t.Errorf("%s: restore call %+v", cli.version, c)
		}
	}
	sort.Strings(chainStarted)
	want := slices.Clone(f.baseKeys)
	sort.Strings(want)
	if !slices.Equal(chainStarted, want) {
		t.Fatalf("%s: restores %v, want exactly base.txt's chunks in the ancestor upload %v", cli.version, chainStarted, want)
	}
	t.Logf("%s: chained upload: DEEP_ARCHIVE listed, GET refused, Expedited and grants refused, restore of the ancestor's chunk %v, served exact", cli.version, want)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// archivedRestoreCommand runs the binary's `wharf restore --dry-run` on the
// split upload, selecting big.bin, and checks the chunks, classes, sizes
// and states it prints against the backend's own objects.
func archivedRestoreCommand(t *testing.T, f *archivedFixture) {
	keys := f.splitKeys
	client := s3.New(s3.Options{BaseEndpoint: aws.String(f.s3url), Region: "us-east-1", UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(backendKey, backendSecret, "")})
	var held, need int64
	sizes := map[string]int64{}
	for _, k := range keys {
		out, err := client.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(srcBucket), Key: aws.String(k)})
		if err != nil {
			t.Fatal(err)
		}
		sizes[k] = aws.ToInt64(out.ContentLength)
		held += sizes[k]
		if k != f.firstKey {
			need += sizes[k]
		}
	}
	calls := len(f.g.Calls())
	out := run(t, suite.serverEnv(), "", suite.bin, "restore", "--store", "s3://", "--s3-endpoint", f.s3url, "--s3-path-style",
		"--s3-region", "us-east-1", "s3://"+srcBucket+"/"+f.split.manifestKey, "--path", "big.bin", "--days", "1", "--dry-run")
	for _, k := range keys {
		want := fmt.Sprintf("  %s\tGLACIER\t%d bytes\tarchived: needs a restore\n", k, sizes[k])
		if k == f.firstKey {
			want = fmt.Sprintf("  %s\tSTANDARD\t%d bytes\treadable\n", k, sizes[k])
		}
		if !strings.Contains(out, want) {
			t.Errorf("wharf restore --dry-run lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{
		fmt.Sprintf("selected files: 1 (%d bytes)", len(f.split.files["big.bin"])),
		fmt.Sprintf("objects:        %d of the %d holding the upload", len(keys), len(f.split.res.ObjectKeys)),
		fmt.Sprintf("compressed:     %d bytes of %d in the upload", held, f.split.res.CompressedBytes),
		fmt.Sprintf("to restore:     %d objects, %d bytes", len(keys)-1, need),
		"dry run: no restore requested",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("wharf restore --dry-run lacks %q:\n%s", want, out)
		}
	}
	if n := len(f.g.Calls()); n != calls {
		t.Fatalf("the dry run sent %d restores", n-calls)
	}
	t.Logf("wharf restore --dry-run:\n%s", out)
}
