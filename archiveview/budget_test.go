package archiveview

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/internal/index"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestBudgetStalledGiantReaders: readers of giant frames (stream decoded,
// each holding a decoder window, a segment and parts in flight) that stall
// after their first bytes cannot take the process past its memory budget.
// Readers beyond what the budget holds wait and then fail with
// chunkio.ErrBusy (a 503 for the client), never allocate past the budget;
// once the stalled readers go, every byte of the budget comes back and new
// reads are served exact.
func TestBudgetStalledGiantReaders(t *testing.T) {
	const (
		giant  = 4 << 20 // frames streamed above 1 MiB
		memory = 40 << 20
	)
	files := map[string][]byte{}
	for _, k := range []string{"g0.bin", "g1.bin", "g2.bin", "g3.bin"} {
		files[k] = rpText(uint64(len(files))+9, 3*giant)
	}
	cache := chunkio.NewFrameCache(4<<20, chunkio.WithMemory(memory), chunkio.WithMemoryWait(300*time.Millisecond))
	ra := rpNew(t, files, cargopack.Options{FrameSize: giant}, Options{Cache: cache, MaxFrameBytes: 1 << 20, Readahead: -1})
	if !rpFeatures(ra.a)["giant-frame"] {
		t.Fatal("the archive has no giant frames")
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	type stalled struct {
		r   io.ReadCloser
		err error
	}
	const readers = 40
	got := make([]stalled, readers)
	var wg sync.WaitGroup
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := []string{"g0.bin", "g1.bin", "g2.bin", "g3.bin"}[i%4]
			f, _ := ra.a.Stat(key)
			off := int64(i/4) * (giant / 4) // inside the giant frames
			r, err := ra.a.Open(context.Background(), f, off, f.Size-off)
			if err == nil {
				var b [1024]byte
				if _, err = io.ReadFull(r, b[:]); err == nil && !bytes.Equal(b[:], files[key][off:off+1024]) {
					err = errors.New("wrong bytes")
				}
			}
			got[i] = stalled{r: r, err: err}
		}()
	}
	wg.Wait()
	used, peak := cache.MemoryInUse()
	runtime.GC() // twice: idle pooled buffers go with the second
	runtime.GC()
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	served, busy := 0, 0
	for i, s := range got {
		switch {
		case s.err == nil:
			served++
		case errors.Is(s.err, chunkio.ErrBusy):
			busy++
		default:
			t.Errorf("reader %d: %v", i, s.err)
		}
	}
	t.Logf("%d readers stalled, %d refused busy; budget %d, in use %d, peak %d; heap in use +%d MiB",
		served, busy, memory, used, peak, (int64(during.HeapInuse)-int64(before.HeapInuse))>>20)
	if peak > memory {
		t.Fatalf("peak %d bytes charged, over the %d-byte budget", peak, memory)
	}
	if served == 0 || busy == 0 {
		t.Fatalf("%d served, %d busy: the budget was not the limit, the test proves nothing", served, busy)
	}
	// The heap follows the budget (slack for the decoders' own tables,
	// goroutines and the test's buffers).
	if grew := int64(during.HeapInuse) - int64(before.HeapInuse); grew > memory+16<<20 {
		t.Errorf("heap grew by %d bytes with a %d-byte budget", grew, memory)
	}
	for _, s := range got {
		if s.r != nil {
			s.r.Close()
		}
	}
	ra.a.Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		if used, _ := cache.MemoryInUse(); used <= cache.Budget() {
			break // what is left is cached frames, within the cache budget
		}
		if time.Now().After(deadline) {
			used, _ := cache.MemoryInUse()
			t.Fatalf("%d bytes still charged after every reader closed", used)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// New reads work and are exact.
	rb := rpOpenDir(t, ra.dir, ra.res, files, Options{Cache: cache, MaxFrameBytes: 1 << 20, Readahead: -1})
	for k, want := range files {
		b, err := rb.read(t, k, 1000, giant+5000, true)
		if err != nil || !bytes.Equal(b, want[1000:1000+giant+5000]) {
			t.Fatalf("%s after the stalled readers: %v", k, err)
		}
	}
}

// TestPlannerBytesPerWorkload counts backend requests and bytes, which
// are exact and what S3 bills: a walk of small files reads each frame once
// (bytes <= 1.05x the compressed size), a cold random read never reads
// beyond the frames covering the file, and one large read keeps several
// GETs in flight.
func TestPlannerBytesPerWorkload(t *testing.T) {
	files := rpSmallFiles(400)
	files["large.bin"] = rpRandom(3, 24<<20)
	ra := rpNew(t, files, cargopack.Options{FrameSize: 1 << 20}, Options{Cache: chunkio.NewFrameCache(256 << 20)})
	var compressed int64
	for i := range ra.a.tree.Chunks {
		compressed += ra.a.tree.Chunks[i].Size
	}

	t.Run("walk", func(t *testing.T) {
		ra.faulty.Reset()
		ra.walk(t)
		got := ra.faulty.BytesReturned()
		if float64(got) > 1.05*float64(compressed) {
			t.Errorf("walk read %d backend bytes, %.3fx the compressed %d", got, float64(got)/float64(compressed), compressed)
		}
		t.Logf("walk: %d GETs, %d bytes (%.3fx compressed)", ra.faulty.Requests("range"), got, float64(got)/float64(compressed))
	})

	t.Run("cold random reads", func(t *testing.T) {
		for _, key := range []string{"d17/file-00017.txt", "d18/file-00203.txt", "d29/file-00399.txt", "large.bin"} {
			rc := rpOpenDir(t, ra.dir, ra.res, files, Options{Cache: chunkio.NewFrameCache(64 << 20), Readahead: -1})
			f, ok := rc.a.Stat(key)
			if !ok {
				t.Fatalf("no %s", key)
			}
			off, n := f.Size/3, min(f.Size/3+1, 100_000)
			// The covering frames: those holding the bytes read, and the
			// one holding the tar header in front of the file (checked
			// once before its bytes are served).
			var covering int64
			for _, e := range rc.a.fileExtents(index.Ordinal(f)) {
				c := &rc.a.tree.Chunks[e.Chunk]
				seen := map[int]bool{}
				for _, span := range [][2]int64{{e.Off - 512, e.Off}, {e.Off + off, e.Off + off + n}} {
					lo, hi, err := chunkio.CoverFrames(c.Frames, span[0], span[1])
					if err != nil {
						t.Fatal(err)
					}
					for i := lo; i <= hi; i++ {
						if !seen[i] {
							seen[i] = true
							covering += c.Frames[i].CSize
						}
					}
				}
			}
			rc.faulty.Reset()
			b, err := rc.read(t, key, off, n, true)
			if err != nil || !bytes.Equal(b, files[key][off:off+n]) {
				t.Fatalf("%s: %v", key, err)
			}
			if got := rc.faulty.BytesReturned(); got > covering {
				t.Errorf("%s: read %d backend bytes, the covering frames hold %d", key, got, covering)
			}
		}
	})

	t.Run("large read keeps GETs in flight", func(t *testing.T) {
		rc := rpOpenDir(t, ra.dir, ra.res, files, Options{Cache: chunkio.NewFrameCache(64 << 20), Readahead: -1})
		inFlight := rpMaxConcurrentGETs(t, rc, "large.bin")
		if inFlight < 4 {
			t.Errorf("at most %d range GETs in flight for a 24 MiB read", inFlight)
		}
		if inFlight > chunkio.DefaultStreamParts+1 {
			t.Errorf("%d range GETs in flight for one read, more than the stream limit %d", inFlight, chunkio.DefaultStreamParts)
		}
		t.Logf("large read: up to %d GETs in flight, %d in all", inFlight, rc.faulty.Requests("range"))
	})
}

// concStore counts range GET bodies open at once.
type concStore struct {
	backend.Store
	mu        sync.Mutex
	open, max int
}

func (s *concStore) ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, backend.ObjectInfo, error) {
	rc, info, err := s.Store.ReadRange(ctx, bucket, key, off, length, ifMatch)
	if err != nil {
		return rc, info, err
	}
	s.mu.Lock()
	s.open++
	s.max = max(s.max, s.open)
	s.mu.Unlock()
	return &concBody{ReadCloser: rc, s: s}, info, nil
}

type concBody struct {
	io.ReadCloser
	s    *concStore
	once sync.Once
}

func (b *concBody) Close() error {
	b.once.Do(func() {
		b.s.mu.Lock()
		b.s.open--
		b.s.mu.Unlock()
	})
	return b.ReadCloser.Close()
}

// rpMaxConcurrentGETs reads key whole through a store that delivers 4 MB/s
// per response after 5 ms, and returns the most range GETs open at once.
func rpMaxConcurrentGETs(t *testing.T, ra *rpArchive, key string) int {
	t.Helper()
	cs := &concStore{Store: faults.NewFaulty(backend.NewFileStore(ra.dir), faults.FaultConfig{Latency: 5 * time.Millisecond, Bandwidth: 4 << 20})}
	a, err := Open(context.Background(), cs, rpBucket, ra.res.ManifestKey, Options{Name: "conc", Cache: chunkio.NewFrameCache(64 << 20), Readahead: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	f, _ := a.Stat(key)
	r, err := a.Open(context.Background(), f, 0, f.Size)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var b bytes.Buffer
	if _, err := r.(io.WriterTo).WriteTo(&b); err != nil || !bytes.Equal(b.Bytes(), ra.files[key]) {
		t.Fatalf("%s: %v", key, err)
	}
	return cs.max
}
