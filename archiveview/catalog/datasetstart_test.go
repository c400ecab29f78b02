package catalog

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/backend"
)

// TestDatasetRescanDuringStartOpen: a rescan while a dataset version the
// start began opening is still opening (a slow manifest) does not wait
// for that open (it did not start it), whether CURRENT still names that
// version or has turned bad meanwhile, and does not cancel it: the bucket
// serves the version once the manifest arrives.
func TestDatasetRescanDuringStartOpen(t *testing.T) {
	for _, bad := range []bool{false, true} {
		name := "same pointer"
		if bad {
			name = "pointer turned bad"
		}
		t.Run(name, func(t *testing.T) {
			d := publishDataset(t)
			gs := newGateStore(backend.NewFileStore(d.dir))
			cm := NewManager(Config{Store: gs, Aliases: []Alias{{Name: "ocean", Target: "s3://lake/ocean@current"}},
				OpenTimeout: time.Minute, OpenWait: 50 * time.Millisecond, RetireGrace: time.Hour, Logger: zerolog.Nop()})
			defer cm.CloseAll()
			if err := cm.Scan(context.Background(), true); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the start's manifest GET", func() bool { n, _, _ := gs.state(); return n == 1 })
			if bad {
				writeObject(t, d.dir, dsPrefix+"/CURRENT", `{"schema":"cargoship.current/2"}`)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			start := time.Now()
			err := cm.Scan(ctx, false)
			if took := time.Since(start); err != nil || took > 2*time.Second {
				t.Fatalf("rescan: %v after %v; want it done at once, not waiting for the start's open", err, took)
			}
			close(gs.gate)
			waitFor(t, "the start's open", cm.Ready)
			checkTree(t, bucketArchive(t, cm, "ocean"), v1Files)
		})
	}
}
