package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestIndexCommand builds an index of a cargopack archive with the CLI
// (flags after the positional argument), loads it with OpenIndex and reads
// every file, compared with the source bytes; show prints the summary.
func TestIndexCommand(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"a.txt": bytes.Repeat([]byte("wharf "), 5000), "d/b.bin": {1, 2, 3}, "d/e/empty": {}}
	mtime := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, mtime),
		cargopack.Options{Bucket: "bkt", Prefix: "pre", UploadID: "u-index", FrameSize: 4096, Created: mtime})
	if err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(t.TempDir(), "sub", "arch.widx")
	var out bytes.Buffer
	if err := indexCmd(context.Background(), []string{"build", "--store", "file://" + dir, "s3://bkt/" + res.ManifestKey, "-o", outFile}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"id:                 u-index", "files:              3", "index:              " + outFile} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("build output lacks %q:\n%s", want, out.String())
		}
	}
	ents, _ := os.ReadDir(filepath.Dir(outFile))
	if len(ents) != 1 {
		t.Errorf("index directory holds %d entries (temporary file left?)", len(ents))
	}

	f, err := os.Open(outFile)
	if err != nil {
		t.Fatal(err)
	}
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	a, err := archiveview.OpenIndex(context.Background(), store, f, archiveview.Options{Name: "served"})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Files() != len(files) {
		t.Fatalf("%d files, want %d", a.Files(), len(files))
	}
	for k, want := range files {
		fi, ok := a.Stat(k)
		if !ok {
			t.Fatalf("Stat(%q) missing", k)
		}
		r, err := a.Open(context.Background(), fi, 0, fi.Size)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: err %v, bytes equal %v", k, err, bytes.Equal(got, want))
		}
	}
	if store.Requests("get") != 0 {
		t.Errorf("reading through the index made %d GETs (manifest reads?)", store.Requests("get"))
	}

	out.Reset()
	if err := indexCmd(context.Background(), []string{"show", outFile}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "id:                 u-index") || !strings.Contains(out.String(), "files:              3") {
		t.Errorf("show output:\n%s", out.String())
	}

	// A damaged file is refused by show, naming it.
	data, _ := os.ReadFile(outFile)
	data[len(data)/2] ^= 1
	bad := filepath.Join(t.TempDir(), "bad.widx")
	os.WriteFile(bad, data, 0o644)
	err = indexCmd(context.Background(), []string{"show", bad}, &bytes.Buffer{})
	if !errors.Is(err, archiveview.ErrBadIndex) || !strings.Contains(err.Error(), bad) {
		t.Errorf("damaged index: err %v", err)
	}
}

func TestIndexCommandErrors(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no-subcommand", nil, "usage"},
		{"unknown-subcommand", []string{"frob"}, "unknown index command"},
		{"no-output", []string{"build", "--store", "file://" + dir, "s3://bkt/k/manifest.json.gz"}, "-o FILE is required"},
		{"no-url", []string{"build", "--store", "file://" + dir, "-o", filepath.Join(dir, "x")}, "MANIFEST_URL"},
		{"missing-manifest", []string{"build", "--store", "file://" + dir, "s3://bkt/pre/uploads/nope/manifest.json.gz", "-o", filepath.Join(dir, "x")}, "pre/uploads/nope/manifest.json.gz"},
		{"output-bad-s3-url", []string{"build", "--store", "file://" + dir, "s3://bkt/k/manifest.json.gz", "-o", "s3:///idx"}, "-o: --index-cache: index cache \"s3:///idx\": want s3://BUCKET/PREFIX"},
		{"output-other-scheme", []string{"build", "--store", "file://" + dir, "s3://bkt/k/manifest.json.gz", "-o", "gs://b/idx"}, "-o: --index-cache \"gs://b/idx\": neither a local directory nor an s3://BUCKET/PREFIX URL"},
		{"output-a-directory", []string{"build", "--store", "file://" + dir, "s3://bkt/pre/uploads/nope/manifest.json.gz", "-o", dir}, "-o " + dir + ": not a regular file"},
		{"show-no-file", []string{"show"}, "FILE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := indexCmd(ctx, tc.args, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("a failed build left an index file")
	}
}
