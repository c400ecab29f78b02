package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// TestIndexBuildOutputNotClobbered: index build -o replaces an index
// file (a rebuild, also of a damaged one) or an empty file, and refuses,
// before reading any manifest, a file that is something else (a typo
// naming the user's data, the manifest itself), "-" (which would be a
// file named "-", not stdout) and an s3:// URL with a slash missing; the
// refused file is left as it was.
func TestIndexBuildOutputNotClobbered(t *testing.T) {
	st := t.TempDir()
	mtime := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(st), cargopack.FromMap(map[string][]byte{"a.txt": []byte("a\n")}, mtime),
		cargopack.Options{Bucket: "bkt", Prefix: "pre", UploadID: "u-idx-out", FrameSize: 4096, Created: mtime})
	if err != nil {
		t.Fatal(err)
	}
	u := "s3://bkt/" + res.ManifestKey
	dir := t.TempDir()
	t.Chdir(dir)
	build := func(out string) error {
		return indexCmd(context.Background(), []string{"build", "--store", "file://" + st, "-q", u, "-o", out}, &bytes.Buffer{})
	}

	idx := filepath.Join(dir, "a.widx")
	if err := build(idx); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(idx)
	damaged := append([]byte(nil), good...)
	damaged[len(damaged)/2] ^= 1
	empty := filepath.Join(dir, "empty")
	for name, data := range map[string][]byte{idx: good, filepath.Join(dir, "damaged.widx"): damaged, empty: nil} {
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := build(name); err != nil {
			t.Errorf("-o %s (%d bytes there): %v, want it replaced", name, len(data), err)
		} else if got, _ := os.ReadFile(name); !bytes.Equal(got, good) {
			t.Errorf("-o %s: not replaced by the index", name)
		}
	}

	data := filepath.Join(dir, "results.csv")
	if err := os.WriteFile(data, []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(st, "bkt", filepath.FromSlash(res.ManifestKey))
	mbytes, _ := os.ReadFile(manifest)
	for _, tc := range []struct{ out, want string }{
		{data, "-o " + data + ": exists and is not a wharf index file"},
		{manifest, "-o " + manifest + ": exists and is not a wharf index file"},
		{"-", "-o -: index build writes a file, not stdout"},
		{"s3:/bkt/idx", `-o "s3:/bkt/idx": a URL with a slash missing?`},
	} {
		err := build(tc.out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("-o %s: %v, want an error saying %q", tc.out, err, tc.want)
		}
	}
	if got, _ := os.ReadFile(data); string(got) != "a,b\n1,2\n" {
		t.Errorf("-o %s: the file was overwritten: %.16q", data, got)
	}
	if got, _ := os.ReadFile(manifest); !bytes.Equal(got, mbytes) {
		t.Errorf("-o %s: the manifest was overwritten", manifest)
	}
	if _, err := os.Stat(filepath.Join(dir, "-")); err == nil {
		t.Errorf(`-o -: a file named "-" was written`)
	}
	if _, err := os.Stat(filepath.Join(dir, "s3:")); err == nil {
		t.Errorf(`-o s3:/bkt/idx: a local directory "s3:" was made`)
	}
}
