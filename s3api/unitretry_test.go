package s3api_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestBytesUnitCheckTransient: one body corrupted in transit while a span
// no frame checksum covers is read whole for its check (plain tar, direct
// object, unframed zstd, giant frame) is read again, as a frame is: the
// ranged GET is served right, and so are the next ones. Before, the
// mismatch was remembered as the object's, and every ranged read of it
// was a 500 until the server restarted. Bytes wrong at rest still fail
// (TestBytesUnderFaults, flip-always).
func TestBytesUnitCheckTransient(t *testing.T) {
	files := byFiles()
	for _, sh := range byShapes() {
		if sh.name != "giant" && sh.name != "unframed" && sh.name != "plain" && sh.name != "direct" {
			continue
		}
		t.Run(sh.name, func(t *testing.T) {
			dir, mk := byPack(t, sh, files)
			var n atomic.Int64
			e := byServe(t, sh, dir, mk, files, func(r faults.Request) faults.Fault {
				if (r.Op != "range" && r.Op != "get") || strings.Contains(r.Key, "manifest") || n.Add(1) != 1 {
					return faults.Fault{}
				}
				return faults.Fault{Kind: faults.FaultFlip, FlipAt: byFlipEvery(40000)}
			})
			for i := range 3 {
				if out, why := byGet(t, e, i == 2, "mid.bin", byRequests[1], false); out != byClean {
					t.Errorf("ranged GET %d after one corrupted body: %s", i+1, why)
				}
			}
			if !strings.Contains(e.logs.String(), "reading it again") {
				t.Errorf("the first mismatch was not logged")
			}
		})
	}
}

// TestBytesStreamCheckTransient: a whole unframed object whose stream
// decode met one body corrupted in transit (its sha256 fails at the
// decode's end) is decoded again by the next read; only a second
// mismatch is remembered as the object's. Before, the first one was, and
// every read of a file in that chunk was a 500 until a restart.
func TestBytesStreamCheckTransient(t *testing.T) {
	files := byFiles()
	sh := byShapes()[2]
	if sh.name != "unframed" {
		t.Fatalf("shape %s", sh.name)
	}
	for _, key := range []string{"small.bin", "mid.bin"} {
		t.Run(key, func(t *testing.T) {
			dir, mk := byPack(t, sh, files)
			var n atomic.Int64
			e := byServe(t, sh, dir, mk, files, func(r faults.Request) faults.Fault {
				if (r.Op != "range" && r.Op != "get") || strings.Contains(r.Key, "manifest") || n.Add(1) != 1 {
					return faults.Fault{}
				}
				return faults.Fault{Kind: faults.FaultFlip, FlipAt: byFlipEvery(40000)}
			})
			out, why := byGet(t, e, false, key, byRequests[0], false)
			t.Logf("first whole GET, its body corrupted in transit: %v %s", out, why)
			for i := range 2 {
				if out, why := byGet(t, e, i == 1, key, byRequests[0], false); out != byClean {
					t.Errorf("whole GET %d after one corrupted body: %s", i+2, why)
				}
			}
		})
	}
}

// TestBytesTarWalkTransient: a chunk whose members have no recorded
// offset (manifest 2.0, uploads before #492) is walked; a walk that met
// one body corrupted in transit is walked again, not remembered as the
// chunk's failure (before: every read of the chunk's files was a 500
// until a restart).
func TestBytesTarWalkTransient(t *testing.T) {
	files := byFiles()
	small := archiveview.Options{SmallVerifyBytes: 128 << 10}
	for _, sh := range []byShape{
		{name: "v2.0", pack: cargopack.Options{Version: "2.0"}, open: small},
		{name: "pre492", pack: cargopack.Options{Pre492: true}, open: small},
	} {
		for _, rq := range byRequests[:2] {
			t.Run(sh.name+"/"+rq.name, func(t *testing.T) {
				dir, mk := byPack(t, sh, files)
				var n atomic.Int64
				e := byServe(t, sh, dir, mk, files, func(r faults.Request) faults.Fault {
					if (r.Op != "range" && r.Op != "get") || strings.Contains(r.Key, "manifest") || n.Add(1) != 1 {
						return faults.Fault{}
					}
					return faults.Fault{Kind: faults.FaultFlip, FlipAt: byFlipEvery(40000)}
				})
				for i := range 3 {
					if out, why := byGet(t, e, i == 2, "mid.bin", rq, false); out != byClean {
						t.Errorf("GET %d after one corrupted body: %s", i+1, why)
					}
				}
			})
		}
	}
}
