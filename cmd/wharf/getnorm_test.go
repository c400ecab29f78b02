package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// TestGetRefusesNormalisationCollisions: on a file system that ignores
// Unicode normalisation (APFS, HFS+), "café" spelt with U+00E9 and with
// "e" + U+0301 is one file, so whichever came second was refused as
// "other content" or, with --overwrite, replaced the first. Every key of
// such a group is refused, naming the others, and none is written; with
// case folding too (macOS's default) "CAFÉ" joins the group. (Linux's
// file systems tell them apart: the test says what the directory
// ignores, as the probes would find on macOS; TestProbeNormFold checks
// the probe here.)
func TestGetRefusesNormalisationCollisions(t *testing.T) {
	files := map[string][]byte{
		"caf\u00e9.txt":  []byte("composed\n"),
		"cafe\u0301.txt": []byte("decomposed\n"),
		"CAF\u00c9.txt":  []byte("upper composed\n"),
		"\u212b.txt":     []byte("angstrom sign\n"), // NFD: A + U+030A, as U+00C5
		"\u00c5.txt":     []byte("A with ring\n"),
		"ok.txt":         []byte("ok\n"),
	}
	st := t.TempDir()
	u, _ := packDir(t, st, files, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-norm", FrameSize: 4096})
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
	for _, c := range []struct {
		name                 string
		foldsCase, overwrite bool
		refused, written     []string
		says                 string
	}{
		{"normalisation", false, false,
			[]string{"caf\u00e9.txt", "cafe\u0301.txt", "\u212b.txt", "\u00c5.txt"}, []string{"CAF\u00c9.txt", "ok.txt"},
			"this file system ignores Unicode normalisation, and the archive also has "},
		{"normalisation, --overwrite", false, true,
			[]string{"caf\u00e9.txt", "cafe\u0301.txt", "\u212b.txt", "\u00c5.txt"}, []string{"CAF\u00c9.txt", "ok.txt"},
			"the same but for Unicode normalisation"},
		{"case and normalisation", true, false,
			[]string{"caf\u00e9.txt", "cafe\u0301.txt", "CAF\u00c9.txt", "\u212b.txt", "\u00c5.txt"}, []string{"ok.txt"},
			"this file system ignores case and Unicode normalisation, and the archive has 2 other keys of this name"},
	} {
		sel, missing, err := selectFiles(ctx, a, []string{"/"})
		if err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		var stderr strings.Builder
		g := &getter{a: a, sel: sel, dir: out, stderr: &stderr, pf: &progressFlags{quiet: true, interval: time.Hour, stderr: &stderr},
			overwrite: c.overwrite, foldsCase: c.foldsCase, foldsNorm: true}
		err = g.run(ctx, sel, missing, 4)
		var ff filesFailed
		if !errors.As(err, &ff) || ff.failed != len(c.refused) {
			t.Fatalf("%s: %v, want %d failed\n%s", c.name, err, len(c.refused), stderr.String())
		}
		for _, k := range c.refused {
			if !strings.Contains(stderr.String(), "key "+printable(k)+": refused: this file system ignores") {
				t.Errorf("%s: %q not refused as a collision:\n%s", c.name, k, stderr.String())
			}
			if _, err := os.Lstat(filepath.Join(out, k)); err == nil {
				t.Errorf("%s: %q written", c.name, k)
			}
		}
		if !strings.Contains(stderr.String(), c.says) {
			t.Errorf("%s: the refusals do not say %q:\n%s", c.name, c.says, stderr.String())
		}
		for _, k := range c.written {
			if got, err := os.ReadFile(filepath.Join(out, k)); err != nil || string(got) != string(files[k]) {
				t.Errorf("%s: %q not written: %v", c.name, k, err)
			}
		}
	}
}

// TestProbeNormFold: the probe finds that this test's temporary directory
// tells normalisations apart (Linux), leaves nothing behind, and its
// temporary name is one a later get's sweep takes for get's own, in
// either spelling. (Guard test.)
func TestProbeNormFold(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	g := &getter{root: root}
	if g.probeNormFold() {
		t.Errorf("the probe says %s ignores Unicode normalisation", dir)
	}
	noTempFiles(t, dir)
	for name, want := range map[string]bool{
		".wharf-get-0123456789abcdef-\u00e9.tmp":  true,
		".wharf-get-0123456789abcdef-e\u0301.tmp": true,
		".wharf-get-0123456789abcdef.tmp":         true,
		".wharf-get-0123456789abcdef-e.tmp":       false,
		".wharf-get-0123456789abcde-\u00e9.tmp":   false,
	} {
		if isTempName(name) != want {
			t.Errorf("isTempName(%q) = %v, want %v", name, !want, want)
		}
	}
	fo := folder{rule: foldRule{caseFold: true, normFold: true}}
	for _, c := range [][2]string{{"caf\u00e9", "CAFE\u0301"}, {"\u212b", "\u00e5"}, {"\u1e9b\u0323", "\u1e61\u0323"}} {
		a := string(fo.key(c[0]))
		if b := string(fo.key(c[1])); a != b {
			t.Errorf("fold(%q) %q != fold(%q) %q", c[0], a, c[1], b)
		}
	}
	if string(fo.key("caf\u00e9")) == string(fo.key("cafe")) {
		t.Error("the fold drops the accent")
	}
}

// TestFoldKeepsMarksInPlace: "ι" folds with U+0345 (a combining mark);
// taken as the fold, the decomposition after it moved it behind the
// marks before it, so "ι\u0301" and "\u0301ι" (different names to a file
// system that folds by the case-folding table) were refused as one.
// The fold now keeps the orbit's smallest base letter, and a mark whose
// folds are all marks stays itself.
func TestFoldKeepsMarksInPlace(t *testing.T) {
	fo := folder{rule: foldRule{caseFold: true, normFold: true}}
	a := string(fo.key("\u03b9\u0301"))
	if b := string(fo.key("\u0301\u03b9")); a == b {
		t.Errorf("fold(ι + U+0301) = fold(U+0301 + ι) = %q: two names taken for one", a)
	}
	for _, c := range [][2]string{{"\u03b9\u0301", "\u0399\u0301"}, {"\u0345", "\u03b9"}, {"\u1fbe", "\u03b9"}, {"\u0390", "\u03b9\u0308\u0301"}} {
		if x, y := string(fo.key(c[0])), string(fo.key(c[1])); x != y {
			t.Errorf("fold(%q) %q != fold(%q) %q", c[0], x, c[1], y)
		}
	}
	if got := foldCase("\u0301"); got != "\u0301" {
		t.Errorf("foldCase(U+0301) = %q, want the mark itself", got)
	}
}
