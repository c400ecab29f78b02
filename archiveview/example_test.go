package archiveview_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
)

// Open serves one CargoShip upload: Stat and List answer from the index,
// Open reads a file's verified bytes.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "wharf-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	// An upload of two files, written as CargoShip does, into a file store.
	mtime := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(map[string][]byte{
		"docs/readme.txt": []byte("hello, wharf\n"),
		"data/a.csv":      []byte("x,y\n1,2\n"),
	}, mtime), cargopack.Options{Bucket: "archive", Prefix: "team", UploadID: "20250102-00000001",
		FrameSize: 16 << 10, Created: mtime, Hostname: "example"})
	if err != nil {
		panic(err)
	}

	ctx := context.Background()
	a, err := archiveview.Open(ctx, backend.NewFileStore(dir), "archive", res.ManifestKey, archiveview.Options{Name: "team-data"})
	if err != nil {
		panic(err)
	}
	defer a.Close()

	page := a.List(archiveview.ListParams{Delimiter: "/", MaxKeys: 10})
	for _, e := range page.Entries {
		fmt.Println("listed:", e.Name())
	}
	f, ok := a.Stat("docs/readme.txt")
	if !ok {
		panic("missing")
	}
	rc, err := a.Open(ctx, f, 0, f.Size)
	if err != nil {
		panic(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %d bytes, version %s: %q\n", f.Key, f.Size, f.VersionID, b)
	// Output:
	// listed: data/
	// listed: docs/
	// docs/readme.txt: 13 bytes, version 20250102-00000001: "hello, wharf\n"
}
