package main

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

func TestInspect(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"a.txt": bytes.Repeat([]byte("wharf "), 5000), "d/b.bin": {1, 2, 3}}
	mtime := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, mtime),
		cargopack.Options{Bucket: "bkt", Prefix: "pre", UploadID: "u-inspect", FrameSize: 4096, Created: mtime})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := inspect(context.Background(), []string{"--store", "file://" + dir, "s3://bkt/" + res.ManifestKey}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"id:                 u-inspect",
		"version:            2.1",
		"chain:              u-inspect",
		"files:              2",
		"frames:             " + strconv.Itoa(res.Frames),
		"compressed bytes:   " + strconv.Itoa(int(res.CompressedBytes)),
		"framed-zstd",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	// Errors: a missing manifest names the key; bad arguments fail.
	err = inspect(context.Background(), []string{"--store", "file://" + dir, "bkt/pre/uploads/nope/manifest.json.gz"}, &out)
	if err == nil || !strings.Contains(err.Error(), "pre/uploads/nope/manifest.json.gz") {
		t.Errorf("missing manifest: err = %v", err)
	}
	if err := inspect(context.Background(), []string{"--store", "file://" + dir}, &bytes.Buffer{}); err == nil {
		t.Error("no MANIFEST_URL accepted")
	}
}

// TestInspectJSON: --json states the same facts with the documented field
// names, for a single upload and a chain (a warning list is [] not null).
func TestInspectJSON(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"a.txt": bytes.Repeat([]byte("wharf "), 5000), "d/b.bin": {1, 2, 3}}
	mtime := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, mtime),
		cargopack.Options{Bucket: "bkt", Prefix: "pre", UploadID: "u-inspect", FrameSize: 4096, Created: mtime})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := inspect(context.Background(), []string{"--store", "file://" + dir, "s3://bkt/" + res.ManifestKey, "--json"}, &out); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	want := map[string]any{
		"upload_id": "u-inspect", "version": "2.1", "bucket": "bkt", "manifest": res.ManifestKey,
		"chain": []any{"u-inspect"}, "files": 2.0, "chunks": float64(len(res.ObjectKeys)), "frames": float64(res.Frames),
		"compressed_bytes": float64(res.CompressedBytes), "shapes": []any{"framed-zstd", "sub-frames"}, "warnings": []any{},
		"unverifiable_files": 0.0, "unverifiable_sample": []any{},
	}
	for k, v := range want {
		if !reflect.DeepEqual(got[k], v) {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	if ub, _ := got["uncompressed_bytes"].(float64); ub < float64(len(files["a.txt"])) {
		t.Errorf("uncompressed_bytes %v", got["uncompressed_bytes"])
	}
	if len(got) != 14 {
		t.Errorf("%d fields, want the 14 documented: %v", len(got), got)
	}

	store, url, _ := chainArchive(t)
	out.Reset()
	if err := inspect(context.Background(), []string{"--json", "--store", "file://" + store, url}, &out); err != nil {
		t.Fatal(err)
	}
	var chain inspectJSON
	if err := json.Unmarshal(out.Bytes(), &chain); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(chain.Chain, []string{"up-2", "up-1"}) || chain.Files != 3 || chain.UploadID != "up-2" {
		t.Errorf("chain: %+v", chain)
	}
}
