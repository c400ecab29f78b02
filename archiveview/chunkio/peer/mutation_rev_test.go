package peer

// Tests written for the hand mutants of the rev-mutation audit that no
// test killed (TESTING.md, "Mutation audit (rev-mutation)").

import (
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestOwnerChecksWhatItServes: an owner checks the bytes it fetched from
// the backend for a peer against the frame's sha256 before it answers
// (and fetches once more when they fail), so a byte flipped in transit to
// the owner never reaches the asker: no asker counts a peer's answer as
// failing its sha256 (and backs off an honest owner for it), and every
// file reads back exactly. The store flips one byte of every GET of
// bytes no GET asked for before (in transit: a second fetch of them is
// clean).
func TestOwnerChecksWhatItServes(t *testing.T) {
	dir, key, files := testArchive(t, 12)
	var mu sync.Mutex
	var asked [][2]int64 // every range requested so far
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		if r.Op != "range" || r.Len < 2 {
			return faults.Fault{}
		}
		mu.Lock()
		defer mu.Unlock()
		first := true
		for _, a := range asked {
			if r.Off < a[1] && a[0] < r.Off+r.Len {
				first = false
			}
		}
		asked = append(asked, [2]int64{r.Off, r.Off + r.Len})
		if !first {
			return faults.Fault{}
		}
		return faults.Fault{Kind: faults.FaultFlip, FlipAt: []int64{r.Off + r.Len/2}}
	}})
	rs := newFleet(t, 3, store, key, fleetOpts{})
	for _, r := range rs {
		for k, b := range files {
			r.readAll(t, k, b)
		}
	}
	var lies, hits float64
	for _, r := range rs {
		for _, o := range rs {
			lies += testutil.ToFloat64(r.group.m.verifyFailures.WithLabelValues(o.url))
		}
		hits += testutil.ToFloat64(r.group.m.hits)
	}
	if lies != 0 {
		t.Fatalf("%v peer answers failed their sha256 at the asker: an owner served bytes it fetched flipped", lies)
	}
	if hits == 0 {
		t.Fatal("no frame was answered by a peer: the test proves nothing")
	}
	t.Logf("%v frames answered by peers, none failing", hits)
}
