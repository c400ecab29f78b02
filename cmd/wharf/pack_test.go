package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"io"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/klauspost/compress/zstd"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"4096", 4096, true},
		{"4MiB", 4 << 20, true},
		{"4mib", 4 << 20, true},
		{"64MiB", 64 << 20, true},
		{"16KiB", 16 << 10, true},
		{"1GiB", 1 << 30, true},
		{"2TiB", 2 << 40, true},
		{"3M", 3 << 20, true},
		{"12B", 12, true},
		{" 8 KiB ", 8 << 10, true},
		{"", 0, false},
		{"MiB", 0, false},
		{"-1", 0, false},
		{"1.5MiB", 0, false},
		{"4MB", 4e6, true},
		{"4XB", 0, false},
		{"9223372036854775807", 1<<63 - 1, true},
		{"9223372036854775808", 0, false},
		{"8388608TiB", 0, false},
	}
	for _, tc := range cases {
		got, err := parseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"4MiB", "0", "16KiB", "1GiB", "7", "x", "99999999999TiB", "1 k"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("parseSize(%q) = %d < 0", s, n)
		}
		if again, err := parseSize(strconv.FormatInt(n, 10)); err != nil || again != n {
			t.Fatalf("parseSize(%q)=%d does not round-trip: %d, %v", s, n, again, err)
		}
	})
}

// TestPackCommand packs the embedded sample tree with the CLI into a
// file:// store and checks every file's bytes come back out of the chunks.
func TestPackCommand(t *testing.T) {
	src := "sample"
	store := t.TempDir()
	args := []string{src, "--store", "file://" + store, "--bucket", "demo", "--prefix", "p",
		"--upload-id", "u1", "--frame-size", "16KiB", "--chunk-size", "64KiB", "--shards", "2"}
	// Capture stdout for the printed URL.
	r, w, _ := os.Pipe()
	old := os.Stdout
	os.Stdout = w
	err := runPack(context.Background(), args)
	os.Stdout = old
	w.Close()
	out, _ := io.ReadAll(r)
	if err != nil {
		t.Fatalf("pack: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != "s3://demo/p/uploads/u1/manifest.json.gz" {
		t.Fatalf("printed %q", got)
	}
	raw, err := os.ReadFile(filepath.Join(store, "demo", "p", "uploads", "u1", "manifest.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var m manifest.Manifest
	if err := json.NewDecoder(zr).Decode(&m); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(src)
	if m.SourcePath != filepath.ToSlash(abs) || m.Version != "2.1" || m.ShardCount != 2 {
		t.Errorf("manifest header: source %q version %q shards %d", m.SourcePath, m.Version, m.ShardCount)
	}
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	streams := map[string][]byte{}
	for _, c := range m.Chunks {
		obj, err := os.ReadFile(filepath.Join(store, "demo", "p", filepath.FromSlash(c.S3Key)))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(c.S3Key, ".tar.zst") {
			if obj, err = dec.DecodeAll(obj, nil); err != nil {
				t.Fatalf("%s: %v", c.S3Key, err)
			}
		}
		streams[c.S3Key] = obj
	}
	n := 0
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		want, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		path := m.SourcePath + "/" + filepath.ToSlash(rel)
		for _, e := range m.Files {
			if e.Path == path {
				s := streams[e.S3Key]
				if e.ArchiveOffset == nil || !bytes.Equal(s[*e.ArchiveOffset:*e.ArchiveOffset+e.Size], want) {
					t.Errorf("%s: bytes at archive_offset differ", rel)
				}
				n++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(m.Files) || n < 15 {
		t.Errorf("matched %d files, manifest has %d", n, len(m.Files))
	}
}

// TestPackCommandS3 packs the sample tree through the s3:// wiring
// (LoadDefaultConfig + --s3-endpoint/--s3-region/--s3-path-style) into an
// in-process gofakes3 and reads a file back through the archive_offset.
func TestPackCommandS3(t *testing.T) {
	be := s3mem.New()
	if err := be.CreateBucket("packs3"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(be).Server())
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	err := runPack(context.Background(), []string{"--store", "s3://", "--bucket", "packs3", "--upload-id", "s3u",
		"--s3-endpoint", srv.URL, "--s3-region", "eu-west-1", "--s3-path-style", "--frame-size", "8KiB", "sample"})
	if err != nil {
		t.Fatalf("pack to s3: %v", err)
	}
	obj, err := be.GetObject("packs3", "uploads/s3u/manifest.json.gz", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Contents.Close()
	zr, err := gzip.NewReader(obj.Contents)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest.Manifest
	if err := json.NewDecoder(zr).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Region != "eu-west-1" || len(m.Files) < 15 {
		t.Fatalf("region %q, %d files", m.Region, len(m.Files))
	}
	want, err := os.ReadFile(filepath.Join("sample", "data", "ports.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range m.Files {
		if !strings.HasSuffix(e.Path, "/data/ports.csv") {
			continue
		}
		c, err := be.GetObject("packs3", e.S3Key, nil)
		if err != nil {
			t.Fatalf("chunk %s: %v", e.S3Key, err)
		}
		raw, _ := io.ReadAll(c.Contents)
		c.Contents.Close()
		dec, _ := zstd.NewReader(nil)
		defer dec.Close()
		stream, err := dec.DecodeAll(raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(stream[*e.ArchiveOffset:*e.ArchiveOffset+e.Size], want) {
			t.Fatal("ports.csv differs after an s3:// pack")
		}
		return
	}
	t.Fatal("ports.csv not in the manifest")
}

func TestParseInterspersed(t *testing.T) {
	cases := []struct {
		args []string
		pos  string
		b    string
	}{
		{[]string{"DIR", "--bucket", "x"}, "DIR", "x"},
		{[]string{"--bucket", "x", "DIR"}, "DIR", "x"},
		{[]string{"A", "--bucket", "x", "B"}, "A,B", "x"},
		{[]string{"--bucket", "x", "--", "--odd-dir"}, "--odd-dir", "x"},
	}
	for _, tc := range cases {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		b := fs.String("bucket", "", "")
		pos, err := parseInterspersed(fs, tc.args)
		if err != nil || strings.Join(pos, ",") != tc.pos || *b != tc.b {
			t.Errorf("%q: pos %q bucket %q err %v", tc.args, pos, *b, err)
		}
	}
}

func TestPackCommandErrors(t *testing.T) {
	store := "file://" + t.TempDir()
	cases := [][]string{
		{},
		{"sample"},
		{"sample", "--store", store},
		{"sample", "--store", "ftp://x", "--bucket", "b"},
		{"sample", "--store", store, "--bucket", "b", "--frame-size", "lots"},
		{"sample", "--store", store, "--bucket", "b", "--version", "3.0"},
		{"does-not-exist", "--store", store, "--bucket", "b"},
		{"sample", "other", "--store", store, "--bucket", "b"},
	}
	for _, args := range cases {
		if err := runPack(context.Background(), args); err == nil {
			t.Errorf("runPack(%q) succeeded", args)
		}
	}
}

// TestSampleTree keeps the embedded sample small and pleasant.
func TestSampleTree(t *testing.T) {
	var total int64
	var files, empty int
	exts := map[string]bool{}
	err := filepath.WalkDir("sample", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") || strings.HasSuffix(d.Name(), ".go") {
			t.Errorf("%s: dotfiles are not embedded and .go files would be compiled", p)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		total += fi.Size()
		files++
		if fi.Size() == 0 {
			empty++
		}
		exts[filepath.Ext(p)] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total > 200<<10 || files < 15 || empty < 1 {
		t.Errorf("sample: %d files, %d bytes, %d empty", files, total, empty)
	}
	for _, e := range []string{".md", ".csv", ".json", ".png"} {
		if !exts[e] {
			t.Errorf("sample has no %s file", e)
		}
	}
}
