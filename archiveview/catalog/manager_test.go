package catalog

import (
	"context"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestManagerRefreshesStorageClasses: with Options.StorageClasses, opening
// an archive lists its upload prefix once, every rescan lists it again (so
// a class changed behind wharf's back is seen), and nothing is listed on
// the read path.
func TestManagerRefreshesStorageClasses(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"a.txt": []byte("hello archive"), "b.txt": []byte("more bytes here")}
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, time.Unix(1700000000, 0)),
		cargopack.Options{Bucket: "lake", Prefix: "p", UploadID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	g := faults.NewGlacier(faults.GlacierConfig{})
	faulty := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	cm := NewManager(Config{
		Store:    g.Store(faulty),
		Options:  archiveview.Options{StorageClasses: true},
		Archives: []Source{{Name: "arch", ManifestURL: "s3://lake/" + res.ManifestKey}},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := cm.OpenStatic(ctx); err != nil {
		t.Fatal(err)
	}
	defer cm.CloseAll()
	if n := faulty.Requests("list"); n != 1 {
		t.Fatalf("%d listings at open, want 1 (one upload prefix)", n)
	}
	a, _ := cm.Catalog().Bucket("arch")
	f, _ := a.Stat("a.txt")
	if c := a.StorageClass(f); c != backend.ClassStandard {
		t.Fatalf("class before: %s", c)
	}
	rc, err := a.Open(ctx, f, 0, f.Size)
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if n := faulty.Requests("list"); n != 1 {
		t.Fatalf("the read path listed (%d listings)", n)
	}

	g.SetPrefixClass("lake", "p/uploads/u1/", backend.ClassGlacier, "")
	trigger := make(chan string)
	scanned := make(chan error, 1)
	go cm.RescanLoop(ctx, 0, trigger, func(err error) { scanned <- err })
	trigger <- "test"
	if err := <-scanned; err != nil {
		t.Fatal(err)
	}
	// The refresh ran before the scan's callback.
	if c := a.StorageClass(f); c != backend.ClassGlacier {
		t.Fatalf("class after the rescan: %s", c)
	}
	if n := faulty.Requests("list"); n != 2 {
		t.Fatalf("%d listings after one rescan, want 2", n)
	}
}
