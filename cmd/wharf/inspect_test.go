package main

import (
	"bytes"
	"context"
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
