package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// TestLsJSONEscapesUnprintable: ls --json (and inspect --json) write every
// rune a terminal may act on as a JSON escape: C1 controls (U+009B CSI,
// U+0085 NEL), bidi controls (U+202E, U+2066, U+200F, U+061C), other
// format characters (U+FEFF, U+200B) and a plane-14 tag (U+E0041, as a
// surrogate pair), so a terminal showing the JSON never acts on a key's
// bytes; each line still decodes to the key exactly. Before, encoding/json
// escaped C0 only and wrote the rest raw.
func TestLsJSONEscapesUnprintable(t *testing.T) {
	keys := []string{
		"ok naïve.txt",
		"clear\u009b2J.txt",
		"nel\u0085x.txt",
		"evil\u202etxt.exe",
		"iso\u2066late\u2069.txt",
		"rlm\u200f\u061c.txt",
		"bom\ufeffzw\u200b.txt",
		"tag\U000e0041.txt",
		"sep\u2028para\u2029.txt",
	}
	files := map[string][]byte{}
	for _, k := range keys {
		files[k] = []byte(k)
	}
	st := t.TempDir()
	u, _ := packDir(t, st, files, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-json", FrameSize: 4096})
	for _, args := range [][]string{{"--json", "--recursive", u}, {"--json", "--versions", "--recursive", u}} {
		var out bytes.Buffer
		if err := lsCmd(context.Background(), append([]string{"--store", "file://" + st}, args...), &out); err != nil {
			t.Fatal(err)
		}
		for _, r := range out.String() {
			if r != '\n' && r != ' ' && !unicode.IsPrint(r) {
				t.Errorf("ls %q printed the unprintable rune %U raw", args, r)
			}
		}
		got := map[string]bool{}
		sc := bufio.NewScanner(&out)
		for sc.Scan() {
			var e lsEntry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("ls %q: a line is not JSON: %v: %q", args, err, sc.Text())
			}
			got[e.Key] = true
		}
		for _, k := range keys {
			if !got[k] {
				t.Errorf("ls %q: key %q not decoded back from the JSON", args, k)
			}
		}
	}
	var w strings.Builder
	if _, err := (jsonSafeWriter{&w}).Write([]byte(`{"k":"a` + "\u009b\U000e0041" + `"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if want := `{"k":"a\u009b\udb40\udc41"}` + "\n"; w.String() != want {
		t.Errorf("jsonSafeWriter wrote %q, want %q", w.String(), want)
	}
}
