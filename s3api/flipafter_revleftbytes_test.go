package s3api_test

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// TestBytesFlipAfterCheck: bytes flipped in transit after a span's one
// whole check (plain tar members, direct objects, giant frames, unframed
// zstd) are not served by later ranged GETs: each block a ranged read
// uses is checked against the sums the span's check took (chunkio
// blocksums.go). Before, this was the measured limit "anything read after
// a check" (TestBytesUnderFaults tolerates it with e.limit).
func TestBytesFlipAfterCheck(t *testing.T) {
	files := byFiles()
	var late byFault
	for _, fl := range byFaults() {
		if fl.name == "flip-late" {
			late = fl
		}
	}
	if late.hook == nil {
		t.Fatal("no flip-late fault")
	}
	for _, sh := range byShapes() {
		if sh.name != "plain" && sh.name != "direct" && sh.name != "giant" && sh.name != "unframed" {
			continue
		}
		dir, mk := byPack(t, sh, files)
		for _, rq := range byRequests {
			if rq.method == "HEAD" || rq.rng == nil {
				continue
			}
			for _, h2 := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/h2=%v", sh.name, rq.name, h2), func(t *testing.T) {
					var n atomic.Int64
					e := byServe(t, sh, byCopyDir(t, dir), mk, files, late.hook(&n))
					for _, key := range []string{"small.bin", "mid.bin", "big.bin"} {
						out, why := byGet(t, e, h2, key, rq, true) // fails the test on wrong bytes behind a clean answer
						t.Logf("%s: %v %s", key, out, why)
					}
				})
			}
		}
	}
}
