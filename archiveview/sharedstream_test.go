package archiveview

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
)

// TestConcurrentRangesShareOneDecode (issue 24, legacy giant frames):
// five concurrent 8 MiB ranged readers of a 40 MiB file stored as one
// giant zstd frame (an old CargoShip's shape; the SDK downloaders read
// large files this way) and of the same file as an unframed zstd chunk
// share one decode pass: each later range waits for the shared stream to
// reach it instead of decoding from the start. The backend is read at
// most twice the frame (the first ranged read's whole check, then the
// decode). On the old code every reader decoded from the start: about
// 4x the frame (8+16+24+32+40 MiB after the check).
func TestConcurrentRangesShareOneDecode(t *testing.T) {
	const size, span = 40 << 20, 8 << 20
	compress := func(string) bool { return false }
	for _, sh := range []struct {
		name string
		opt  cargopack.Options
		want chunkio.Kind
	}{
		{"giant-frame", cargopack.Options{FrameSize: 64 << 20, NoSubFrames: true, PlainTar: compress}, chunkio.FramedZstd},
		{"unframed-stream", cargopack.Options{FrameSize: 0, PlainTar: compress}, chunkio.StreamZstd},
	} {
		t.Run(sh.name, func(t *testing.T) {
			files := map[string][]byte{"big.bin": rpRandom(81, size)}
			ra := rpNew(t, files, sh.opt, Options{MaxFrameBytes: 1 << 20})
			c, _ := rpChunkOf(t, ra, "big.bin")
			if c.Kind != sh.want || (sh.want == chunkio.FramedZstd && (len(c.Frames) != 1 || c.Frames[0].USize <= 1<<20)) {
				t.Fatalf("want one %v stream, got %v with %d frames", sh.want, c.Kind, len(c.Frames))
			}
			var object int64
			for _, f := range c.Frames {
				object += f.CSize
			}
			if object == 0 {
				object = c.Size
			}
			ra.faulty.Reset()
			f, _ := ra.a.Stat("big.bin")
			errs := make([]error, size/span)
			var wg sync.WaitGroup
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					off := int64(i) * span
					r, err := ra.a.Open(context.Background(), f, off, span)
					if err != nil {
						errs[i] = err
						return
					}
					defer r.Close()
					var b bytes.Buffer
					if _, err := b.ReadFrom(r); err != nil {
						errs[i] = err
					} else if !bytes.Equal(b.Bytes(), files["big.bin"][off:off+span]) {
						errs[i] = fmt.Errorf("wrong bytes at %d", off)
					}
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("reader %d: %v", i, err)
				}
			}
			got := ra.faulty.BytesReturned()
			t.Logf("%d readers of %d MiB: backend %d bytes = %.2fx the %d-byte object", len(errs), span>>20, got, float64(got)/float64(object), object)
			if float64(got) > 2.02*float64(object) {
				t.Errorf("backend read %d bytes, %.2fx the object (%d); want at most 2x (check, then one decode)", got, float64(got)/float64(object), object)
			}
		})
	}
}
