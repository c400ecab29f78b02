package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// TestGetRefusesTempNamedKeys: a key whose file name is one of get's
// temporary names (".wharf-get-" + 16 hex digits [+ the probe's mark] +
// ".tmp") was written like any, and the next get into DIR (of another
// selection, or another archive) took it in its sweep for a temporary
// file an earlier get left behind and removed it: an archive's file lost
// without a word to whoever relied on it. Such a key is refused, naming
// the reason, and a later get removes nothing.
func TestGetRefusesTempNamedKeys(t *testing.T) {
	tempKeys := []string{".wharf-get-0123456789abcdef.tmp", "d/.wharf-get-fedcba9876543210-\u00e9.tmp", "d/.wharf-get-00112233445566aa-e\u0301.tmp"}
	files := map[string][]byte{"a.txt": []byte("a\n"), "d/b.txt": []byte("b\n")}
	for _, k := range tempKeys {
		files[k] = []byte("an archive's file: " + k + "\n")
	}
	st := t.TempDir()
	u, _ := packDir(t, st, files, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-temp", FrameSize: 4096})
	ctx := context.Background()
	fl := flag.NewFlagSet("t", flag.ContinueOnError)
	sf := addStoreFlags(fl)
	if err := fl.Parse([]string{"--store", "file://" + st}); err != nil {
		t.Fatal(err)
	}
	a, err := sf.openArchive(ctx, u, archiveview.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	out := t.TempDir()
	get := func(args ...string) (string, error) {
		sel, missing, err := selectFiles(ctx, a, args)
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		g := &getter{a: a, sel: sel, dir: out, stderr: &stderr, pf: &progressFlags{quiet: true, interval: time.Hour, stderr: &stderr}}
		err = g.run(ctx, sel, missing, 4)
		return stderr.String(), err
	}
	said, err := get("/")
	var ff filesFailed
	if !errors.As(err, &ff) || ff.failed != len(tempKeys) {
		t.Errorf("get of the archive: %v, want %d failed\n%s", err, len(tempKeys), said)
	}
	for _, k := range tempKeys {
		if !strings.Contains(said, "key "+strconv.Quote(k)+": refused: ") || !strings.Contains(said, "temporary files") {
			t.Errorf("%q not refused as a temporary file's name:\n%s", k, said)
		}
	}
	// A later get of another selection into the same directory.
	said, _ = get("a.txt", "d/b.txt")
	if strings.Contains(said, "removed") {
		t.Errorf("a later get removed files of the archive as temporary files:\n%s", said)
	}
	for _, k := range tempKeys {
		if got, err := os.ReadFile(filepath.Join(out, k)); err == nil {
			t.Logf("%q present (%d bytes)", k, len(got))
		}
	}
}
