package main

import (
	"bytes"
	"context"
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
