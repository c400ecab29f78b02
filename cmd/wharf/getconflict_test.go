package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// TestGetFileAndDirectoryOfOneName: an archive may hold a key "a" and
// keys under "a/" (S3 has no directories); a local directory cannot hold
// both. get refuses the file, every time (not whichever of the two lost a
// race), saying why, and writes the files under a/; the run fails.
func TestGetFileAndDirectoryOfOneName(t *testing.T) {
	files := map[string][]byte{"a": []byte("file a\n"), "a/b": []byte("b\n"), "a/c/d": []byte("d\n"), "e": []byte("e\n")}
	st := t.TempDir()
	u, _ := packDir(t, st, files, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-fd", FrameSize: 4096})
	for range 5 {
		out := t.TempDir()
		_, stderr, err := runGetCmd(t, "--store", "file://"+st, "-q", "--parallel", "4", u, "/", "-o", out)
		var ff filesFailed
		if !errors.As(err, &ff) || ff.failed != 1 {
			t.Fatalf("err %v, want 1 failed file\n%s", err, stderr)
		}
		if want := "key a: refused: the archive also has files under a/, and a directory cannot be a file too"; !strings.Contains(stderr, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, stderr)
		}
		checkTree(t, out, map[string][]byte{"a/b": files["a/b"], "a/c/d": files["a/c/d"], "e": files["e"]})
	}
}
