package s3api_test

import (
	"strings"
	"testing"
)

// TestBytesZeroSizeLie: a manifest that says a file of 300 KiB has 0
// bytes (its sha256 still the real one's) does not serve it as a clean
// empty object: the empty body does not match the file's sha256, a 500
// naming the key, logged naming the archive and the key. (A real empty
// file is served: Test14HeadGetListingAgree, TestPartNumberOfEmptyObject.)
func TestBytesZeroSizeLie(t *testing.T) {
	files := byFiles()
	for _, sh := range byShapes() {
		if sh.name == "split" {
			continue
		}
		t.Run(sh.name, func(t *testing.T) {
			dir, mk := byPack(t, sh, files)
			byLie(t, dir, mk, "mid.bin", func(fe map[string]any) { fe["size"] = 0.0 })
			e := byServeOpen(t, sh, dir, mk, files)
			if e == nil {
				return
			}
			for _, h2 := range []bool{false, true} {
				out, why := byGetLie(t, e, h2, "mid.bin", byRequests[0], 0)
				t.Logf("h2 %v: %v %s", h2, out, why)
				if out == byClean {
					t.Errorf("h2 %v: a 300 KiB file whose manifest says 0 bytes was served as a clean empty object: %s", h2, why)
				}
			}
			if logs := e.logs.String(); !strings.Contains(logs, "archive "+testBucket+": key mid.bin") || !strings.Contains(logs, "sha256 mismatch") {
				t.Errorf("the log does not name the archive, the key and the mismatch:\n%s", logs)
			}
		})
	}
}
