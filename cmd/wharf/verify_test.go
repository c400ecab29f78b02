package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
)

func verifyTestArchive(t *testing.T, opt cargopack.Options) (dir string, res *cargopack.Result) {
	t.Helper()
	dir = t.TempDir()
	files := map[string][]byte{}
	for i := 0; i < 30; i++ {
		files[fmt.Sprintf("d/f%02d.txt", i)] = bytes.Repeat([]byte(fmt.Sprintf("line %d of the file\n", i)), 50+i*40)
	}
	opt.Bucket, opt.Prefix, opt.UploadID = "bkt", "p", "20250101-verify"
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, time.Unix(1700000000, 0)), opt)
	if err != nil {
		t.Fatal(err)
	}
	return dir, res
}

func TestVerifyCommand(t *testing.T) {
	for _, sh := range []struct {
		name string
		opt  cargopack.Options
	}{
		{"framed", cargopack.Options{FrameSize: 8 << 10}},
		{"plain", cargopack.Options{PlainTar: func(string) bool { return true }}},
		{"v2.0", cargopack.Options{Version: "2.0"}},
	} {
		t.Run(sh.name, func(t *testing.T) {
			dir, res := verifyTestArchive(t, sh.opt)
			url := "s3://bkt/" + res.ManifestKey
			if code := run([]string{"verify", "-q", "--store", "file://" + dir, url}); code != 0 {
				t.Fatalf("clean archive: exit %d", code)
			}
			// Corrupt one byte of the first data object on disk.
			obj := res.ObjectKeys[0]
			p := filepath.Join(dir, "bkt", filepath.FromSlash(obj))
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/3] ^= 0x20
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err = verifyArchive(context.Background(), &out, backend.NewFileStore(dir), "bkt", res.ManifestKey, nil)
			if err == nil {
				t.Fatalf("corrupt archive verified clean:\n%s", out.String())
			}
			if !strings.Contains(out.String(), "PROBLEM") || !strings.Contains(out.String(), obj) {
				t.Fatalf("output does not name the corrupt object %s:\n%s", obj, out.String())
			}
			if code := run([]string{"verify", "-q", "--store", "file://" + dir, url}); code == 0 {
				t.Fatal("corrupt archive: exit 0")
			}
		})
	}
}

func TestVerifyCommandUsage(t *testing.T) {
	if code := run([]string{"verify"}); code == 0 {
		t.Fatal("no manifest: exit 0")
	}
	if code := run([]string{"verify", "--store", "file:///nonexistent-dir-wharf", "s3://b/k"}); code == 0 {
		t.Fatal("bad store: exit 0")
	}
}
