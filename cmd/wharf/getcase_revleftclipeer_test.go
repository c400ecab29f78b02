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

// TestGetRefusesCaseCollisions: on a file system that ignores case (macOS,
// Windows), keys differing only in case are one file: whichever came
// second replaced (with --overwrite) or was refused as "other content"
// against the first, by chance of order. Every key of such a group is
// refused, naming the others, and none written, with --overwrite too; the
// other files are written. (Linux's file systems tell case apart: the
// test says the directory ignores case, as the probe would find on
// macOS; TestProbeCaseFold checks the probe here.) Before, the second key
// of each pair replaced the first under --overwrite, and "K" (Kelvin
// sign) with "k" was not seen at all.
func TestGetRefusesCaseCollisions(t *testing.T) {
	files := map[string][]byte{
		"Readme.md":    []byte("upper\n"),
		"readme.md":    []byte("lower\n"),
		"README.MD":    []byte("all upper\n"),
		"d/\u212a.txt": []byte("kelvin\n"), // folds with d/k.txt
		"d/k.txt":      []byte("k\n"),
		"D/other.txt":  []byte("no twin\n"),
		"ok.txt":       []byte("ok\n"),
	}
	st := t.TempDir()
	u, _ := packDir(t, st, files, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-case", FrameSize: 4096})
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
	for _, overwrite := range []bool{false, true} {
		sel, missing, err := selectFiles(ctx, a, []string{"/"})
		if err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		var stderr strings.Builder
		g := &getter{a: a, sel: sel, dir: out, stderr: &stderr, pf: &progressFlags{quiet: true, interval: time.Hour, stderr: &stderr},
			overwrite: overwrite, foldsCase: true}
		err = g.run(ctx, sel, missing, 4)
		var ff filesFailed
		if !errors.As(err, &ff) || ff.failed != 5 {
			t.Fatalf("--overwrite %v: %v, want 5 failed\n%s", overwrite, err, stderr.String())
		}
		for _, k := range []string{"Readme.md", "readme.md", "README.MD", "d/\u212a.txt", "d/k.txt"} {
			if !strings.Contains(stderr.String(), "key "+printable(k)+": refused: this file system ignores case") {
				t.Errorf("--overwrite %v: %s not refused as a case collision:\n%s", overwrite, k, stderr.String())
			}
			if _, err := os.Lstat(filepath.Join(out, k)); err == nil {
				t.Errorf("--overwrite %v: %s written", overwrite, k)
			}
		}
		if !strings.Contains(stderr.String(), "the archive has 2 other keys of this name (README.MD, readme.md)") {
			t.Errorf("the refusal of Readme.md does not name the other two:\n%s", stderr.String())
		}
		for _, k := range []string{"D/other.txt", "ok.txt"} {
			if got, err := os.ReadFile(filepath.Join(out, k)); err != nil || string(got) != string(files[k]) {
				t.Errorf("--overwrite %v: %s not written: %v", overwrite, k, err)
			}
		}
	}
}

// TestProbeCaseFold: the probe finds that this test's temporary directory
// tells case apart (Linux), leaves nothing behind, and foldCase folds as
// a case-insensitive file system does. (Guard test.)
func TestProbeCaseFold(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	g := &getter{root: root}
	if g.probeCaseFold() {
		t.Errorf("the probe says %s ignores case", dir)
	}
	noTempFiles(t, dir)
	for _, c := range [][2]string{{"ABC", "abc"}, {"\u212a", "k"}, {"Straße", "STRAßE"}, {"Σσς", "σΣΣ"}} {
		if foldCase(c[0]) != foldCase(c[1]) {
			t.Errorf("foldCase(%q) %q != foldCase(%q) %q", c[0], foldCase(c[0]), c[1], foldCase(c[1]))
		}
	}
	if foldCase("a.txt") == foldCase("a.txu") {
		t.Error("foldCase folds different names together")
	}
}

// TestGetCaseCollisionReportBounded: a hostile archive whose 2,048 keys
// are all one name but for case gets one refusal line per key, each
// naming at most a few of the others and how many there are: output and
// work in proportion to the keys, not to their square. Before, each line
// named all 2,047 others (27 KB a line, 55 MB in all, and as many
// string joins).
func TestGetCaseCollisionReportBounded(t *testing.T) {
	const name = "abcdefghijk" // 11 letters: 2,048 spellings
	files := map[string][]byte{}
	for m := range 1 << len(name) {
		b := []byte(name)
		for i := range b {
			if m&(1<<i) != 0 {
				b[i] -= 'a' - 'A'
			}
		}
		files[string(b)] = []byte{byte(m)}
	}
	st := t.TempDir()
	u, _ := packDir(t, st, files, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-case-many", FrameSize: 4096})
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
	sel, missing, err := selectFiles(ctx, a, []string{"/"})
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	g := &getter{a: a, sel: sel, dir: t.TempDir(), stderr: &stderr, pf: &progressFlags{quiet: true, interval: time.Hour, stderr: &stderr}, foldsCase: true}
	err = g.run(ctx, sel, missing, 4)
	var ff filesFailed
	if !errors.As(err, &ff) || ff.failed != len(files) {
		t.Fatalf("%v, want all %d refused", err, len(files))
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	for _, l := range lines {
		if len(l) > 1024 {
			t.Fatalf("a refusal line of %d bytes: %.300s...", len(l), l)
		}
	}
	if !strings.Contains(stderr.String(), "2047 other keys") {
		t.Errorf("the refusals do not say how many others share the name: %.500s", stderr.String())
	}
	t.Logf("%d lines, %d bytes", len(lines), stderr.Len())
}
