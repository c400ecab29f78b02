package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// TestLeadingSlashHint: keys never begin with "/", so "/d/a.txt" (a path
// typed as on a disk) matches nothing; get and ls say so and name the key
// that was meant.
func TestLeadingSlashHint(t *testing.T) {
	st := t.TempDir()
	u, _ := packDir(t, st, map[string][]byte{"d/a.txt": []byte("a\n")}, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-slash", FrameSize: 4096})
	_, stderr, err := runGetCmd(t, "--store", "file://"+st, "-q", u, "/d/a.txt", "-o", t.TempDir())
	if want := `/d/a.txt: no such file or directory in the archive (keys never begin with "/": d/a.txt?)`; err == nil || !strings.Contains(stderr, want) {
		t.Errorf("get /d/a.txt: %v, stderr lacks %q:\n%s", err, want, stderr)
	}
	err = lsCmd(context.Background(), []string{"--store", "file://" + st, u, "/d/"}, &bytes.Buffer{})
	if want := `nothing matches prefix "/d/" (keys never begin with "/": "d/"?)`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ls /d/: %v, want an error saying %q", err, want)
	}
}
