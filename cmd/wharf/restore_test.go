package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
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

func TestGlobSelects(t *testing.T) {
	tests := []struct {
		glob, key string
		want      bool
	}{
		{"a.txt", "a.txt", true},
		{"*.txt", "a.txt", true},
		{"*.txt", "d/a.txt", false},
		{"d/*.txt", "d/a.txt", true},
		{"d", "d/e/f.bin", true},
		{"d/*", "d/e/f.bin", true},
		{"d/e", "d/ef", false},
		{"*", "x/y/z", true},
		{"?", "ab", false},
		{"d/[ab].bin", "d/b.bin", true},
	}
	for _, tc := range tests {
		if got := globSelects(tc.glob, tc.key); got != tc.want {
			t.Errorf("globSelects(%q, %q) = %v", tc.glob, tc.key, got)
		}
	}
}

// restoreLake is gofakes3 behind the Glacier model, holding one upload
// packed through the real SDK: data/big.bin split over three chunks,
// small files in others.
type restoreLake struct {
	url   string
	g     *faults.Glacier
	res   *cargopack.Result
	sizes map[string]int64 // chunk key -> compressed size (manifest)
}

func newRestoreLake(t *testing.T) *restoreLake {
	t.Helper()
	mem := s3mem.New()
	if err := mem.CreateBucket("lake"); err != nil {
		t.Fatal(err)
	}
	g := faults.NewGlacier(faults.GlacierConfig{Delay: time.Hour})
	srv := httptest.NewServer(g.HTTP(gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	client := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("AK", "SK", "")})
	big := make([]byte, 100<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	files := map[string][]byte{"data/big.bin": big, "data/small.txt": []byte("small\n"), "docs/readme.txt": bytes.Repeat([]byte("readme "), 900),
		"aa/first.bin": big[:50<<10], "zz/last.bin": big[30<<10:]}
	res, err := cargopack.Write(context.Background(), cargopack.S3Sink(client), cargopack.FromMap(files, time.Unix(1700000000, 0)),
		cargopack.Options{Bucket: "lake", Prefix: "arch", UploadID: "u1", FrameSize: 8 << 10, ChunkSize: 64 << 10, SplitSize: 40 << 10})
	if err != nil {
		t.Fatal(err)
	}
	l := &restoreLake{url: srv.URL, g: g, res: res, sizes: map[string]int64{}}
	for _, c := range res.Manifest.Chunks {
		l.sizes["arch/"+c.S3Key] = c.CompressedSize
	}
	g.SetPrefixClass("lake", "arch/uploads/u1/", backend.ClassGlacier, "")
	g.SetClass("lake", res.ManifestKey, backend.ClassStandard, "")
	return l
}

// keysOf returns the distinct chunk keys holding path, from the manifest.
func (l *restoreLake) keysOf(path string) []string {
	var keys []string
	for _, e := range l.res.Manifest.Files {
		if k, err := manifest.RelativeKey(l.res.Manifest.SourcePath, e.Path); err == nil && k == path {
			if k := "arch/" + e.S3Key; !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

func (l *restoreLake) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	base := []string{"--store", "s3://", "--s3-endpoint", l.url, "--s3-region", "us-east-1", "--s3-path-style",
		"--s3-access-key", "AK", "--s3-secret-key", "SK", "s3://lake/" + l.res.ManifestKey}
	err := restoreCmd(context.Background(), append(base, args...), &out)
	return out.String(), err
}

// TestRestoreCommand: wharf restore --dry-run prints the chunks holding
// the selected files with their classes and sizes, their total against the
// whole upload and the retrieval estimate, and sends nothing; a real run
// restores exactly those chunks, once; every flag is validated first.
func TestRestoreCommand(t *testing.T) {
	l := newRestoreLake(t)
	bigKeys := l.keysOf("data/big.bin")
	if len(bigKeys) < 2 {
		t.Fatalf("test setup: data/big.bin lies in %v; want several chunks", bigKeys)
	}
	var bigBytes int64
	for _, k := range bigKeys {
		bigBytes += l.sizes[k]
	}

	out, err := l.run(t, "--path", "data/big.bin", "--days", "3", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range bigKeys {
		if want := fmt.Sprintf("  %s\tGLACIER\t%d bytes\tarchived: needs a restore\n", k, l.sizes[k]); !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{
		"selected files: 1 (102400 bytes)\n",
		fmt.Sprintf("objects:        %d of the %d holding the upload\n", len(bigKeys), len(l.sizes)),
		fmt.Sprintf("compressed:     %d bytes of %d in the upload (%s)\n", bigBytes, l.res.CompressedBytes, percent(bigBytes, l.res.CompressedBytes)),
		fmt.Sprintf("to restore:     %d objects, %d bytes", len(bigKeys), bigBytes),
		"dry run: no restore requested\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	t.Logf("dry run:\n%s", out)
	if strings.Count(out, "\tGLACIER\t") != len(bigKeys) {
		t.Errorf("dry run lists other objects:\n%s", out)
	}
	if n := len(l.g.Calls()); n != 0 {
		t.Fatalf("the dry run sent %d restores", n)
	}

	// Every flag is validated before anything is sent.
	l.g.SetClass("lake", l.keysOf("docs/readme.txt")[0], backend.ClassDeepArchive, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--days", "0"}, "--days 0"},
		{[]string{"--days", "36501"}, "--days 36501"},
		{[]string{"--days", "1", "--tier", "fast"}, `--tier "fast"`},
		{[]string{"--days", "1", "--path", "nothing/*"}, `--path "nothing/*" selects no file`},
		{[]string{"--days", "1", "--path", "["}, "syntax error in pattern"},
		{[]string{"--days", "1", "--tier", "Expedited", "--path", "docs"}, "Expedited retrieval is not available for objects in DEEP_ARCHIVE"},
	} {
		_, err := l.run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	if n := len(l.g.Calls()); n != 0 {
		t.Fatalf("refused runs sent %d restores", n)
	}

	out, err = l.run(t, "--path", "data/*", "--days", "3", "--tier", "Bulk")
	if err != nil {
		t.Fatal(err)
	}
	want := stUnion(bigKeys, l.keysOf("data/small.txt"))
	var started []string
	for _, c := range l.g.Calls() {
		if c.Days != 3 || c.Tier != "Bulk" {
			t.Errorf("restore %+v", c)
		}
		started = append(started, c.Key)
	}
	sort.Strings(started)
	if !slices.Equal(started, want) {
		t.Fatalf("restored %v, want exactly the chunks of data/*: %v\n%s", started, want, out)
	}
	if !strings.Contains(out, fmt.Sprintf("restores:       %d started, 0 already in progress, 0 already restored", len(want))) {
		t.Fatalf("output:\n%s", out)
	}
	// Again: nothing new is sent.
	out, err = l.run(t, "--path", "data/*", "--days", "3", "--tier", "Bulk")
	if err != nil || !strings.Contains(out, "nothing to restore") || strings.Count(out, "restore in progress") != len(want) {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	if n := len(l.g.Calls()); n != len(want) {
		t.Fatalf("%d restores after the second run, want %d", n, len(want))
	}
}

func stUnion(a, b []string) []string {
	out := slices.Clone(a)
	for _, k := range b {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// TestRestoreDryRunListedSizes: the manifest claims 3,072 bytes for a
// chunk the store holds (and bills) at 6,294,528 bytes. The dry run
// estimates from the listed size, prints it on the object's line with the
// manifest's figure beside it, and warns once about the disagreement. The
// old code printed and estimated 3,072 bytes.
func TestRestoreDryRunListedSizes(t *testing.T) {
	const claimed, stored = 3072, 6_294_528
	mem := s3mem.New()
	if err := mem.CreateBucket("lake"); err != nil {
		t.Fatal(err)
	}
	g := faults.NewGlacier(faults.GlacierConfig{Delay: time.Hour})
	srv := httptest.NewServer(g.HTTP(gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	client := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("AK", "SK", "")})
	ctx := context.Background()
	files := map[string][]byte{"data/a.txt": bytes.Repeat([]byte("a"), 1000), "data/b.txt": []byte("b\n")}
	res, err := cargopack.Write(ctx, cargopack.S3Sink(client), cargopack.FromMap(files, time.Unix(1700000000, 0)),
		cargopack.Options{Bucket: "lake", Prefix: "arch", UploadID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Manifest.Chunks) != 1 {
		t.Fatalf("test setup: %d chunks, want 1", len(res.Manifest.Chunks))
	}
	chunkKey := "arch/" + res.Manifest.Chunks[0].S3Key

	// The manifest says 3,072 bytes; the store holds 6,294,528.
	obj, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("lake"), Key: aws.String(res.ManifestKey)})
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(obj.Body)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.NewDecoder(zr).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	obj.Body.Close()
	doc["chunks"].([]any)[0].(map[string]any)["compressed_size"] = claimed
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if err := json.NewEncoder(zw).Encode(doc); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	put := func(key string, body []byte) {
		t.Helper()
		if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	put(res.ManifestKey, gz.Bytes())
	put(chunkKey, make([]byte, stored))
	g.SetPrefixClass("lake", "arch/uploads/u1/", backend.ClassGlacier, "")
	g.SetClass("lake", res.ManifestKey, backend.ClassStandard, "")

	var out bytes.Buffer
	err = restoreCmd(ctx, []string{"--store", "s3://", "--s3-endpoint", srv.URL, "--s3-region", "us-east-1", "--s3-path-style",
		"--s3-access-key", "AK", "--s3-secret-key", "SK", "s3://lake/" + res.ManifestKey, "--days", "1", "--dry-run"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dry run:\n%s", out.String())
	for _, want := range []string{
		fmt.Sprintf("  %s\tGLACIER\t%d bytes\tarchived: needs a restore\t(the manifest says %d bytes)\n", chunkKey, stored, claimed),
		fmt.Sprintf("to restore:     1 objects, %d bytes (estimated retrieval size, from the store's sizes; no share of the upload: the manifest's sizes are wrong)\n", stored),
		fmt.Sprintf("warning:        1 objects are not the size the manifest's compressed_size says; the estimate uses the sizes the store listed: %s (stored %d, manifest %d)\n", chunkKey, stored, claimed),
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry run lacks %q", want)
		}
	}
	if n := len(g.Calls()); n != 0 {
		t.Fatalf("the dry run sent %d restores", n)
	}
}
