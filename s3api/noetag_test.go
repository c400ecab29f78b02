package s3api_test

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestBytesNoETagStore: behind a store that reports no ETag (and so
// ignores If-Match), nothing can pin a chunk to the bytes its one whole
// check read, so a ranged read that relies on that check (plain tar,
// direct objects, unframed zstd, giant frames) must not be served from an
// object replaced since: it is refused, while frame-checked and
// whole-file reads, which check their own bytes, are still served.
func TestBytesNoETagStore(t *testing.T) {
	files := byFiles()
	for _, sh := range byShapes() {
		sh.store.NoETags = true
		t.Run(sh.name, func(t *testing.T) {
			dir, mk := byPack(t, sh, files)
			e := byServe(t, sh, dir, mk, files, nil)
			rq := byRequests[1] // a range in the middle
			before, why := byGet(t, e, false, "mid.bin", rq, false)
			t.Logf("before the replacement: %v %s", before, why)
			// Every data object is replaced (new bytes, same size).
			err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || strings.Contains(p, "manifest") {
					return err
				}
				rel, _ := filepath.Rel(dir, p)
				return byReplace(dir, "", rel)
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, h2 := range []bool{false, true} {
				out, why := byGet(t, e, h2, "mid.bin", rq, false) // a clean wrong answer fails here
				t.Logf("after, h2 %v: %v %s", h2, out, why)
			}
			// The whole file is still checked as it streams: never clean
			// with the replaced bytes.
			out, why := byGet(t, e, false, "mid.bin", byRequests[0], false)
			t.Logf("whole after: %v %s", out, why)
		})
	}
}
