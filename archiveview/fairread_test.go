package archiveview

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
)

// Fair use of backend reads and memory (issue 20, finding 1): many
// concurrent ranged readers of one stream-decoded file (a giant frame, an
// unframed zstd stream) cannot freeze the server. Each reader is answered,
// with its exact bytes or chunkio.ErrBusy (503 SlowDown), never left
// waiting; and a read of another archive served by the same process is
// answered within a second while they run.

// fairStreamShapes are the two stream-decoded shapes, each with one file
// of size bytes read as one stream (incompressible, so its compressed
// bytes are as large as it is and its parts are split into sub-range GETs).
func fairStreamShapes() []rpShape {
	compress := func(string) bool { return false } // zstd even for random bytes
	return []rpShape{
		{name: "giant-frame", opt: cargopack.Options{FrameSize: 32 << 20, NoSubFrames: true, PlainTar: compress},
			opts: Options{MaxFrameBytes: 1 << 20}, want: []string{"giant-frame"}},
		{name: "unframed-stream", opt: cargopack.Options{FrameSize: 0, PlainTar: compress}, want: []string{"stream-zstd"}},
	}
}

// fairReaders runs n concurrent ranged readers of key (1 MiB each, spread
// over the file) and, once they are under way, one read of other's file in
// another archive on the same FrameCache. It returns how many readers were
// served exact and how many were refused busy; it fails the test when a
// reader gets anything else, when the other read takes more than a second,
// or when a reader is still waiting after limit.
func fairReaders(t *testing.T, ra *rpArchive, key string, n int, other *rpArchive, otherKey string, limit time.Duration) (served, busy int) {
	t.Helper()
	want := ra.files[key]
	f, ok := ra.a.Stat(key)
	if !ok {
		t.Fatalf("Stat(%q)", key)
	}
	const span = 1 << 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := int64(i) * (f.Size - span) / int64(n)
			r, err := ra.a.Open(context.Background(), f, off, span)
			if err != nil {
				errs[i] = err
				return
			}
			defer r.Close()
			var b bytes.Buffer
			if _, err := b.ReadFrom(r); err != nil {
				errs[i] = err
				return
			}
			if !bytes.Equal(b.Bytes(), want[off:off+span]) {
				errs[i] = fmt.Errorf("reader %d: wrong bytes at %d", i, off)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	time.Sleep(300 * time.Millisecond) // the readers are under way
	if other != nil {
		got := make(chan error, 1)
		start := time.Now()
		go func() {
			b, err := other.read(t, otherKey, 0, int64(len(other.files[otherKey])), true)
			if err == nil && !bytes.Equal(b, other.files[otherKey]) {
				err = errors.New("wrong bytes")
			}
			got <- err
		}()
		select {
		case err := <-got:
			if err != nil {
				t.Errorf("the other archive's read failed: %v", err)
			}
			t.Logf("the other archive's read answered in %v", time.Since(start).Round(time.Millisecond))
		case <-time.After(time.Second):
			t.Errorf("the other archive's read waited more than a second while %d readers read %s", n, key)
		}
	}
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("%d readers of %s: some still waiting after %v (%d goroutines)", n, key, limit, runtime.NumGoroutine())
	}
	for i, err := range errs {
		switch {
		case err == nil:
			served++
		case errors.Is(err, chunkio.ErrBusy):
			busy++
		default:
			t.Errorf("reader %d: %v", i, err)
		}
	}
	return served, busy
}

// TestFairStreamReaders: 64 and 128 concurrent ranged readers of a giant
// frame and of an unframed zstd stream, at the default limits (64 GETs in
// flight, the default memory budget). On the old code, demand launches
// took their GET slots one at a time while holding the others: every
// reader then hangs, and so does the other archive's read.
func TestFairStreamReaders(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 2 GiB through stream decoders")
	}
	for _, sh := range fairStreamShapes() {
		files := map[string][]byte{"big.bin": rpRandom(7, 16<<20)}
		for _, n := range []int{64, 128} {
			for _, mem := range []int64{0, 4 << 30} {
				t.Run(fmt.Sprintf("%s/%d/mem=%dMiB", sh.name, n, mem>>20), func(t *testing.T) {
					cache := chunkio.NewFrameCache(chunkio.DefaultCacheBudget, chunkio.WithMemory(mem), chunkio.WithMemoryWait(10*time.Second))
					opts := sh.opts
					opts.Cache, opts.Readahead = cache, -1
					ra := rpNew(t, files, sh.opt, opts)
					for _, w := range sh.want {
						if !rpFeatures(ra.a)[w] {
							t.Fatalf("the archive has no %s", w)
						}
					}
					other := rpNew(t, map[string][]byte{"other.txt": rpText(3, 1<<20)},
						cargopack.Options{FrameSize: 256 << 10, UploadID: "20250607-other"}, Options{Cache: cache, Name: "other"})
					start := time.Now()
					served, busy := fairReaders(t, ra, "big.bin", n, other, "other.txt", 45*time.Second)
					t.Logf("%d readers: %d served exact, %d refused busy, in %v", n, served, busy, time.Since(start).Round(time.Millisecond))
					if served == 0 {
						t.Errorf("no reader was served")
					}
				})
			}
		}
	}
}

// TestFairStreamReadersSmallMemory: at a small read memory (80 MiB), 24
// concurrent readers of a stream-decoded file are served (most of them; a
// refusal is 503 SlowDown), not all failed after the memory wait. On the
// old code each reader took its first part, then waited for its decoder's
// memory while holding the part: every one failed after the wait.
func TestFairStreamReadersSmallMemory(t *testing.T) {
	for _, sh := range fairStreamShapes() {
		t.Run(sh.name, func(t *testing.T) {
			files := map[string][]byte{"big.bin": rpRandom(8, 16<<20)}
			const wait = 10 * time.Second
			cache := chunkio.NewFrameCache(16<<20, chunkio.WithMemory(80<<20), chunkio.WithMemoryWait(wait))
			opts := sh.opts
			opts.Cache, opts.Readahead = cache, -1
			ra := rpNew(t, files, sh.opt, opts)
			start := time.Now()
			served, busy := fairReaders(t, ra, "big.bin", 24, nil, "", 3*wait)
			took := time.Since(start)
			t.Logf("24 readers at 80 MiB: %d served exact, %d refused busy, in %v", served, busy, took.Round(time.Millisecond))
			if served < 12 {
				t.Errorf("only %d of 24 readers served", served)
			}
			if used, peak := cache.MemoryInUse(); peak > 80<<20 {
				t.Errorf("peak %d bytes charged (in use %d), over the 80 MiB budget", peak, used)
			}
		})
	}
}
