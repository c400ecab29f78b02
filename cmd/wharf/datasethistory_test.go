package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// A dataset of three published versions on gofakes3, in the CargoShip
// layout, versions 2 and 3 storing their chunks under version 1's folder
// (named by full key): chunks shared with an older version.
var (
	hsIDs   = []string{"20261101T000001Z-111111", "20261102T000001Z-222222", "20261103T000001Z-333333"}
	hsFiles = []map[string][]byte{
		{"same.txt": []byte("never changes\n"), "changed.txt": []byte("one\n"), "gone.txt": []byte("bye\n"),
			"big.bin": bytes.Repeat([]byte("version one big file\n"), 20000)},
		{"same.txt": []byte("never changes\n"), "changed.txt": []byte("two, longer\n"), "gone.txt": []byte("bye\n"),
			"big.bin": bytes.Repeat([]byte("version one big file\n"), 20000), "new.txt": []byte("new in two\n")},
		{"same.txt": []byte("never changes\n"), "changed.txt": []byte("three!\n"),
			"big.bin": bytes.Repeat([]byte("version one big file\n"), 20000), "new.txt": []byte("new in two\n")},
	}
)

type historyLake struct {
	*datasetLake
	mans []string
}

func newHistoryLake(t *testing.T) *historyLake {
	t.Helper()
	d := &historyLake{datasetLake: newDatasetLake(t)}
	for i, id := range hsIDs {
		o := cargopack.Options{Prefix: "datasets/sea/v/" + hsIDs[0], UploadID: fmt.Sprintf("20261101-hist%04d", i+1),
			Created: time.Date(2026, 11, 1+i, 0, 0, 1, 0, time.UTC)}
		var sink cargopack.Sink
		if i > 0 {
			o.KeyStyle = cargopack.PrefixIncluded
			sink = movedManifest{cargopack.S3Sink(d.client), hsIDs[0], id}
		}
		r := d.pack(t, sink, hsFiles[i], o)
		d.mans = append(d.mans, strings.Replace(r.ManifestKey, "/v/"+hsIDs[0]+"/", "/v/"+id+"/", 1))
	}
	d.pointAt(t, 2, 1)
	return d
}

// pointAt writes datasets/sea/CURRENT naming version i, previous prev.
func (d *historyLake) pointAt(t *testing.T, i, prev int) {
	t.Helper()
	body := fmt.Sprintf(`{"schema":"cargoship.current/1","version_id":%q,"manifest_key":%q,"index_key":%q,`+
		`"index_sha256":"5c2324ae6e94c29a162fed5f1a2c52c180f6b1ff47995d7270e680142b0e73a8","created":"2026-11-03T00:00:05Z",`+
		`"file_count":%d,"total_bytes":0,"previous_version_id":%q}`, hsIDs[i], d.mans[i], "datasets/sea/v/"+hsIDs[i]+"/index.lith", len(hsFiles[i]), hsIDs[prev])
	if _, err := d.client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("lake"),
		Key: aws.String("datasets/sea/CURRENT"), Body: strings.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
}

// keyVersions lists every version of bucket through aws-sdk-go-v2, one
// key's versions as "V<n>" or "DM<n>" newest first, checking IsLatest.
func keyVersions(t *testing.T, c *s3.Client, bucket string, maxKeys int32) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), MaxKeys: aws.Int32(maxKeys)}
	type ent struct {
		key, name string
		latest    bool
	}
	for pages := 0; ; pages++ {
		res, err := c.ListObjectVersions(context.Background(), in)
		if err != nil {
			t.Fatalf("ListObjectVersions %s: %v", bucket, err)
		}
		var ents []ent
		for _, v := range res.Versions {
			ents = append(ents, ent{aws.ToString(v.Key), "V" + hsName(aws.ToString(v.VersionId)), aws.ToBool(v.IsLatest)})
		}
		for _, m := range res.DeleteMarkers {
			ents = append(ents, ent{aws.ToString(m.Key), "DM" + hsName(aws.ToString(m.VersionId)), aws.ToBool(m.IsLatest)})
		}
		// The SDK splits versions and markers: order them back within
		// each key, the latest first, then newer ids first (true of this
		// dataset's histories).
		sort.SliceStable(ents, func(i, j int) bool {
			if ents[i].key != ents[j].key {
				return ents[i].key < ents[j].key
			}
			if ents[i].latest != ents[j].latest {
				return ents[i].latest
			}
			return strings.TrimLeft(ents[i].name, "VDM") > strings.TrimLeft(ents[j].name, "VDM")
		})
		for _, e := range ents {
			if (len(out[e.key]) == 0) != e.latest {
				t.Errorf("%s %s: IsLatest %v", e.key, e.name, e.latest)
			}
			out[e.key] = append(out[e.key], e.name)
		}
		if !aws.ToBool(res.IsTruncated) {
			return out
		}
		if pages > 100 {
			t.Fatal("ListObjectVersions does not end")
		}
		in.KeyMarker, in.VersionIdMarker = res.NextKeyMarker, res.NextVersionIdMarker
	}
}

func hsName(id string) string {
	for i, h := range hsIDs {
		if h == id {
			return fmt.Sprint(i + 1)
		}
	}
	return "?" + id
}

func wantVersions(t *testing.T, got map[string][]string, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if g := strings.Join(got[k], " "); g != w {
			t.Errorf("%s: versions %q, want %q", k, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("versions of %d keys %v, want %d", len(got), got, len(want))
	}
}

// getVersion reads bucket/key?versionId=id with aws-sdk-go-v2.
func getVersion(t *testing.T, c *s3.Client, bucket, key, id string) ([]byte, string, error) {
	t.Helper()
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	if id != "" {
		in.VersionId = aws.String(id)
	}
	out, err := c.GetObject(context.Background(), in)
	if err != nil {
		return nil, "", err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return b, aws.ToString(out.VersionId), err
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return fmt.Sprint(re.HTTPStatusCode())
	}
	return err.Error()
}

// awsCLI runs the aws CLI against wharf, unsigned, in a private HOME.
func awsCLI(t *testing.T, endpoint string, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("aws")
	if err != nil {
		t.Fatal("aws CLI not found: install the Debian package awscli")
	}
	home := t.TempDir()
	cmd := exec.Command(bin, append([]string{"--endpoint-url", endpoint, "--no-sign-request", "--region", "us-east-1", "--output", "json"}, args...)...)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "AWS_CONFIG_FILE=" + filepath.Join(home, "none"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "none"), "AWS_EC2_METADATA_DISABLED=true", "AWS_PAGER="}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// TestServeDatasetHistory: wharf serve over a dataset of three published
// versions, read by aws-sdk-go-v2, the aws CLI and boto3: a changed file has a
// version per change, an unchanged one one version (the version its bytes
// first appeared in, also sent as x-amz-version-id), a deleted one a
// delete marker over its old version; versionId= reads byte for byte,
// from versions whose chunks lie under an older version's folder; a
// promote at a rescan gives the new version's history; a pruned version
// ends the history cleanly (its id is then no version: 404). A plain GET
// before any versioned request sends no x-amz-version-id and lists
// nothing.
func TestServeDatasetHistory(t *testing.T) {
	d := newHistoryLake(t)
	rescan := make(chan struct{})
	scanned := make(chan error, 4)
	addr, _, logs, _ := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: "s3://", S3: d.s3Config(),
		Aliases:   []serveAlias{{Name: "sea", Target: "s3://lake/datasets/sea@current"}},
		Anonymous: true, CacheBytes: 16 << 20, RetireGrace: 10 * time.Millisecond, WaitOpen: true,
		rescanNow: rescan, scanned: func(err error) { scanned <- err },
	})
	rescanNow := func() {
		t.Helper()
		rescan <- struct{}{}
		if err := <-scanned; err != nil {
			t.Fatal(err)
		}
	}
	endpoint := "http://" + addr
	c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: aws.AnonymousCredentials{}})

	// A plain GET first: the current bytes, no version id, no listing.
	n := d.log.len()
	b, vid, err := getVersion(t, c, "sea", "same.txt", "")
	if err != nil || !bytes.Equal(b, hsFiles[2]["same.txt"]) || vid != "" {
		t.Fatalf("plain GET before the history: %q %q %v, want the bytes and no version id", b, vid, err)
	}
	for _, r := range d.log.since(n) {
		if strings.HasPrefix(r, "GET /lake ") {
			t.Fatalf("a plain GET listed the store: %s", r)
		}
	}

	// The history: one listing of the versions folder, one manifest GET per
	// older version.
	n = d.log.len()
	start := time.Now()
	all := map[string]string{"same.txt": "V1", "changed.txt": "V3 V2 V1", "gone.txt": "DM3 V1", "big.bin": "V1", "new.txt": "V2"}
	wantVersions(t, keyVersions(t, c, "sea", 1000), all)
	t.Logf("history of 3 versions built and listed in %v: %v", time.Since(start), d.log.since(n))
	lists := 0
	for _, r := range d.log.since(n) {
		if strings.HasPrefix(r, "GET /lake ") {
			lists++
		}
	}
	if lists != 1 {
		t.Fatalf("building the history listed %d times, want 1: %v", lists, d.log.since(n))
	}
	wantVersions(t, keyVersions(t, c, "sea", 2), all) // paged by key and version-id markers

	// versionId= reads, byte for byte; x-amz-version-id is the key's version.
	for vi, id := range hsIDs {
		for key := range all {
			b, vid, err := getVersion(t, c, "sea", key, id)
			want, exists := hsFiles[vi][key]
			switch {
			case exists && (err != nil || !bytes.Equal(b, want)):
				t.Errorf("%s as of V%d: %d bytes, %v; want %d bytes", key, vi+1, len(b), err, len(want))
			case exists && vid == "":
				t.Errorf("%s as of V%d: no x-amz-version-id", key, vi+1)
			case !exists && err == nil:
				t.Errorf("%s as of V%d: %q, want an error", key, vi+1, b)
			}
		}
	}
	if _, _, err := getVersion(t, c, "sea", "gone.txt", hsIDs[2]); apiCode(err) != "MethodNotAllowed" && apiCode(err) != "405" {
		t.Fatalf("gone.txt as of V3 (a delete marker): %v, want 405 MethodNotAllowed", err)
	}
	if _, _, err := getVersion(t, c, "sea", "new.txt", hsIDs[0]); apiCode(err) != "NoSuchVersion" {
		t.Fatalf("new.txt as of V1 (before it existed): %v, want NoSuchVersion", err)
	}
	if _, vid, _ := getVersion(t, c, "sea", "same.txt", ""); vid != hsIDs[0] {
		t.Fatalf("same.txt's x-amz-version-id %q, want %s (where its bytes first appeared)", vid, hsIDs[0])
	}
	if _, vid, _ := getVersion(t, c, "sea", "changed.txt", ""); vid != hsIDs[2] {
		t.Fatalf("changed.txt's x-amz-version-id %q, want %s", vid, hsIDs[2])
	}
	resp, err := http.Get(endpoint + "/sea/gone.txt")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 || resp.Header.Get("x-amz-delete-marker") != "true" || resp.Header.Get("x-amz-version-id") != hsIDs[2] {
		t.Fatalf("GET gone.txt: %d, delete marker %q version %q", resp.StatusCode, resp.Header.Get("x-amz-delete-marker"), resp.Header.Get("x-amz-version-id"))
	}

	// The aws CLI: list-object-versions and get-object --version-id.
	var lov struct {
		Versions []struct {
			Key, VersionId string
			IsLatest       bool
			Size           int64
		}
		DeleteMarkers []struct {
			Key, VersionId string
			IsLatest       bool
		}
	}
	if err := json.Unmarshal(awsCLI(t, endpoint, "s3api", "list-object-versions", "--bucket", "sea"), &lov); err != nil {
		t.Fatal(err)
	}
	cli := map[string]int{}
	for _, v := range lov.Versions {
		cli[v.Key]++
	}
	if cli["changed.txt"] != 3 || cli["same.txt"] != 1 || cli["gone.txt"] != 1 || len(lov.DeleteMarkers) != 1 ||
		lov.DeleteMarkers[0].Key != "gone.txt" || lov.DeleteMarkers[0].VersionId != hsIDs[2] || !lov.DeleteMarkers[0].IsLatest {
		t.Fatalf("aws s3api list-object-versions: %+v", lov)
	}
	out := filepath.Join(t.TempDir(), "changed-v1")
	awsCLI(t, endpoint, "s3api", "get-object", "--bucket", "sea", "--key", "changed.txt", "--version-id", hsIDs[0], out)
	if got, _ := os.ReadFile(out); !bytes.Equal(got, hsFiles[0]["changed.txt"]) {
		t.Fatalf("aws s3api get-object --version-id V1: %q", got)
	}
	awsCLI(t, endpoint, "s3api", "get-object", "--bucket", "sea", "--key", "big.bin", "--version-id", hsIDs[1], out)
	if got, _ := os.ReadFile(out); !bytes.Equal(got, hsFiles[1]["big.bin"]) {
		t.Fatalf("aws s3api get-object big.bin --version-id V2: %d bytes", len(got))
	}

	// boto3: list_object_versions and get_object(VersionId=...).
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 not found: install python3 and python3-boto3")
	}
	script := `
import sys, json, boto3
from botocore import UNSIGNED
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1", config=Config(signature_version=UNSIGNED))
r = s3.list_object_versions(Bucket="sea", Prefix="changed.txt")
body = s3.get_object(Bucket="sea", Key="changed.txt", VersionId=sys.argv[2])["Body"].read()
print(json.dumps({"versions": [v["VersionId"] for v in r.get("Versions", [])], "body": body.decode()}))
`
	cmd := exec.Command(py, "-c", script, endpoint, hsIDs[1])
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent", "AWS_EC2_METADATA_DISABLED=true"}
	pyOut, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("boto3: %v\n%s", err, pyOut)
	}
	var bo struct {
		Versions []string `json:"versions"`
		Body     string   `json:"body"`
	}
	if err := json.Unmarshal(pyOut, &bo); err != nil {
		t.Fatalf("boto3 output %q: %v", pyOut, err)
	}
	if strings.Join(bo.Versions, " ") != hsIDs[2]+" "+hsIDs[1]+" "+hsIDs[0] || bo.Body != string(hsFiles[1]["changed.txt"]) {
		t.Fatalf("boto3: versions %v, body as of V2 %q", bo.Versions, bo.Body)
	}

	// A promote (CURRENT back to V2, replacing V3): the history is V2's.
	d.pointAt(t, 1, 2)
	rescanNow()
	wantVersions(t, keyVersions(t, c, "sea", 1000),
		map[string]string{"same.txt": "V1", "changed.txt": "V2 V3 V1", "gone.txt": "V2 DM3 V1", "big.bin": "V1", "new.txt": "V2"})
	if _, vid, _ := getVersion(t, c, "sea", "changed.txt", ""); vid != hsIDs[1] {
		t.Fatalf("after the promote: changed.txt's x-amz-version-id %q, want %s", vid, hsIDs[1])
	}

	// A prune (--keep 2): V1's manifest is gone, its folder keeps the
	// chunks V2 and V3 need. Back at V3: the history ends at V2, cleanly.
	if _, err := d.client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String("lake"), Key: aws.String(d.mans[0])}); err != nil {
		t.Fatal(err)
	}
	d.pointAt(t, 2, 1)
	rescanNow()
	wantVersions(t, keyVersions(t, c, "sea", 1000),
		map[string]string{"same.txt": "V2", "changed.txt": "V3 V2", "gone.txt": "DM3 V2", "big.bin": "V2", "new.txt": "V2"})
	if _, _, err := getVersion(t, c, "sea", "changed.txt", hsIDs[0]); apiCode(err) != "NoSuchVersion" {
		t.Fatalf("a pruned version: %v, want NoSuchVersion", err)
	}
	if b, _, err := getVersion(t, c, "sea", "big.bin", hsIDs[1]); err != nil || !bytes.Equal(b, hsFiles[1]["big.bin"]) {
		t.Fatalf("big.bin as of V2 after the prune: %d bytes, %v", len(b), err)
	}
	if !strings.Contains(logs.String(), "pruned") || !strings.Contains(logs.String(), "dataset history built") {
		t.Errorf("the history's end is not logged")
	}
}

// TestCLIDatasetHistory: wharf ls --versions on s3://B/D@current lists the
// published versions as serve does (the real binary); inspect --json
// reports the history's length from one listing; a pinned version lists
// one version per key.
func TestCLIDatasetHistory(t *testing.T) {
	d := newHistoryLake(t)
	out, errOut, code := d.run(t, "ls", "--versions", "--recursive", "--json", "s3://lake/datasets/sea@current")
	if code != 0 {
		t.Fatalf("ls --versions: exit %d: %s", code, errOut)
	}
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct {
			Key          string `json:"key"`
			VersionID    string `json:"version_id"`
			DeleteMarker bool   `json:"delete_marker"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		n := "V"
		if e.DeleteMarker {
			n = "DM"
		}
		got[e.Key] = append(got[e.Key], n+hsName(e.VersionID))
	}
	wantVersions(t, got, map[string]string{"same.txt": "V1", "changed.txt": "V3 V2 V1", "gone.txt": "DM3 V1", "big.bin": "V1", "new.txt": "V2"})

	out, errOut, code = d.run(t, "ls", "--versions", "--recursive", "--dataset-history", "2", "s3://lake/datasets/sea@current")
	if code != 0 || !strings.Contains(out, hsIDs[1]) || strings.Contains(out, hsIDs[0]) {
		t.Fatalf("ls --versions --dataset-history 2: exit %d\n%s%s", code, out, errOut)
	}

	out, errOut, code = d.run(t, "inspect", "--json", "s3://lake/datasets/sea@current")
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, errOut)
	}
	var info struct {
		Dataset struct {
			History struct {
				Versions   int      `json:"versions"`
				VersionIDs []string `json:"version_ids"`
				Ended      string   `json:"ended"`
			} `json:"history"`
		} `json:"dataset"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatal(err)
	}
	h := info.Dataset.History
	if h.Versions != 3 || strings.Join(h.VersionIDs, " ") != hsIDs[2]+" "+hsIDs[1]+" "+hsIDs[0] || !strings.Contains(h.Ended, "oldest") {
		t.Fatalf("inspect --json history: %+v", h)
	}

	out, errOut, code = d.run(t, "ls", "--versions", "--recursive", "s3://lake/datasets/sea@"+hsIDs[1])
	if code != 0 || strings.Count(out, hsIDs[1]) != len(hsFiles[1]) || strings.Contains(out, hsIDs[0]) {
		t.Fatalf("ls --versions of a pinned version: exit %d\n%s%s", code, out, errOut)
	}
}

// TestServeDatasetHistoryRefusedCheaply: requests that need no history
// build none. A ?versionId= that no published version id can be (a
// slash, a control byte, "..", too long) is 400 InvalidArgument on GET and
// HEAD, and a 400 page in the console, and ListObjectVersions with
// max-keys=0 is an empty page, not truncated (as on AWS): none of them
// lists the versions folder or opens an older version. A well-formed
// request afterwards still builds and answers the whole history.
func TestServeDatasetHistoryRefusedCheaply(t *testing.T) {
	d := newHistoryLake(t)
	addr, _, _, _ := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: "s3://", S3: d.s3Config(),
		Aliases:   []serveAlias{{Name: "sea", Target: "s3://lake/datasets/sea@current"}},
		Anonymous: true, Console: true, CacheBytes: 16 << 20, RetireGrace: 10 * time.Millisecond, WaitOpen: true,
	})
	endpoint := "http://" + addr
	built := func(rs []string) []string {
		var out []string
		for _, r := range rs {
			if strings.HasPrefix(r, "GET /lake ") || strings.HasPrefix(r, "GET /lake?") || strings.Contains(r, "/v/"+hsIDs[0]+"/") || strings.Contains(r, "/v/"+hsIDs[1]+"/") {
				out = append(out, r)
			}
		}
		return out
	}
	n := d.log.len()
	for _, bad := range []string{"a%2Fb", "..", "%01x", strings.Repeat("v", 300), "a%5Cb"} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			req, _ := http.NewRequest(method, endpoint+"/sea/same.txt?versionId="+bad, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || (method == http.MethodGet && !bytes.Contains(body, []byte("<Code>InvalidArgument</Code>"))) {
				t.Errorf("%s versionId=%.20s: %d %s, want 400 InvalidArgument", method, bad, resp.StatusCode, body)
			}
		}
		if code, body := get(t, endpoint+"/-/console/dl/sea?key=same.txt&version="+bad); code != 400 {
			t.Errorf("console download of version %.20s: %d %.200s, want 400", bad, code, body)
		}
	}
	resp, err := http.Get(endpoint + "/sea?versions&max-keys=0")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("<IsTruncated>false</IsTruncated>")) ||
		bytes.Contains(body, []byte("<Version>")) || bytes.Contains(body, []byte("<DeleteMarker>")) {
		t.Errorf("ListObjectVersions max-keys=0: %d %s, want an empty page, not truncated", resp.StatusCode, body)
	}
	if rs := built(d.log.since(n)); len(rs) > 0 {
		t.Fatalf("refused and empty requests built the history: %v", rs)
	}

	// A well-formed request builds it and is answered.
	c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: aws.AnonymousCredentials{}})
	if b, vid, err := getVersion(t, c, "sea", "changed.txt", hsIDs[0]); err != nil || !bytes.Equal(b, hsFiles[0]["changed.txt"]) || vid != hsIDs[0] {
		t.Fatalf("changed.txt as of V1: %q %q %v", b, vid, err)
	}
	if rs := built(d.log.since(n)); len(rs) == 0 {
		t.Fatalf("the versioned GET built no history (the filter above sees nothing): %v", d.log.since(n))
	}
}
