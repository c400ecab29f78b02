package archiveview

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
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
// reader gets anything else, when the other read takes more than a second
// twice, or when a reader is still waiting after limit.
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
	opened := make(chan struct{}, n) // one per reader whose Open returned
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := int64(i) * (f.Size - span) / int64(n)
			r, err := ra.a.Open(context.Background(), f, off, span)
			opened <- struct{}{}
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

	// The readers are under way once every Open returned (an event, not
	// a sleep: on a loaded machine 300 ms saw only some of them started).
	// Their reads take seconds after that.
	for range n {
		select {
		case <-opened:
		case <-time.After(limit):
			t.Fatalf("%d readers of %s: not all opened after %v", n, key, limit)
		}
	}
	if other != nil {
		// The other read must answer within a second. A miss is measured
		// once more while the readers still run: a load spike on a shared
		// 2-core machine (-race) misses once, the defect this guards (the
		// other read waits behind the readers' hold-and-wait, for their
		// whole memory wait) misses both.
		var misses []string
		for len(misses) < 2 {
			took, ok, err := otherRead(t, other, otherKey)
			if err != nil {
				t.Errorf("the other archive's read failed: %v", err)
			}
			if ok {
				t.Logf("the other archive's read answered in %v", took.Round(time.Millisecond))
				break
			}
			misses = append(misses, took.Round(time.Millisecond).String())
			select {
			case <-done:
				if len(misses) < 2 {
					t.Logf("the readers ended before the other read could be measured again")
					misses = append(misses, "(readers ended)")
				}
			default:
			}
		}
		if len(misses) == 2 {
			t.Errorf("the other archive's read waited more than a second while %d readers read %s, twice: %s", n, key, strings.Join(misses, ", then "))
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

// TestFairClientShare: one client that opens many reads and reads none of
// them past its first KiB (30 framed 12 MiB files: their parts and frames
// ahead pin memory) holds at most its share of the budget, so another
// client's 1 MB read of another archive is answered within a second. With
// the share off (WithClientShare(1), the old behaviour) the stalled reads
// take the whole budget and the other client's read waits for the memory
// wait and fails busy.
func TestFairClientShare(t *testing.T) {
	for _, tc := range []struct {
		name  string
		share float64
		fair  bool
	}{{"share-0.25", 0, true}, {"share-off", 1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			const wait = 3 * time.Second
			cache := chunkio.NewFrameCache(0, chunkio.WithMemory(48<<20), chunkio.WithMemoryWait(wait), chunkio.WithPartSize(1<<20),
				chunkio.WithClientShare(tc.share))
			files := map[string][]byte{}
			base := rpRandom(20, 12<<20)
			for i := range 30 { // 30 files: the readers share no frame
				f := bytes.Clone(base)
				f[0] = byte(i)
				files[fmt.Sprintf("f%d.bin", i)] = f
			}
			greedy := rpNew(t, files, cargopack.Options{FrameSize: 1 << 20, PlainTar: func(string) bool { return false }},
				Options{Cache: cache, Readahead: -1})
			other := rpNew(t, map[string][]byte{"one.bin": rpRandom(30, 1<<20)},
				cargopack.Options{FrameSize: 1 << 20, UploadID: "20250607-other"}, Options{Cache: cache, Name: "other"})

			ctxA := chunkio.WithClient(context.Background(), "key:greedy")
			var held []interface{ Close() error }
			defer func() {
				for _, r := range held {
					r.Close()
				}
			}()
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i := range 30 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					key := fmt.Sprintf("f%d.bin", i)
					f, _ := greedy.a.Stat(key)
					r, err := greedy.a.Open(ctxA, f, 0, f.Size)
					if err != nil {
						return // refused busy: its share is used
					}
					var b [1024]byte
					_, _ = r.Read(b[:])
					mu.Lock()
					held = append(held, r)
					mu.Unlock()
				}()
			}
			wg.Wait()
			time.Sleep(300 * time.Millisecond) // the stalled readers' windows fill
			used, _ := cache.MemoryInUse()
			share, _ := cache.Limits().ClientShare()
			t.Logf("%d stalled reads hold %d MiB of %d MiB (client share %d MiB)", len(held), used>>20, cache.MemoryBudget()>>20, share>>20)

			ctxB := chunkio.WithClient(context.Background(), "key:other")
			f, _ := other.a.Stat("one.bin")
			start := time.Now()
			r, err := other.a.Open(ctxB, f, 0, f.Size)
			var got bytes.Buffer
			if err == nil {
				_, err = got.ReadFrom(r)
				r.Close()
			}
			took := time.Since(start)
			t.Logf("the other client's 1 MiB read: %v in %v", err, took.Round(time.Millisecond))
			if tc.fair {
				if err != nil || !bytes.Equal(got.Bytes(), other.files["one.bin"]) || took > time.Second {
					t.Errorf("the other client's read: %v after %v, want its bytes within a second", err, took)
				}
			} else if err == nil && took < wait/2 {
				t.Errorf("with the share off the other client's read was not held up: the test proves nothing")
			}
		})
	}
}

// otherRead reads other's file otherKey whole and says how long it took
// (at least a second if it had not answered by then: it is waited for, up
// to a minute) and whether it answered within a second.
func otherRead(t *testing.T, other *rpArchive, otherKey string) (took time.Duration, ok bool, err error) {
	t.Helper()
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
	case err = <-got:
		return time.Since(start), time.Since(start) <= time.Second, err
	case <-time.After(time.Second):
	}
	select {
	case err = <-got:
	case <-time.After(time.Minute):
		err = errors.New("no answer in a minute")
	}
	return time.Since(start), false, err
}
