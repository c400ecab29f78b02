package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// getTree is a source tree with nested directories, odd names, an empty
// file and a file large enough to split and to span frames.
func getTree() map[string][]byte {
	files := map[string][]byte{
		"README.md":               []byte("# wharf get\n"),
		"d/empty":                 {},
		"d/sub/deep/leaf.txt":     bytes.Repeat([]byte("leaf "), 900),
		"d/with space & more.txt": []byte("spaces and ampersands\n"),
		"dir-ü/naïve.csv":         []byte("a,b\n1,2\n"),
		"big/large.bin":           nil,
	}
	big := make([]byte, 300<<10)
	x := uint32(7)
	for i := range big {
		x = x*1103515245 + 12345
		big[i] = byte(x >> 16)
	}
	files["big/large.bin"] = big
	for i := 0; i < 12; i++ {
		files[fmt.Sprintf("d/f%02d.txt", i)] = bytes.Repeat([]byte(fmt.Sprintf("file %d\n", i)), 200*(i+1))
	}
	files["d/copy-of-f03.txt"] = files["d/f03.txt"]
	return files
}

var getMtime = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

func runGetCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	err = getCmd(context.Background(), args, &o, &e)
	return o.String(), e.String(), err
}

// checkTree compares the files under out with want, bytes and mtimes.
func checkTree(t *testing.T, out string, want map[string][]byte) {
	t.Helper()
	got := map[string]bool{}
	filepath.Walk(out, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().IsRegular() {
			rel, _ := filepath.Rel(out, p)
			got[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if len(got) != len(want) {
		t.Errorf("%d files under %s, want %d", len(got), out, len(want))
	}
	for k, b := range want {
		p := filepath.Join(out, filepath.FromSlash(k))
		data, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v", k, err)
			continue
		}
		if !bytes.Equal(data, b) {
			t.Errorf("%s: %d bytes differ from the source's %d", k, len(data), len(b))
		}
		fi, _ := os.Stat(p)
		if !fi.ModTime().Equal(getMtime) {
			t.Errorf("%s: mtime %v, want %v", k, fi.ModTime(), getMtime)
		}
	}
	noTempFiles(t, out)
}

// TestGetAndLsEveryShape extracts the whole tree of every archive shape
// and compares bytes and mtimes; a second run skips every file (resume);
// a damaged file is rewritten (--overwrite) when the manifest has sha256s, and without
// them size+mtime is the (documented) test. ls --recursive --json lists
// the same keys and sizes.
func TestGetAndLsEveryShape(t *testing.T) {
	files := getTree()
	for _, sh := range []struct {
		name   string
		opt    cargopack.Options
		noSums bool
	}{
		{"framed", cargopack.Options{FrameSize: 16 << 10, ChunkSize: 128 << 10}, false},
		{"stream", cargopack.Options{}, false},
		{"plain", cargopack.Options{PlainTar: func(string) bool { return true }}, false},
		{"split", cargopack.Options{FrameSize: 32 << 10, ChunkSize: 128 << 10, SplitSize: 100 << 10}, false},
		{"direct", cargopack.Options{Direct: true}, false},
		{"dedup", cargopack.Options{FrameSize: 16 << 10, Dedup: true}, false},
		{"v2.0", cargopack.Options{Version: "2.0"}, false},
		{"no-checksums", cargopack.Options{FrameSize: 16 << 10, NoChecksums: true}, true},
	} {
		t.Run(sh.name, func(t *testing.T) {
			store := t.TempDir()
			opt := sh.opt
			opt.Bucket, opt.Prefix, opt.UploadID, opt.Created = "bkt", "p", "u-"+sh.name, getMtime
			url, _ := packDir(t, store, files, getMtime, opt)
			out := filepath.Join(t.TempDir(), "out")
			_, stderr, err := runGetCmd(t, "--store", "file://"+store, "-q", url, "/", "-o", out)
			if err != nil {
				t.Fatalf("get: %v\n%s", err, stderr)
			}
			checkTree(t, out, files)
			if want := fmt.Sprintf("%d files written", len(files)); !strings.Contains(stderr, want) {
				t.Errorf("summary lacks %q: %s", want, stderr)
			}

			_, stderr, err = runGetCmd(t, "--store", "file://"+store, "-q", url, "/", "-o", out)
			if err != nil || !strings.Contains(stderr, fmt.Sprintf("0 files written (0 B), %d already present", len(files))) {
				t.Fatalf("second run did not skip every file: %v\n%s", err, stderr)
			}

			// Same size, other bytes, same mtime.
			victim := filepath.Join(out, "d", "f05.txt")
			damaged := bytes.ToUpper(files["d/f05.txt"])
			if err := os.WriteFile(victim, damaged, 0o644); err != nil {
				t.Fatal(err)
			}
			os.Chtimes(victim, getMtime, getMtime)
			_, stderr, err = runGetCmd(t, "--store", "file://"+store, "-q", "--overwrite", url, "d/f05.txt", "-o", out)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(victim)
			if sh.noSums {
				// Without a sha256 the same size and mtime count as present.
				if !bytes.Equal(got, damaged) || !strings.Contains(stderr, "1 already present") {
					t.Fatalf("without sha256s a same-size same-mtime file must be kept: %s", stderr)
				}
				os.Chtimes(victim, getMtime.Add(time.Hour), getMtime.Add(time.Hour))
				if _, stderr, err = runGetCmd(t, "--store", "file://"+store, "-q", "--overwrite", url, "d/f05.txt", "-o", out); err != nil {
					t.Fatal(err)
				}
				got, _ = os.ReadFile(victim)
			}
			if !bytes.Equal(got, files["d/f05.txt"]) || !strings.Contains(stderr, "1 files written") {
				t.Fatalf("damaged file not rewritten: %s", stderr)
			}
			checkTree(t, out, files)

			var lsOut bytes.Buffer
			if err := lsCmd(context.Background(), []string{"--store", "file://" + store, "--recursive", "--json", url}, &lsOut); err != nil {
				t.Fatal(err)
			}
			seen := 0
			for _, line := range strings.Split(strings.TrimSpace(lsOut.String()), "\n") {
				var e lsEntry
				if err := json.Unmarshal([]byte(line), &e); err != nil {
					t.Fatalf("ls --json line %q: %v", line, err)
				}
				b, ok := files[e.Key]
				if !ok || e.Size == nil || *e.Size != int64(len(b)) || e.VersionID != opt.UploadID || e.ETag == "" {
					t.Errorf("ls entry %+v does not match the source", e)
				}
				split := sh.opt.SplitSize > 0 && int64(len(b)) > sh.opt.SplitSize // parts have sums, the whole file none
				if (e.SHA256 == "") != (sh.noSums || split) {
					t.Errorf("ls entry %s: sha256 %q (manifest without sums: %v)", e.Key, e.SHA256, sh.noSums)
				}
				if ts, err := time.Parse(time.RFC3339Nano, e.LastModified); err != nil || !ts.Equal(getMtime) {
					t.Errorf("ls entry %s: last_modified %q", e.Key, e.LastModified)
				}
				seen++
			}
			if seen != len(files) {
				t.Errorf("ls --recursive listed %d files, want %d", seen, len(files))
			}
		})
	}
}

// chainArchive packs a base upload and an incremental one (a modified
// file, a new one, a deleted one) into one file store.
func chainArchive(t *testing.T) (store, url string, final map[string][]byte) {
	t.Helper()
	store = t.TempDir()
	base := map[string][]byte{"keep.txt": []byte("kept\n"), "mod.txt": []byte("version one\n"), "gone/old.txt": []byte("to be deleted\n")}
	delta := map[string][]byte{"mod.txt": []byte("version two, longer\n"), "new.txt": []byte("new in two\n")}
	common := cargopack.Options{Bucket: "bkt", Prefix: "chain", SourcePath: "/src", FrameSize: 4096, Created: getMtime}
	o1 := common
	o1.UploadID, o1.SyncType = "up-1", "full"
	packDir(t, store, base, getMtime, o1)
	o2 := common
	o2.UploadID, o2.PreviousManifestID, o2.SyncType, o2.DeletedPaths = "up-2", "up-1", "incremental", []string{"gone/old.txt"}
	o2.Created = getMtime.Add(time.Hour)
	url, _ = packDir(t, store, delta, getMtime, o2)
	final = map[string][]byte{"keep.txt": base["keep.txt"], "mod.txt": delta["mod.txt"], "new.txt": delta["new.txt"]}
	return store, url, final
}

func TestGetChainAndSelection(t *testing.T) {
	store, url, final := chainArchive(t)
	out := t.TempDir()
	if _, stderr, err := runGetCmd(t, "--store", "file://"+store, "-q", url, "/", "-o", out); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	checkTree(t, out, final)

	// A deleted key is named as deleted; the others are still written.
	out2 := t.TempDir()
	_, stderr, err := runGetCmd(t, "--store", "file://"+store, "-q", url, "gone/old.txt", "mod.txt", "nope/", "-o", out2)
	var ff filesFailed
	if !errors.As(err, &ff) || ff.failed != 2 {
		t.Fatalf("err %v, want 2 failed files", err)
	}
	for _, want := range []string{"gone/old.txt: no such file (deleted by upload up-2)", "nope/: no files under this prefix", "1 files written"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	checkTree(t, out2, map[string][]byte{"mod.txt": final["mod.txt"]})

	// Selection forms: a key, a prefix with "/", a directory without it.
	files := getTree()
	st := t.TempDir()
	u, _ := packDir(t, st, files, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-sel", FrameSize: 8192})
	out3 := t.TempDir()
	if _, stderr, err := runGetCmd(t, "--store", "file://"+st, "-q", "--parallel", "1", u, "README.md", "d/sub", "dir-ü/", "-o", out3); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	checkTree(t, out3, map[string][]byte{"README.md": files["README.md"], "d/sub/deep/leaf.txt": files["d/sub/deep/leaf.txt"], "dir-ü/naïve.csv": files["dir-ü/naïve.csv"]})

	// Exit codes through run(): 0, 1 (a file failed), 2 (usage).
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"get", "-q", "--store", "file://" + st, u, "README.md", "-o", t.TempDir()}, 0},
		{[]string{"get", "-q", "--store", "file://" + st, u, "README.md", "missing.txt", "-o", t.TempDir()}, 1},
		{[]string{"get", "-q", "--store", "file://" + st, u, "README.md"}, 2},
		{[]string{"get", "-q", "--store", "file://" + st, u, "-o", t.TempDir()}, 2},
		{[]string{"get", "-q", "--parallel", "0", "--store", "file://" + st, u, "README.md", "-o", t.TempDir()}, 2},
		{[]string{"get", "-q", "--cache-bytes", "lots", "--store", "file://" + st, u, "README.md", "-o", t.TempDir()}, 2},
		{[]string{"get", "-q", "--store", "file://" + st, u, "d/", "-o", "-"}, 2},
		{[]string{"get", "--bogus-flag"}, 2},
		{[]string{"get", "-q", "--store", "file://" + st, "s3://bkt/p/uploads/none/manifest.json.gz", "README.md", "-o", t.TempDir()}, 1},
		{[]string{"ls", "--store", "file://" + st, u, "zzz"}, 1},
		{[]string{"ls", "--store", "file://" + st}, 2},
	} {
		if got := run(c.args); got != c.code {
			t.Errorf("wharf %s: exit %d, want %d", strings.Join(c.args, " "), got, c.code)
		}
	}
}

// TestGetStdout streams one file to stdout, byte for byte.
func TestGetStdout(t *testing.T) {
	files := getTree()
	st := t.TempDir()
	u, _ := packDir(t, st, files, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-out", FrameSize: 8192, SplitSize: 64 << 10})
	for _, key := range []string{"big/large.bin", "d/empty", "dir-ü/naïve.csv"} {
		stdout, stderr, err := runGetCmd(t, "--store", "file://"+st, "-q", u, key, "-o", "-")
		if err != nil {
			t.Fatalf("%s: %v\n%s", key, err, stderr)
		}
		if stdout != string(files[key]) {
			t.Errorf("%s: stdout holds %d bytes, want the file's %d", key, len(stdout), len(files[key]))
		}
	}
}

// TestLocalPath: keys that could leave the target directory are refused
// before any file is opened.
func TestLocalPath(t *testing.T) {
	for _, c := range []struct {
		key string
		ok  bool
	}{
		{"a", true}, {"a/b/c.txt", true}, {"ü/x y", true}, {"..a/b..", true}, {`a\..\b`, true},
		{"", false}, {"/etc/passwd", false}, {"../x", false}, {"a/../../x", false}, {"a/..", false},
		{"a//b", false}, {"./a", false}, {"a/./b", false}, {"a/", false}, {"a\x00b", false}, {"..", false},
	} {
		_, err := localPath(c.key)
		if (err == nil) != c.ok {
			t.Errorf("localPath(%q): err %v, want ok=%v", c.key, err, c.ok)
		}
	}
}

// rewriteManifest rewrites the gzipped manifest at p through edit.
func rewriteManifest(t *testing.T, p string, edit func(m map[string]any)) {
	t.Helper()
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	js, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	js, _ = json.Marshal(m)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(js)
	zw.Close()
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGetNeverWritesOutside: a crafted manifest whose paths climb out of
// the tree is refused whole, and a symlink inside the target directory
// that leads out is not followed; nothing appears outside the target.
func TestGetNeverWritesOutside(t *testing.T) {
	files := map[string][]byte{"a.txt": []byte("aaa\n"), "b.txt": []byte("bbb\n"), "link/x.txt": []byte("xxx\n")}
	top := t.TempDir()
	store := filepath.Join(top, "store")
	out := filepath.Join(top, "work", "out")
	os.MkdirAll(out, 0o755)
	u, res := packDir(t, store, files, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-evil", FrameSize: 4096, SourcePath: "/src"})

	// 1. A symlink in DIR pointing outside: link/x.txt must not land in
	// the link's target.
	outside := filepath.Join(top, "outside")
	os.MkdirAll(outside, 0o755)
	if err := os.Symlink(outside, filepath.Join(out, "link")); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runGetCmd(t, "--store", "file://"+store, "-q", u, "/", "-o", out)
	var ff filesFailed
	if !errors.As(err, &ff) || ff.failed != 1 || !strings.Contains(stderr, "key link/x.txt") {
		t.Fatalf("symlinked directory: err %v\n%s", err, stderr)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("wrote through the symlink into %s: %v", outside, ents)
	}
	for _, k := range []string{"a.txt", "b.txt"} {
		if b, _ := os.ReadFile(filepath.Join(out, k)); !bytes.Equal(b, files[k]) {
			t.Errorf("%s not written", k)
		}
	}

	// 2. Crafted manifests: paths that climb out of the source tree.
	mp := filepath.Join(store, "bkt", filepath.FromSlash(res.ManifestKey))
	orig, _ := os.ReadFile(mp)
	for _, evil := range []string{"/src/../../../escape.txt", "../escape.txt", "/src/a/../../../../tmp/escape.txt", `C:\..\escape.txt`, "/src/\x00escape"} {
		os.WriteFile(mp, orig, 0o644)
		rewriteManifest(t, mp, func(m map[string]any) {
			for _, f := range m["files"].([]any) {
				fe := f.(map[string]any)
				if strings.HasSuffix(fe["path"].(string), "/b.txt") {
					fe["path"] = evil
				}
			}
		})
		clean := filepath.Join(top, "work", "clean")
		os.RemoveAll(clean)
		_, stderr, err := runGetCmd(t, "--store", "file://"+store, "-q", u, "/", "-o", clean)
		if err == nil {
			t.Errorf("path %q: get succeeded:\n%s", evil, stderr)
		}
		var found []string
		filepath.Walk(top, func(p string, fi os.FileInfo, err error) error {
			if err == nil && strings.Contains(fi.Name(), "escape") {
				found = append(found, p)
			}
			return nil
		})
		if len(found) > 0 {
			t.Fatalf("path %q: files written: %v", evil, found)
		}
		t.Logf("path %q: %v", evil, err)
	}
}

// TestLs lists like aws s3 ls: directories as PRE lines, names relative
// to the prefix's last "/", --recursive with full keys, --summarize, and
// --versions over a chain (text and JSON).
func TestLs(t *testing.T) {
	files := getTree()
	st := t.TempDir()
	u, _ := packDir(t, st, files, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-ls", FrameSize: 8192})
	lsRun := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := lsCmd(context.Background(), append([]string{"--store", "file://" + st}, args...), &out)
		return out.String(), err
	}
	ts := getMtime.Local().Format("2006-01-02 15:04:05")
	line := func(key string, name string) string {
		return fmt.Sprintf("%s %10d %s\n", ts, len(files[key]), name)
	}
	pre := func(name string) string { return fmt.Sprintf("%30s %s\n", "PRE", name) }

	out, err := lsRun(u)
	if err != nil {
		t.Fatal(err)
	}
	if want := line("README.md", "README.md") + pre("big/") + pre("d/") + pre("dir-ü/"); out != want {
		t.Errorf("ls root:\n%s\nwant:\n%s", out, want)
	}
	out, _ = lsRun(u, "d/s")
	if want := pre("sub/"); out != want {
		t.Errorf("ls d/s:\n%q\nwant:\n%q", out, want)
	}
	out, _ = lsRun(u, "d/f0")
	var want strings.Builder
	for i := 0; i < 10; i++ {
		k := fmt.Sprintf("d/f%02d.txt", i)
		want.WriteString(line(k, k[2:]))
	}
	if out != want.String() {
		t.Errorf("ls d/f0:\n%s\nwant:\n%s", out, want.String())
	}
	out, _ = lsRun(u, "--recursive", "--summarize", "d/sub/")
	if want := line("d/sub/deep/leaf.txt", "d/sub/deep/leaf.txt") + "\nTotal Objects: 1\n   Total Size: 4500\n"; out != want {
		t.Errorf("ls -r d/sub/:\n%s\nwant:\n%s", out, want)
	}
	out, _ = lsRun(u, "--json", "d/")
	var prefixes, keys int
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		if e["prefix"] != nil {
			prefixes++
			if e["prefix"] != "d/sub/" || len(e) != 1 {
				t.Errorf("prefix line %v", e)
			}
		} else {
			keys++
			for _, f := range []string{"key", "size", "last_modified", "etag", "version_id", "sha256"} {
				if _, ok := e[f]; !ok {
					t.Errorf("json line lacks %s: %v", f, e)
				}
			}
		}
	}
	if prefixes != 1 || keys != 15 {
		t.Errorf("ls --json d/: %d prefixes, %d keys", prefixes, keys)
	}
	if _, err := lsRun(u, "nothing-here"); err == nil {
		t.Error("empty listing: no error (aws s3 ls exits 1)")
	}

	// Versions of a chain.
	cst, cu, _ := chainArchive(t)
	var vout bytes.Buffer
	if err := lsCmd(context.Background(), []string{"--store", "file://" + cst, "--versions", "--recursive", cu}, &vout); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(vout.String()), "\n")
	wantLines := []string{
		fmt.Sprintf("%s %10s up-2 * gone/old.txt", getMtime.Add(time.Hour).Local().Format("2006-01-02 15:04:05"), "DELETED"),
		fmt.Sprintf("%s %10d up-1   gone/old.txt", ts, len("to be deleted\n")),
		fmt.Sprintf("%s %10d up-1 * keep.txt", ts, len("kept\n")),
		fmt.Sprintf("%s %10d up-2 * mod.txt", ts, len("version two, longer\n")),
		fmt.Sprintf("%s %10d up-1   mod.txt", ts, len("version one\n")),
		fmt.Sprintf("%s %10d up-2 * new.txt", ts, len("new in two\n")),
	}
	if strings.Join(lines, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("ls --versions:\n%s\nwant:\n%s", vout.String(), strings.Join(wantLines, "\n"))
	}
	vout.Reset()
	if err := lsCmd(context.Background(), []string{"--store", "file://" + cst, "--versions", "--json", cu, "gone/"}, &vout); err != nil {
		t.Fatal(err)
	}
	var ents []lsEntry
	for _, l := range strings.Split(strings.TrimSpace(vout.String()), "\n") {
		var e lsEntry
		json.Unmarshal([]byte(l), &e)
		ents = append(ents, e)
	}
	sort.SliceStable(ents, func(i, j int) bool { return false })
	if len(ents) != 2 || !*ents[0].DeleteMarker || !*ents[0].IsLatest || ents[0].VersionID != "up-2" || ents[0].Size != nil ||
		*ents[1].DeleteMarker || *ents[1].IsLatest || ents[1].VersionID != "up-1" || *ents[1].Size != int64(len("to be deleted\n")) {
		t.Errorf("ls --versions --json gone/: %s", vout.String())
	}
}
