package archiveview

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
)

// hdrGateStore holds every range GET of a chunk that starts before
// dataOff (the frames holding the member's tar header) until a GET at or
// after dataOff (the data's frames) has started, or gives up after wait.
type hdrGateStore struct {
	backend.Store
	dataOff int64
	wait    time.Duration
	once    sync.Once
	open    chan struct{}
}

func (g *hdrGateStore) ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, backend.ObjectInfo, error) {
	if strings.HasSuffix(key, ".tar.zst") {
		if off >= g.dataOff {
			g.once.Do(func() { close(g.open) })
		} else {
			select {
			case <-g.open:
			case <-time.After(g.wait):
				return nil, backend.ObjectInfo{}, fmt.Errorf("header frame GET (offset %d) was not overlapped by the data frames' GET: %w", off, backend.ErrUnavailable)
			case <-ctx.Done():
				return nil, backend.ObjectInfo{}, ctx.Err()
			}
		}
	}
	return g.Store.ReadRange(ctx, bucket, key, off, length, ifMatch)
}

// TestHeaderCheckOverlapsDataFetch: a cold partial read of a member whose
// data lies in later frames than its tar header fetches the header's
// frame and the data's frames at once (the header's GET is held here until
// the data's has started: fetched one after the other, as before, the
// read fails), and the bytes are served only once the header was checked.
func TestHeaderCheckOverlapsDataFetch(t *testing.T) {
	files := map[string][]byte{"big.bin": rpText(7, 1<<20)}
	dir, res := rpPack(t, files, cargopack.Options{FrameSize: 64 << 10, ChunkSize: 4 << 20})
	var dataOff int64 = -1
	base := *res.Manifest.Files[0].ArchiveOffset
	for _, f := range res.Manifest.Chunks[0].Frames {
		if f.UncompressedOffset <= base+512<<10 && base+512<<10 < f.UncompressedOffset+f.UncompressedSize {
			dataOff = f.CompressedOffset
		}
	}
	if dataOff <= 0 {
		t.Fatal("no frame holds byte 512 KiB of the file")
	}
	g := &hdrGateStore{Store: backend.NewFileStore(dir), dataOff: dataOff, wait: 5 * time.Second, open: make(chan struct{})}
	a, err := Open(context.Background(), g, rpBucket, res.ManifestKey, Options{Name: "arch", Readahead: -1, SmallVerifyBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	ra := &rpArchive{dir: dir, res: res, files: files, a: a}
	ra.mustRead(t, "big.bin", 512<<10, 1000, false)
}
