package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// TestLsQuotesUnprintableNames: a hostile archive's keys may hold what
// the manifest's key rules let through but a terminal acts on: C1
// controls (U+009B is CSI, U+0085 a line break) and bidi overrides
// (U+202E shows "evil\u202etxt.exe" as "evilexe.txt"). ls's text lines
// print such a name Go-quoted, so no such rune reaches the terminal and
// the name is shown as it is; ordinary names, spaces and non-ASCII
// letters included, print as before (as aws s3 ls does).
func TestLsQuotesUnprintableNames(t *testing.T) {
	files := map[string][]byte{
		"ok naïve.txt":      []byte("ok\n"),
		"clear\u009b2J.txt": []byte("csi\n"),
		"evil\u202etxt.exe": []byte("bidi\n"),
		"d\u0085x/y.txt":    []byte("nel\n"),
	}
	st := t.TempDir()
	u, _ := packDir(t, st, files, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-names", FrameSize: 4096})
	for _, args := range [][]string{{u}, {"--recursive", u}, {"--versions", "--recursive", u}} {
		var out bytes.Buffer
		if err := lsCmd(context.Background(), append([]string{"--store", "file://" + st}, args...), &out); err != nil {
			t.Fatal(err)
		}
		for _, r := range out.String() {
			if r != '\n' && r != ' ' && !unicode.IsPrint(r) {
				t.Errorf("ls %q printed the unprintable rune %U:\n%s", args, r, out.String())
				break
			}
		}
		for _, want := range []string{" ok naïve.txt\n", " " + strconv.Quote("clear\u009b2J.txt") + "\n", " " + strconv.Quote("evil\u202etxt.exe") + "\n"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("ls %q: output lacks %q:\n%s", args, want, out.String())
			}
		}
	}
}

// TestProblemLinesPrintable: get's and verify's lines about a hostile
// key (a C1 control, a bidi override in it) whose bytes are damaged, and
// the final error line of any command, print such runes escaped
// ("\u009b"), so no line naming a key acts on the terminal.
func TestProblemLinesPrintable(t *testing.T) {
	big := make([]byte, 64<<10)
	x := uint32(3)
	for i := range big {
		x = x*1103515245 + 12345
		big[i] = byte(x >> 16)
	}
	files := map[string][]byte{"bad\u009b2J\u202eexe.txt": big, "ok.txt": []byte("ok\n")}
	st := t.TempDir()
	u, res := packDir(t, st, files, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-dmg", FrameSize: 8192})
	for _, k := range res.ObjectKeys { // damage the middle of every chunk: the big file's frames
		p := filepath.Join(st, "bkt", filepath.FromSlash(k))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0x55
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"get", "-q", "--store", "file://" + st, u, "/", "-o", t.TempDir()},
		{"get", "-q", "--store", "file://" + st, u, "bad\u009b2J\u202eexe.txt", "-o", "-"},
		{"get", "-q", "--store", "file://" + st, u, "missing\u009b.txt", "-o", t.TempDir()},
		{"verify", "-q", "--store", "file://" + st, u},
	} {
		stdout, stderr, code := runWharf(t, args...)
		if code != 1 {
			t.Errorf("wharf %q: exit %d, want 1\n%s", args, code, stderr)
		}
		out := stdout + stderr
		if args[len(args)-1] == "-" {
			out = stderr // the bytes streamed are the file's
		}
		for _, r := range out {
			if r != '\n' && r != '\t' && r != ' ' && !unicode.IsPrint(r) {
				t.Errorf("wharf %q printed the unprintable rune %U:\n%s", args, r, out)
				break
			}
		}
		if !strings.Contains(out, `\u009b`) {
			t.Errorf("wharf %q: no line names the key (escaped):\n%s", args, out)
		}
	}
}

// TestRestorePrintable: a manifest's chunk keys are checked for ".." and
// emptiness only, so a hostile one may hold an ESC (C0) or C1 control;
// restore's report, which names every object, prints them escaped.
func TestRestorePrintable(t *testing.T) {
	st := t.TempDir()
	u, res := packDir(t, st, map[string][]byte{"a.txt": []byte("a\n")}, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-ck", FrameSize: 4096})
	evil := "uploads/u-ck/shard-0/evil\x1b[2J\u009b.tar.zst"
	rewriteManifest(t, filepath.Join(st, "bkt", filepath.FromSlash(res.ManifestKey)), func(m map[string]any) {
		for _, f := range m["files"].([]any) {
			f.(map[string]any)["s3_key"] = evil
		}
		for _, c := range m["chunks"].([]any) {
			c.(map[string]any)["s3_key"] = evil
		}
		for _, s := range m["shards"].([]any) {
			s.(map[string]any)["chunk_keys"] = []string{evil}
		}
	})
	stdout, stderr, code := runWharf(t, "restore", "--store", "file://"+st, "--days", "1", "--dry-run", u)
	if code != 0 {
		t.Fatalf("restore --dry-run: exit %d\n%s", code, stderr)
	}
	for _, r := range stdout {
		if r != '\n' && r != '\t' && r != ' ' && !unicode.IsPrint(r) {
			t.Errorf("restore printed the unprintable rune %U:\n%q", r, stdout)
			break
		}
	}
	if want := `evil\x1b[2J\u009b.tar.zst`; !strings.Contains(stdout, want) {
		t.Errorf("restore's report does not name the object as %s:\n%s", want, stdout)
	}
}

// TestInfoLinesPrintable: an upload id is checked only for being one key
// segment, so a hostile manifest's may hold ESC or a C1 control; the text
// reports naming it (inspect, ls --versions, index build and show) print
// it escaped.
func TestInfoLinesPrintable(t *testing.T) {
	st := t.TempDir()
	u, res := packDir(t, st, map[string][]byte{"a.txt": []byte("a\n")}, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-id", FrameSize: 4096})
	rewriteManifest(t, filepath.Join(st, "bkt", filepath.FromSlash(res.ManifestKey)), func(m map[string]any) {
		m["upload_id"] = "u-id\x1b[2J\u009b"
	})
	idx := filepath.Join(t.TempDir(), "a.widx")
	for _, args := range [][]string{
		{"inspect", "--store", "file://" + st, u},
		{"ls", "--versions", "--recursive", "--store", "file://" + st, u},
		{"index", "build", "-q", "--store", "file://" + st, u, "-o", idx},
		{"index", "show", idx},
	} {
		stdout, stderr, code := runWharf(t, args...)
		if code != 0 {
			t.Fatalf("wharf %q: exit %d\n%s", args, code, stderr)
		}
		for _, r := range stdout {
			if r != '\n' && r != '\t' && r != ' ' && !unicode.IsPrint(r) {
				t.Errorf("wharf %q printed the unprintable rune %U:\n%q", args, r, stdout)
				break
			}
		}
		if want := `u-id\x1b[2J\u009b`; !strings.Contains(stdout, want) {
			t.Errorf("wharf %q does not name the upload as %s:\n%s", args, want, stdout)
		}
	}
}
