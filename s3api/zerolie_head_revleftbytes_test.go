package s3api_test

import (
	"strings"
	"testing"
)

// TestBytesZeroSizeLieHead: HEAD does not promise what GET refuses. A
// manifest that says 0 bytes of a 300 KiB file (its sha256 still the real
// one's, not the empty string's) gets a 500 naming the key on HEAD as on
// GET, without fetching anything (the empty body's sum is known); a real
// empty file still answers 200 with Content-Length 0.
func TestBytesZeroSizeLieHead(t *testing.T) {
	files := byFiles()
	head := byRequests[len(byRequests)-1]
	if head.method != "HEAD" {
		t.Fatalf("byRequests' last entry is %s, not HEAD", head.method)
	}
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
				hout, hwhy := byGetLie(t, e, h2, "mid.bin", head, 0)
				gout, gwhy := byGetLie(t, e, h2, "mid.bin", byRequests[0], 0)
				t.Logf("h2 %v: HEAD %v %s; GET %v %s", h2, hout, hwhy, gout, gwhy)
				if hout == byClean {
					t.Errorf("h2 %v: HEAD of a 300 KiB file whose manifest says 0 bytes answered %s while GET answers %s", h2, hwhy, gwhy)
				}
			}
			if logs := e.logs.String(); !strings.Contains(logs, "archive "+testBucket+": key mid.bin") || !strings.Contains(logs, "sha256 mismatch") {
				t.Errorf("the log does not name the archive, the key and the mismatch:\n%s", logs)
			}
		})
	}
}
