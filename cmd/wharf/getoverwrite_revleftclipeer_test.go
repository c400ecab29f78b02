package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// TestGetRefusesDifferentFile: a file already in DIR whose content is not
// the archive's (other bytes of the same size, another size, a symlink, a
// named pipe, a directory in its place) is not replaced by a plain get: it
// is refused, named, with what differs and the flag that replaces it, and
// left as it was; with --overwrite it is replaced (a symlink itself, never
// what it points to) and each replaced file is named and counted. An
// identical file is still skipped. Before, get replaced every such file
// without a word (the summary said "1 files written").
func TestGetRefusesDifferentFile(t *testing.T) {
	files := map[string][]byte{"a.txt": []byte("the archive's bytes\n")}
	st := t.TempDir()
	u, _ := packDir(t, st, files, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-clobber", FrameSize: 4096})
	victim := filepath.Join(t.TempDir(), "victim")
	for _, tc := range []struct {
		name      string
		make      func(t *testing.T, p string)
		wantWhy   string // in the refusal
		overwrite bool   // --overwrite replaces it
	}{
		{"same size, other bytes", func(t *testing.T, p string) {
			writeBytes(t, p, bytes.ToUpper(files["a.txt"]))
		}, "has other content", true},
		{"another size", func(t *testing.T, p string) { writeBytes(t, p, []byte("mine\n")) }, "has 5 bytes, the archive's file 20", true},
		{"a symlink", func(t *testing.T, p string) {
			writeBytes(t, victim, []byte("not yours\n"))
			if err := os.Symlink(victim, p); err != nil {
				t.Fatal(err)
			}
		}, "is a symlink", true},
		{"a named pipe", func(t *testing.T, p string) { testMkfifo(t, p) }, "is not a regular file", true},
		{"a directory", func(t *testing.T, p string) {
			if err := os.MkdirAll(filepath.Join(p, "x"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "a directory is there", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			p := filepath.Join(out, "a.txt")
			tc.make(t, p)
			before, _ := os.Lstat(p)
			_, stderr, err := runGetCmd(t, "--store", "file://"+st, "-q", u, "a.txt", "-o", out)
			var ff filesFailed
			if !errors.As(err, &ff) || !strings.Contains(stderr, "key a.txt: ") || !strings.Contains(stderr, tc.wantWhy) {
				t.Fatalf("get over %s: %v, stderr:\n%s\nwant a failure naming the key and %q", tc.name, err, stderr, tc.wantWhy)
			}
			if tc.overwrite && !strings.Contains(stderr, "--overwrite replaces it") {
				t.Errorf("the refusal does not name --overwrite: %s", stderr)
			}
			after, _ := os.Lstat(p)
			if after == nil || after.Mode() != before.Mode() || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
				t.Errorf("the refused %s was changed", tc.name)
			}
			_, stderr, err = runGetCmd(t, "--store", "file://"+st, "-q", "--overwrite", u, "a.txt", "-o", out)
			if !tc.overwrite {
				if err == nil {
					t.Errorf("--overwrite replaced a directory: %s", stderr)
				}
				return
			}
			if err != nil || !strings.Contains(stderr, "replaced "+p+": "+tc.wantWhy) || !strings.Contains(stderr, "1 of them replaced a different file") {
				t.Fatalf("get --overwrite over %s: %v\n%s", tc.name, err, stderr)
			}
			if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("after --overwrite %s is not a regular file: %v", p, err)
			}
			checkTree(t, out, files)
			if got, _ := os.ReadFile(victim); tc.name == "a symlink" && string(got) != "not yours\n" {
				t.Errorf("--overwrite wrote through the symlink: the target now holds %q", got)
			}
		})
	}
	t.Run("identical", func(t *testing.T) {
		out := t.TempDir()
		if _, stderr, err := runGetCmd(t, "--store", "file://"+st, "-q", u, "a.txt", "-o", out); err != nil {
			t.Fatal(err, stderr)
		}
		if _, stderr, err := runGetCmd(t, "--store", "file://"+st, "-q", u, "a.txt", "-o", out); err != nil || !strings.Contains(stderr, "1 already present") {
			t.Fatalf("an identical file was not skipped: %v\n%s", err, stderr)
		}
	})
}

// TestGetInstallNeverReplacesAnAppearedFile: a file that appears under a
// key's name after the check found none (another program, or a second
// get) is not replaced when the temporary file goes into place without
// --overwrite: the install fails with fs.ErrExist and the file is intact.
func TestGetInstallNeverReplacesAnAppearedFile(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	writeBytes(t, filepath.Join(dir, ".wharf-get-1.tmp"), []byte("ours"))
	writeBytes(t, filepath.Join(dir, "k"), []byte("theirs"))
	g := &getter{root: root}
	if err := g.install(".wharf-get-1.tmp", "k", false); !errors.Is(err, fs.ErrExist) {
		t.Errorf("install over an appeared file: %v, want fs.ErrExist", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "k")); string(got) != "theirs" {
		t.Errorf("the appeared file now holds %q", got)
	}
	if err := g.install(".wharf-get-1.tmp", "new", false); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "new")); string(got) != "ours" {
		t.Errorf("installed %q", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".wharf-get-1.tmp")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the temporary name is left: %v", err)
	}
}

func writeBytes(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
